"""URLconf of the check tests: each kind of view uses an action without a policy; "board:topic:reply"
(application namespace "forum") is a URL name THROTTLING_VIEWS can bind."""

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from . import checks_views as views

router = SimpleRouter()
router.register("things", views.UnpolicedViewSet, basename="thing")
router.register("pins", views.PinViewSet, basename="pin")

nested = ([path("reply/", views.namespaced, name="reply")], "topic")

urlpatterns = [
    path("api/unpoliced/", views.UnpolicedAPIView.as_view()),
    path("api/", include(router.urls)),
    path("unpoliced/", views.unpoliced_function),
    path("policed/", views.policed_function),
    path("flag/", views.flag),
    path("report/", views.misspelt_report),
    path("vote/", views.vote),
    path("edit/", views.EditView.as_view()),
    path("move/", views.MoveView.as_view()),
    # An application namespace with an instance namespace of its own, nested, as an app's urls.py has them.
    path("board/", include(([path("t/<int:topic_id>/", include(nested))], "forum"), namespace="board")),
]
