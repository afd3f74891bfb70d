"""Django settings of the benchmark: SQLite in a throwaway directory, Redis from bench.run's own server."""

import os
import tempfile

SECRET_KEY = "bench-only-not-secret"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "bench.urls"

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "rest_framework",
    "django_ratelimit",
    "throttling",
]

# bench.run creates (and removes) this directory; importing the settings on
# their own still gets a throwaway one rather than a file in the tree.
_DB_DIR = os.environ.get("BENCH_DB_DIR") or tempfile.mkdtemp(prefix="throttling-bench-")
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.path.join(_DB_DIR, "bench.sqlite3"),
    }
}

# bench.run starts its own redis-server and exports its URL before django.setup().
# Without it the URL names a port nothing listens on, so the benchmark can never
# touch (or flush) a Redis it did not start.
CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:1/0"),
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
    }
}

# DRF freezes these into ScopedRateThrottle.THROTTLE_RATES when rest_framework.throttling
# is first imported, so they must be here rather than set at run time.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_THROTTLE_RATES": {
        "bench": "1000/min",
        "bench-exact": "5/min",
    },
}

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGGING = {"version": 1, "disable_existing_loggers": False}
