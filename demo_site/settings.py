"""Settings of the demo community: SQLite in DEMO_DIR, Redis at DEMO_REDIS_URL (see demo_site/run.py)."""

import os
from pathlib import Path


def _env_flag(name, default):
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() not in ("", "0", "false", "no", "off")


BASE_DIR = Path(__file__).resolve().parent.parent
# Everything the demo writes lives here, so `make clean` (or deleting it) starts afresh.
DEMO_DIR = Path(os.environ.get("DEMO_DIR", BASE_DIR / ".demo"))
DEMO_DIR.mkdir(parents=True, exist_ok=True)

# For the demo only: this key is public, so sessions signed with it protect nothing.
SECRET_KEY = "demo-only-insecure-key-never-use-in-production-3f9c2b7e"
DEBUG = _env_flag("DEMO_DEBUG", True)
ALLOWED_HOSTS = os.environ.get("DEMO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "throttling",
    "demo_site",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The language switch in the header: English or Simplified Chinese (throttling ships both).
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # A member's new penalty (a warning included) is shown once, as a message, on their next page.
    "throttling.notices.PenaltyNoticeMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "demo_site.urls"
WSGI_APPLICATION = "demo_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.debug",
                # {% throttle_status %} identifies the member from `request`.
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": DEMO_DIR / "db.sqlite3",
        # The site and its Celery worker write to the same file: a transaction takes the write lock
        # when it begins, waiting for it, instead of failing with "database is locked" when its
        # first read turns into a write while the other writes.
        "OPTIONS": {"transaction_mode": "IMMEDIATE"},
    }
}

# The Redis `make demo` started (None: none was named, and the URL below is only a guess);
# demo_traffic refuses to play in-process against a guess. A running demo writes its
# URL into DEMO_DIR, so `manage.py shell` or `throttling_resync` in another terminal
# talks to the demo's Redis without exporting anything.
REDIS_URL_FILE = DEMO_DIR / "redis-url"
DEMO_REDIS_URL = (
    os.environ.get("DEMO_REDIS_URL")
    or (REDIS_URL_FILE.read_text(encoding="utf-8").strip() if REDIS_URL_FILE.is_file() else None)
    or None
)
_REDIS_URL = DEMO_REDIS_URL or "redis://127.0.0.1:6379/0"

# The throttle talks to the Redis of this alias (THROTTLING_CACHE_ALIAS defaults to "default").
CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": _REDIS_URL,
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
    }
}

# Celery: the demo's Redis is also the broker (another database number).
CELERY_BROKER_URL = os.environ.get("DEMO_BROKER_URL", _REDIS_URL.rsplit("/", 1)[0] + "/1")
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_BEAT_SCHEDULE = {
    # Re-mirror penalties after a Redis restart; record expiries (throttling_resync).
    "throttling-resync": {"task": "throttling.tasks.resync_penalties", "schedule": 60.0},
}

# Offence history reaches the report within seconds rather than the default 5;
# the ladder itself is the default one (migration 0004).
THROTTLING_OFFENCE_FLUSH_INTERVAL = 2
# The built-in 429 page in the demo's own layout.
THROTTLING_BASE_TEMPLATE = "demo_site/base.html"

REST_FRAMEWORK = {
    # Session for the browsable API after logging in; Basic so `curl -u alice:...` works.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
    ],
}

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "demo_site" / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Throttling warns (Redis unavailable, an action without a policy) on its own
# logger; the demo shows those lines in the runserver console.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # No {name}: throttling's messages already start with "throttling:".
    "formatters": {"plain": {"format": "[{asctime}] {levelname} {message}", "style": "{"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "throttling": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "demo_site": {"handlers": ["console"], "level": "INFO", "propagate": False},
    },
}

# Where each action's history lives: "What would this do?" on a policy's page replays a draft over
# it (demo_history seeds a month of replies at every start).
THROTTLING_HISTORY = {
    "reply": {"model": "demo_site.Reply", "member": "author", "time": "created"},
    "thread-reply": {"model": "demo_site.Reply", "member": "author", "time": "created", "target": "post"},
    "post": {"model": "demo_site.Post", "member": "author", "time": "created"},
    "like": {"model": "demo_site.Like", "member": "user", "time": "created"},
}
