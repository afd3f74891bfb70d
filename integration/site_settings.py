"""The settings every integration site shares: a test site in English and UTC, Django's stock middleware
(each site adds its app's and the throttle's after them), and the run's own Redis.

Each site's settings module starts with `from integration.site_settings import *`. Redis is the test
run's own server (the conftest sets THROTTLING_REDIS_URL); until it does, it names a port nothing
listens on.
"""

import os

DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en"
ALLOWED_HOSTS = ["*"]

DJANGO_MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
LOGGING = {"version": 1, "disable_existing_loggers": False}

THROTTLING_REDIS_URL = os.environ.get("THROTTLING_TEST_REDIS_URL", "redis://127.0.0.1:1/0")
THROTTLING_OFFENCE_FLUSH_INTERVAL = 3600
