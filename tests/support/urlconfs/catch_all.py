"""A site whose root pattern catches every path ending in reply/ (a wiki or a CMS does this)."""

from django.urls import re_path

from . import adapters_views as views

urlpatterns = [re_path(r"^(?P<page>.*)/reply/$", views.page_reply)]
