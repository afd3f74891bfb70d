"""gunicorn entry point of tests/fault_site.py."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.fault_site")

from django.core.wsgi import get_wsgi_application  # noqa: E402

application = get_wsgi_application()
