from django.apps import AppConfig
from django.db.models.signals import post_migrate
from django.utils.translation import gettext_lazy as _


class ThrottlingConfig(AppConfig):
    name = "throttling"
    verbose_name = _("Throttling")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from . import checks, declared, signals  # noqa: F401  (registers system checks)

        signals.connect()
        # After every migrate and flush: rows for THROTTLING_DEFAULT_POLICIES that have none.
        post_migrate.connect(
            declared.create_declared_policies, sender=self, dispatch_uid="throttling-declared-policies"
        )
