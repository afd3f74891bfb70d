"""URLconf of the throttling.W001 tests: each kind of view uses an action without a policy."""

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from . import views_checks as views

router = SimpleRouter()
router.register("things", views.UnpolicedViewSet, basename="thing")

urlpatterns = [
    path("api/unpoliced/", views.UnpolicedAPIView.as_view()),
    path("api/", include(router.urls)),
    path("unpoliced/", views.unpoliced_function),
    path("policed/", views.policed_function),
]
