"""The set-up a Spirit site needed before bindings by URL name: its reply path copied, its view wrapped.

Spirit's own URLs follow, whole; the copied path comes first, so it is the one that answers.
"""

import spirit.comment.views
import spirit.urls
from django.urls import include, path

from throttling.decorators import throttle_action


def topic_of(request, topic_id):
    return topic_id


def wrapped(**options):
    """Spirit's URLs with its reply view wrapped by @throttle_action("reply", **options), per topic."""
    view = throttle_action("reply", target=topic_of, **options)(spirit.comment.views.publish)
    return [path("comment/<int:topic_id>/publish/", view, name="wrapped-publish"), path("", include(spirit.urls))]


urlpatterns = wrapped()  # the decorator's default counting: every 2xx and 3xx
