"""Settings of the tiny site the fault tests serve with gunicorn (URLs and view: tests/support/sites/fault/urls.py).

Configured from the environment (FAULT_DB, FAULT_REDIS_URL, FAULT_METRICS) so the test can start it on its own
Redis and SQLite file; never imported by the suite's own Django process.
"""

import os

SECRET_KEY = "fault-tests-only"
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
ROOT_URLCONF = "tests.support.sites.fault.urls"
INSTALLED_APPS = ["django.contrib.auth", "django.contrib.contenttypes", "rest_framework", "throttling"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ.get("FAULT_DB", ":memory:")}}
CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": os.environ.get("FAULT_REDIS_URL", "redis://127.0.0.1:1/0"),
    }
}
REST_FRAMEWORK = {"DEFAULT_AUTHENTICATION_CLASSES": [], "UNAUTHENTICATED_USER": None}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# One proxy in front: each simulated visitor names its address in X-Forwarded-For.
THROTTLING_NUM_PROXIES = 1
THROTTLING_PENALTIES = False
# The metrics test serves /metrics/ from every worker (PROMETHEUS_MULTIPROC_DIR in its environment).
THROTTLING_METRICS = os.environ.get("FAULT_METRICS") == "1"
LOGGING = {"version": 1, "disable_existing_loggers": False, "root": {"level": "ERROR"}}
