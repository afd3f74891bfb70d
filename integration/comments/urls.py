"""The comments framework's URLs, included whole, and the flat pages its comments are on."""

from django.urls import include, path

urlpatterns = [
    path("comments/", include("django_comments.urls")),
    path("pages/", include("django.contrib.flatpages.urls")),
]
