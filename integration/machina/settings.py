"""A site with the django-machina forum, its posting views limited by THROTTLING_* settings alone.

Machina's settings as its documentation gives them (apps, middleware, templates, caches, search),
every signed-in member allowed to post by MACHINA_DEFAULT_AUTHENTICATED_USER_FORUM_PERMISSIONS, and
THROTTLING_VIEWS: nothing of the forum is copied or wrapped. What every integration site shares (Redis
among it) is integration/site_settings.py.
"""

import os
import tempfile

from machina import MACHINA_MAIN_STATIC_DIR, MACHINA_MAIN_TEMPLATE_DIR

from integration.site_settings import *  # noqa: F403  (what every integration site shares)
from integration.site_settings import DJANGO_MIDDLEWARE
from tests.support.helpers import sqlite_test_database

SECRET_KEY = "machina-integration-only-not-secret"
ROOT_URLCONF = "integration.machina.urls"

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "mptt",
    "haystack",
    "widget_tweaks",
    "machina",
    "machina.apps.forum",
    "machina.apps.forum_conversation",
    "machina.apps.forum_conversation.forum_attachments",
    "machina.apps.forum_conversation.forum_polls",
    "machina.apps.forum_feeds",
    "machina.apps.forum_moderation",
    "machina.apps.forum_search",
    "machina.apps.forum_tracking",
    "machina.apps.forum_member",
    "machina.apps.forum_permission",
    "throttling",
]
MIDDLEWARE = [
    *DJANGO_MIDDLEWARE,
    "machina.apps.forum_permission.middleware.ForumPermissionMiddleware",
    "throttling.middleware.ActionThrottleMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [MACHINA_MAIN_TEMPLATE_DIR],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.debug",
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "machina.core.context_processors.metadata",
            ]
        },
    }
]
STATIC_URL = "/static/"
STATICFILES_DIRS = [MACHINA_MAIN_STATIC_DIR]
MEDIA_ROOT = os.path.join(tempfile.gettempdir(), "throttling-machina-media")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "machina_attachments": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "attachments"},
}
HAYSTACK_CONNECTIONS = {"default": {"ENGINE": "haystack.backends.simple_backend.SimpleEngine"}}
MACHINA_DEFAULT_AUTHENTICATED_USER_FORUM_PERMISSIONS = [
    "can_see_forum",
    "can_read_forum",
    "can_start_new_topics",
    "can_reply_to_topics",
    "can_edit_own_posts",
    "can_post_without_approval",
    "can_create_polls",
    "can_vote_in_polls",
    "can_attach_file",
    "can_download_file",
]
DATABASES = sqlite_test_database("machina-integration.sqlite3", "throttling-machina")

# Refusals only: escalating penalties through Celery are the Spirit integration's (integration/spirit).
THROTTLING_PENALTIES = False

# What this integration proves: machina's posting views limited by URL name, with settings only.
THROTTLING_VIEWS = {
    "forum_conversation:topic_create": {
        "action": "topic",
        "target": "forum_pk",  # per forum
        "counts": "created:forum_conversation.Topic",
        "skip": ["preview"],  # its preview button: machina's preview, never counted or refused
        "form": "machina.apps.forum_conversation.forms.TopicForm",
    },
    "forum_conversation:post_create": {
        "action": "reply",
        "target": "topic_pk",  # per topic
        "counts": "created:forum_conversation.Post",
        "skip": ["preview"],
        "form": "machina.apps.forum_conversation.forms.PostForm",
    },
}
THROTTLING_DEFAULT_POLICIES = {
    "topic": {"rate": "2/m", "verb": "started topics"},
    "reply": {"rate": "3/m", "verb": "replied"},
}
