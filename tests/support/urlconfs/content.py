"""URLconf of the repeated-content adapter tests (the forum, for the bindings, and the admin, for the browser)."""

from django.contrib import admin
from django.urls import include, path

from . import content_views as views

urlpatterns = [
    path("content/form/", views.form_reply),
    path("content/json/", views.json_reply),
    path("content/thread/", views.new_thread),
    path("content/async/", views.async_reply),
    path("content/api/", views.ReplyView.as_view()),
    path("content/api/quoting/", views.QuotingReplyView.as_view()),
    path("forum/", include("tests.support.sites.forum.urls")),
    path("admin/", admin.site.urls),
]
