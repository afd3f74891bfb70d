"""WSGI entry point of the benchmark's HTTP run (gunicorn bench.wsgi:application)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
application = get_wsgi_application()
