"""gunicorn entry point of tests/support/fault_site.py."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.support.fault_site")

from django.core.wsgi import get_wsgi_application  # noqa: E402

application = get_wsgi_application()
