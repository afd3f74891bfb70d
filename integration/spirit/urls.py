"""Spirit's URLs, included whole: nothing of the forum is wrapped or copied here."""

import spirit.urls
from django.urls import include, path

urlpatterns = [path("", include(spirit.urls))]
