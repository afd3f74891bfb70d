"""Settings of the tiny site the ASGI test serves with uvicorn (URLs, views and form: tests/support/sites/asgi/urls.py).

Configured from the environment (ASGI_DB, ASGI_REDIS_URL) so the test can start it on its own Redis and
SQLite file; never imported by the suite's own Django process.
"""

import os

from tests.support.helpers import PATIENT_TIMEOUT

SECRET_KEY = "asgi-tests-only"
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
ROOT_URLCONF = "tests.support.sites.asgi.urls"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "throttling",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "throttling.middleware.ActionThrottleMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ.get("ASGI_DB", ":memory:")}}
THROTTLING_REDIS_URL = os.environ.get("ASGI_REDIS_URL", "redis://127.0.0.1:1/0")
# As patient as the suite (tests/support/helpers.py): the test counts admissions, not the bound.
THROTTLING_SOCKET_TIMEOUT = THROTTLING_SOCKET_CONNECT_TIMEOUT = PATIENT_TIMEOUT
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# One proxy in front: each simulated visitor names its address in X-Forwarded-For.
THROTTLING_NUM_PROXIES = 1
THROTTLING_PENALTIES = False
# The forum's async view, bound by URL name with a form whose ModelChoiceField reads the database.
THROTTLING_VIEWS = {
    "room-post": {
        "action": "reply",
        "counts": "redirect",
        "anonymous": "count",
        "form": "tests.support.sites.asgi.urls.RoomForm",
    }
}
LOGGING = {"version": 1, "disable_existing_loggers": False, "root": {"level": "ERROR"}}
