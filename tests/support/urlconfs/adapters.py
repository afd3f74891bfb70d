"""URLconf of the adapter tests: DRF views, viewsets and decorated function views."""

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from . import adapters_views as views

router = SimpleRouter()
router.register("posts", views.PostViewSet, basename="post")
router.register("mapped-posts", views.MappedViewSet, basename="mapped-post")

urlpatterns = [
    path("api/replies/", views.ReplyView.as_view()),
    path("api/reply-status/", views.ReplyStatusView.as_view()),
    path("api/signed-reply-status/", views.SignedReplyStatusView.as_view()),
    path("api/mapped/", views.MappedView.as_view()),
    path("api/crash/", views.CrashingView.as_view()),
    path("api/forgiving-crash/", views.ForgivingCrashingView.as_view()),
    path("api/", include(router.urls)),
    path("reply/", views.plain_reply),
    path("reply-on-get/", views.reply_on_get),
    path("reply-custom/", views.custom_template_reply),
    path("reply-missing/", views.missing_thread_reply),
    path("async-reply/", views.async_reply),
    path("api/threads/<int:thread>/replies/", views.ThreadReplyView.as_view()),
    path("threads/<int:thread>/reply/", views.thread_reply),
    path("costly/", views.costly_reply, name="costly"),
    path("reply-form/", views.form_reply),
    path("api/created-only/", views.CreatedOnlyView.as_view()),
    path("api/created-only-by-function/", views.CreatedOnlyByFunctionView.as_view()),
    path("api/post-then-fail/", views.PostThenFailView.as_view()),
]
