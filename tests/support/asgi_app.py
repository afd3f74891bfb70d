"""uvicorn entry point of tests/support/asgi_site.py."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.support.asgi_site")

from django.core.asgi import get_asgi_application  # noqa: E402

application = get_asgi_application()
