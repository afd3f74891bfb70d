"""Views whose throttle actions have no policy row, for the throttling.W001 tests."""

from django.http import HttpResponse
from rest_framework import viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from throttling.decorators import throttle_action
from throttling.throttles import ActionThrottle


class UnpolicedAPIView(APIView):
    throttle_classes = [ActionThrottle]
    throttle_action = "unpoliced_api"

    def post(self, request):
        return Response(status=201)


class UnpolicedViewSet(viewsets.ViewSet):
    throttle_classes = [ActionThrottle]
    throttle_actions = {"POST": "unpoliced_create", "DELETE": "unpoliced_destroy"}

    def create(self, request):
        return Response(status=201)

    def destroy(self, request, pk=None):
        return Response(status=204)


@throttle_action("unpoliced_function")
def unpoliced_function(request):
    return HttpResponse("ok")


@throttle_action("reply")
def policed_function(request):
    return HttpResponse("ok")
