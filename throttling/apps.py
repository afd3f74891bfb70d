from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ThrottlingConfig(AppConfig):
    name = "throttling"
    verbose_name = _("Throttling")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Imported here, where Django's app registry is ready for the models they use.
        from . import checks, receivers  # noqa: F401  (checks registers the system checks)

        receivers.connect(self)
