from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ThrottlingConfig(AppConfig):
    name = "throttling"
    verbose_name = _("Throttling")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from . import checks, signals  # noqa: F401  (registers system checks)

        signals.connect()
