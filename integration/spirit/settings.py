"""The smallest Spirit site that works on SQLite, its views limited by THROTTLING_* settings alone.

Nothing of Spirit's is copied or wrapped: its URLs are included whole and bound by name in
THROTTLING_VIEWS. What every integration site shares (Redis among it) is integration/site_settings.py;
the Celery broker is the test run's own server too (conftest.py), and until it sets it, it names a
port nothing listens on.
"""

import os
import tempfile

from integration.site_settings import *  # noqa: F403  (what every integration site shares)
from integration.site_settings import DJANGO_MIDDLEWARE
from tests.support.helpers import sqlite_test_database

SECRET_KEY = "spirit-integration-only-not-secret"
ROOT_URLCONF = "integration.spirit.urls"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "spirit.core",
    "spirit.admin",
    "spirit.search",
    "spirit.user",
    "spirit.user.admin",
    "spirit.user.auth",
    "spirit.category",
    "spirit.category.admin",
    "spirit.topic",
    "spirit.topic.admin",
    "spirit.topic.favorite",
    "spirit.topic.moderate",
    "spirit.topic.notification",
    "spirit.topic.private",
    "spirit.topic.unread",
    "spirit.comment",
    "spirit.comment.bookmark",
    "spirit.comment.flag",
    "spirit.comment.flag.admin",
    "spirit.comment.history",
    "spirit.comment.like",
    "spirit.comment.poll",
    "djconfig",
    "haystack",
    "throttling",
]

# Spirit's own middleware after Django's, as its project template lists them.
MIDDLEWARE = [
    *DJANGO_MIDDLEWARE,
    "spirit.user.middleware.TimezoneMiddleware",
    "spirit.user.middleware.LastIPMiddleware",
    "spirit.user.middleware.LastSeenMiddleware",
    "spirit.user.middleware.ActiveUserMiddleware",
    "spirit.core.middleware.PrivateForumMiddleware",
    "djconfig.middleware.DjConfigMiddleware",
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.contrib.auth.context_processors.auth",
                "django.template.context_processors.i18n",
                "django.template.context_processors.media",
                "django.template.context_processors.static",
                "django.template.context_processors.tz",
                "django.template.context_processors.request",
                "django.contrib.messages.context_processors.messages",
                "djconfig.context_processors.config",
            ]
        },
    }
]

# A file, not memory, so the Celery worker the tests start sees the same rows.
DATABASES = sqlite_test_database("spirit-integration.sqlite3", "throttling-spirit")

# Spirit's caches in process memory; its rate limit keeps its windows fixed for the run
# (ST_TESTS_RATELIMIT_NEVER_EXPIRE), so "wait 10 s" refuses every post after the first.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "st_rate_limit": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "spirit_rl_cache",
        "TIMEOUT": None,
    },
}
ST_RATELIMIT_CACHE = "st_rate_limit"
ST_TESTS_RATELIMIT_NEVER_EXPIRE = True
ST_SITE_URL = "http://testserver/"
ST_UPLOAD_FILE_ENABLED = False
ST_UPLOAD_IMAGE_ENABLED = False
ST_TASK_MANAGER = None  # Spirit's own tasks run inline

AUTHENTICATION_BACKENDS = [
    "spirit.user.auth.backends.UsernameAuthBackend",
    "spirit.user.auth.backends.EmailAuthBackend",
]
# Haystack's simple engine: no index on disk, nothing to update.
HAYSTACK_CONNECTIONS = {"default": {"ENGINE": "haystack.backends.simple_backend.SimpleEngine"}}

LOGIN_URL = "spirit:user:auth:login"
LOGIN_REDIRECT_URL = "spirit:user:update"
LOGOUT_REDIRECT_URL = "spirit:index"

STATIC_URL = "/static/"
MEDIA_URL = "/media/"
MEDIA_ROOT = os.path.join(tempfile.gettempdir(), "throttling-spirit-media")
STORAGES = {
    "default": {"BACKEND": "spirit.core.storage.OverwriteFileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"

# The Celery broker: the run's own redis-server (conftest.py), as the throttle's Redis is.
CELERY_BROKER_URL = os.environ.get("THROTTLING_TEST_BROKER_URL", "redis://127.0.0.1:1/1")
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# What this integration proves: Spirit's views limited by URL name, with settings only.
THROTTLING_VIEWS = {
    "spirit:comment:publish": {
        "action": "reply",
        "methods": ["POST"],
        "target": "topic_id",
        "counts": "redirect",  # a form shown again (failed, or Spirit's own "wait 10 s") costs nothing
        "anonymous": "skip",  # a logged-out post gets Spirit's login redirect
        "form": "spirit.comment.forms.CommentForm",
    },
    "spirit:comment:like:create": "like",
}
MIDDLEWARE += ["throttling.middleware.ActionThrottleMiddleware", "throttling.notices.PenaltyNoticeMiddleware"]
THROTTLING_DEFAULT_POLICIES = {
    "reply": {"rate": "3/m", "verb": "replied"},
    "like": {"rate": "5/m", "verb": "liked"},
}


def spirit_moderator(user):
    """Spirit's own moderators (its profile's flag, set in its admin), not Django staff."""
    profile = getattr(user, "st", None)
    return bool(profile and profile.is_moderator)


THROTTLING_MODERATORS = spirit_moderator
