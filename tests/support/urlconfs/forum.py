"""URLconf of the binding tests: the forum included as a site would, one of its views wrapped by the
site's own @throttle_action as well (bound and decorated), and a DRF view with ActionThrottle."""

from django.urls import include, path

from throttling.decorators import throttle_action

from ..sites.forum import views as forum
from .adapters_views import ReplyView

urlpatterns = [
    path("forum/", include("tests.support.sites.forum.urls")),
    path(
        "mine/<int:topic_id>/",
        throttle_action("reply", target=lambda request, topic_id: topic_id, counts="redirect")(forum.publish),
        name="mine-publish",
    ),
    path("api/replies/", ReplyView.as_view(), name="api-reply"),  # ActionThrottle("reply") as well
]
