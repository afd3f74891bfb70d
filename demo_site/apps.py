from django.apps import AppConfig


class DemoSiteConfig(AppConfig):
    name = "demo_site"
    verbose_name = "Demo community"
    default_auto_field = "django.db.models.BigAutoField"
