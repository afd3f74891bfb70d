"""Views of every kind whose throttle actions have no policy row, for the throttling.W001 tests."""

from django.http import HttpResponse
from django.utils.decorators import method_decorator
from django.views import View
from rest_framework import viewsets
from rest_framework.decorators import action
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


class PinViewSet(viewsets.ViewSet):
    """A router route whose action is an argument of @action (the route's initkwargs)."""

    throttle_classes = [ActionThrottle]
    throttle_action = None

    @action(detail=True, methods=["post"], throttle_action="unpoliced_pin")
    def pin(self, request, pk=None):
        return Response(status=201)


@throttle_action("unpoliced_function")
def unpoliced_function(request):
    return HttpResponse("ok")


@throttle_action("reply")
def policed_function(request):
    return HttpResponse("ok")


class FlagView:
    """A callable instance with no action: it has no __name__, which the walk must not trip on."""

    def __call__(self, request):
        return HttpResponse("flagged")


class ReportView:
    def __call__(self, request):
        return HttpResponse("reported")


class VoteView:
    """A callable instance that names its action as class-based views do."""

    throttle_action = "unpoliced_vote"

    def __call__(self, request):
        return HttpResponse("voted")


flag = FlagView()
# A misspelt action ("report"), on a view that is an instance of a class.
misspelt_report = throttle_action("reoprt")(ReportView())
vote = VoteView()


@method_decorator(throttle_action("unpoliced_edit"), name="dispatch")
class EditView(View):
    def post(self, request):
        return HttpResponse("edited")


class MoveView(View):
    @method_decorator(throttle_action("unpoliced_move"))
    def post(self, request):
        return HttpResponse("moved")


@throttle_action("unpoliced_namespaced")
def namespaced(request, topic_id):
    return HttpResponse("ok")
