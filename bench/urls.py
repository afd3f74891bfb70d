"""The HTTP run's endpoints: one DRF POST view per contender, identical but for its throttle; and the
plain views of bench.views: alone, decorated, and bound by URL name."""

from django.contrib.auth import get_user_model
from django.http import HttpResponse
from django.urls import path
from rest_framework.authentication import BaseAuthentication
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from throttling.decorators import throttle_action
from throttling.throttles import ActionThrottle

HTTP_ACTION = "bench-http"
HTTP_SCOPE = "bench"


class MemberHeaderAuthentication(BaseAuthentication):
    """`X-Bench-Member: 17` is the user `bench-17`; users are read once per worker, so no query per request."""

    users = None

    def authenticate(self, request):
        cls = type(self)
        if cls.users is None:
            cls.users = {u.username: u for u in get_user_model().objects.filter(username__startswith="bench-")}
        user = cls.users.get(f"bench-{request.META.get('HTTP_X_BENCH_MEMBER', '')}")
        return (user, None) if user else None


class Endpoint(APIView):
    authentication_classes = [MemberHeaderAuthentication]
    permission_classes = []
    throttle_classes = []

    def post(self, request):
        return Response({"ok": True})


class ActionEndpoint(Endpoint):
    throttle_classes = [ActionThrottle]
    throttle_action = HTTP_ACTION


class ScopedEndpoint(Endpoint):
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = HTTP_SCOPE


def plain(request):
    return HttpResponse("ok")


urlpatterns = [
    path("views/none/", plain),
    path("views/decorated/", throttle_action("bench-decorated")(plain)),
    path("views/bound/", plain, name="bench-bound"),
    path("http/none/", Endpoint.as_view()),
    path("http/action/", ActionEndpoint.as_view()),
    path("http/scoped/", ScopedEndpoint.as_view()),
]
