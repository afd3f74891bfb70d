"""The forum's URLconf: application namespace "forum", comments under "forum:comment", likes under
"forum:comment:like", a DRF router under "forum:"."""

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from . import views

app_name = "forum"

router = SimpleRouter()
router.register("votes", views.VoteViewSet, basename="vote")

like_patterns = ([path("<int:comment_id>/", views.like, name="create")], "like")

comment_patterns = (
    [
        path("publish/<int:topic_id>/", views.publish, name="publish"),
        path("quick/<int:topic_id>/", views.quick_publish, name="quick"),
        path("like/", include(like_patterns)),
    ],
    "comment",
)

urlpatterns = [
    path("comment/", include(comment_patterns)),
    path("topic/new/", views.TopicCreateView.as_view(), name="topic-create"),
    path("flag/<int:comment_id>/", views.flag, name="flag"),
    path("guestbook/", views.guestbook, name="guestbook"),
    path("page/<str:topic>/comment/", views.publish_by_slug, name="publish-by-slug"),
    path("post/", views.post_then_go_next, name="post"),
    path("apost/", views.apost_then_go_next, name="apost"),
    path("comments/post/", views.comment_on_object, name="comment-on-object"),
    path("api/", include(router.urls)),
]
