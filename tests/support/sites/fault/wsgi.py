"""gunicorn entry point of tests/support/sites/fault/settings.py."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.support.sites.fault.settings")

from django.core.wsgi import get_wsgi_application  # noqa: E402

application = get_wsgi_application()
