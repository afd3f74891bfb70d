"""The gunicorn tests' site: one throttled DRF endpoint and the metrics (settings: tests/support/sites/fault/settings.py)."""

from django.urls import path
from rest_framework.response import Response
from rest_framework.views import APIView

from throttling.metrics import metrics_view
from throttling.throttles import ActionThrottle


class Fault(APIView):
    permission_classes = []
    throttle_classes = [ActionThrottle]
    throttle_action = "fault"

    def post(self, request):
        return Response({"ok": True}, status=201)


urlpatterns = [path("fault/", Fault.as_view()), path("metrics/", metrics_view)]
