"""A site with django-contrib-comments on its flat pages, comments limited by THROTTLING_* settings alone.

Nothing of the comments framework is copied or wrapped: its URLs are included whole and bound by
name in THROTTLING_VIEWS. What every integration site shares (Redis among it) is integration/site_settings.py.
"""

from integration.site_settings import *  # noqa: F403  (what every integration site shares)
from integration.site_settings import DJANGO_MIDDLEWARE
from tests.support.helpers import sqlite_test_database
from throttling.targets import normalised

SECRET_KEY = "comments-integration-only-not-secret"
ROOT_URLCONF = "integration.comments.urls"
SITE_ID = 1

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.sites",
    "django.contrib.flatpages",
    "django_comments",
    "throttling",
]
MIDDLEWARE = [*DJANGO_MIDDLEWARE, "throttling.middleware.ActionThrottleMiddleware"]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
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
DATABASES = sqlite_test_database("comments-integration.sqlite3", "throttling-comments")

# Refusals only: escalating penalties through Celery are the Spirit integration's (integration/spirit).
THROTTLING_PENALTIES = False


def commented_object(request):
    """What a comment is on, "flatpages.flatpage:1": the comments framework posts it in its form."""
    pk = normalised(request.POST.get("object_pk"))
    return None if pk is None else f"{request.POST.get('content_type', '')}:{pk}"


# What this integration proves: the comments framework's views limited by URL name, with settings only.
THROTTLING_VIEWS = {
    "comments-post-comment": {
        "action": "comment",
        "target": "integration.comments.settings.commented_object",  # per page commented on
        "counts": "created:django_comments.Comment",  # a comment saved, whatever the response
        "skip": ["preview"],  # its preview button: the app's preview, never counted or refused
        "form": "django_comments.forms.CommentForm",
    },
    "comments-flag": "flag",  # login_required: visitors keep its login redirect
}
THROTTLING_DEFAULT_POLICIES = {
    "comment": {"rate": "3/m", "verb": "commented"},
    "flag": {"rate": "2/m", "verb": "flagged"},
}
