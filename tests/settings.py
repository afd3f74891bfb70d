"""Settings for the test suite: SQLite by default, DATABASE_URL when set; Redis from the suite's own server."""

import json
import os
import tempfile

import dj_database_url

from tests.support.helpers import PATIENT_TIMEOUT, mail_settings, redis_caches, sqlite_test_database

SECRET_KEY = "tests-only-not-secret"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "tests.urls"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    # The live server (tests/admin/test_browser.py) serves the admin's CSS only through staticfiles.
    "django.contrib.staticfiles",
    "rest_framework",
    "throttling",
    "demo_site",
]

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

if os.environ.get("DATABASE_URL"):
    DATABASES = {"default": dj_database_url.parse(os.environ["DATABASE_URL"])}
    if os.environ.get("THROTTLING_TEST_DB_NAME"):
        # A helper process of a test opens the test database its parent created.
        DATABASES["default"]["NAME"] = os.environ["THROTTLING_TEST_DB_NAME"]
else:
    DATABASES = sqlite_test_database("throttling-tests.sqlite3", "throttling-tests")

# The suite starts its own redis-server and points this at it (tests/conftest.py);
# until then the URL names a port nothing listens on, so no test can touch a
# server it did not start.
CACHES = redis_caches(os.environ.get("THROTTLING_TEST_REDIS_URL", "redis://127.0.0.1:1/0"))

STATIC_URL = "static/"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
REST_FRAMEWORK = {"DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.SessionAuthentication"]}
LOGGING = {"version": 1, "disable_existing_loggers": False}

# Celery: the broker is the suite's own Redis (another db), never eager mode.
# The short visibility timeout lets a test see a task redelivered after its
# worker was killed (acks_late) within seconds instead of an hour.
CELERY_BROKER_URL = os.environ.get("THROTTLING_TEST_BROKER_URL", "redis://127.0.0.1:1/1")
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 4}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# A helper process of a test that reads its metrics (a Celery worker) turns them on.
THROTTLING_METRICS = os.environ.get("THROTTLING_TEST_METRICS") == "1"
# A helper process that must learn changes from the change channel alone reads the markers rarely.
if os.environ.get("THROTTLING_TEST_POLICY_REFRESH"):
    THROTTLING_POLICY_REFRESH = float(os.environ["THROTTLING_TEST_POLICY_REFRESH"])
# The suite waits PATIENT_TIMEOUT for Redis, not the product's 0.1 s (see tests/support/helpers.py).
THROTTLING_SOCKET_TIMEOUT = THROTTLING_SOCKET_CONNECT_TIMEOUT = PATIENT_TIMEOUT
# A helper process of the replay's tests (a Celery worker) reads the history sources the test uses.
if os.environ.get("THROTTLING_TEST_HISTORY"):
    THROTTLING_HISTORY = json.loads(os.environ["THROTTLING_TEST_HISTORY"])
# Offence history is sent to Celery only when a test flushes it (throttling.engine.offences.report_batches.buffer.flush()).
THROTTLING_OFFENCE_FLUSH_INTERVAL = 3600
# Mail sent by a helper process of the suite (a Celery worker mailing alerts) lands in files there,
# where the test that started it reads it; the suite's own process uses pytest-django's outbox.
os.environ.setdefault("THROTTLING_TEST_MAIL_DIR", os.path.join(tempfile.gettempdir(), f"throttling-mail-{os.getpid()}"))
# MAILERS on Django 6.1 and later, EMAIL_BACKEND and EMAIL_FILE_PATH before.
globals().update(
    mail_settings("django.core.mail.backends.filebased.EmailBackend", os.environ["THROTTLING_TEST_MAIL_DIR"])
)
# ... or, for a worker of a test of the mail server being down, SMTP to that port on loopback.
if os.environ.get("THROTTLING_TEST_SMTP_PORT"):
    SMTP_PORT = int(os.environ["THROTTLING_TEST_SMTP_PORT"])
    globals().update(mail_settings("django.core.mail.backends.smtp.EmailBackend", smtp=("127.0.0.1", SMTP_PORT, 5)))
