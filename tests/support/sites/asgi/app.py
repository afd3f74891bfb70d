"""uvicorn entry point of tests/support/sites/asgi/settings.py."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.support.sites.asgi.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

application = get_asgi_application()
