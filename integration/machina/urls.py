"""Machina's URLs, included whole: nothing of the forum is wrapped or copied here."""

from django.urls import include, path
from machina import urls as machina_urls

urlpatterns = [path("forum/", include(machina_urls))]
