"""Views that use the adapters the way a project would, for the adapter and check tests."""

from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from rest_framework import serializers, status, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from throttling.decorators import throttle_action
from throttling.throttles import ActionThrottle


class ReplySerializer(serializers.Serializer):
    text = serializers.CharField(max_length=200)


class ReplyView(APIView):
    """Only throttle_classes and throttle_action: the minimum a project writes."""

    throttle_classes = [ActionThrottle]
    throttle_action = "reply"

    def get(self, request):
        return Response({"replies": []})

    def post(self, request):
        serializer = ReplySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return Response(serializer.validated_data, status=status.HTTP_201_CREATED)


class ReplyStatusView(APIView):
    """Answers with whatever status the client asks for, without raising."""

    throttle_classes = [ActionThrottle]
    throttle_action = "reply"

    def post(self, request):
        return Response({"answered": True}, status=int(request.data.get("status", 201)))


class CrashingView(APIView):
    """Raises what its request names: an exception DRF handles (404) or one it does not."""

    throttle_classes = [ActionThrottle]
    throttle_action = "reply"

    def post(self, request):
        if request.data.get("crash") == "404":
            raise Http404("no such thread")
        raise RuntimeError("the database went away")


class MappedView(APIView):
    throttle_classes = [ActionThrottle]
    throttle_actions = {"POST": "reply", "DELETE": "delete_post"}

    def post(self, request):
        return Response(status=status.HTTP_201_CREATED)

    def put(self, request):
        return Response(status=status.HTTP_200_OK)

    def delete(self, request):
        return Response(status=status.HTTP_204_NO_CONTENT)


class PostViewSet(viewsets.ViewSet):
    throttle_classes = [ActionThrottle]
    throttle_action = "post"

    def list(self, request):
        return Response([])

    def create(self, request):
        serializer = ReplySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return Response(serializer.validated_data, status=status.HTTP_201_CREATED)


class MappedViewSet(viewsets.ViewSet):
    throttle_classes = [ActionThrottle]
    throttle_actions = {"POST": "post", "DELETE": "delete_post"}

    def create(self, request):
        return Response(status=status.HTTP_201_CREATED)

    def destroy(self, request, pk=None):
        return Response(status=status.HTTP_204_NO_CONTENT)


def _reply_form(request):
    if request.method != "POST":
        return HttpResponse("form")
    if not request.POST.get("text", "").strip():
        return HttpResponse("a reply needs some text", status=400)
    return HttpResponse("saved", status=201)


plain_reply = throttle_action("reply")(_reply_form)
reply_on_get = throttle_action("reply", methods=["GET"])(_reply_form)
custom_template_reply = throttle_action("reply", template_name="custom/slow_down.html")(_reply_form)


@throttle_action("reply")
def missing_thread_reply(request):
    raise Http404("no such thread")


@throttle_action("reply")
async def async_reply(request):
    """An async view (ASGI): the decorator awaits the decision; status= picks the answer."""
    status_code = int(request.POST.get("status", 201))
    who = "member" if (await request.auser()).is_authenticated else "visitor"
    return HttpResponse(f"saved for a {who}", status=status_code)


class ThreadReplyView(APIView):
    """Replies counted per thread (throttle_target) and per API key when one is sent (throttle_key)."""

    throttle_classes = [ActionThrottle]
    throttle_action = "reply"

    def throttle_target(self, request):
        return self.kwargs["thread"]

    def throttle_key(self, request):
        return request.headers.get("X-Api-Key")

    def post(self, request, thread):
        return Response({"thread": thread}, status=status.HTTP_201_CREATED)


@throttle_action("reply", target=lambda request, thread: thread, key=lambda request: request.headers.get("X-Api-Key"))
def thread_reply(request, thread):
    return HttpResponse(f"reply in thread {thread}", status=201)


def _classic_form(request):
    """A classic Django form view: the form again (200) when it fails, a redirect once saved."""
    if request.method == "POST" and request.POST.get("text", "").strip():
        return redirect("/reply-form/")
    return HttpResponse("<form method=post>text: this field is required</form>")


form_reply = throttle_action("reply", counts="redirect")(_classic_form)


class CreatedOnly(ActionThrottle):
    counts = "tests.support.urlconfs.adapters_views.created_or_redirected"


class CreatedOnlyView(ReplyStatusView):
    """Answers with the status the client asks for; only a 201 (or a redirect) counts."""

    throttle_classes = [CreatedOnly]


# Two entries per reply: on a limit of 3, a member whose override halves it can never be admitted.
costly_reply = throttle_action("reply", cost=2)(_reply_form)


def created_or_redirected(request, response):
    """A site's own counts= function: only a 201 or a redirect means something was saved."""
    return response.status_code in (201, 302)


class CreatedOnlyByFunction(ActionThrottle):
    counts = created_or_redirected  # the function itself, as the class attribute


class CreatedOnlyByFunctionView(ReplyStatusView):
    throttle_classes = [CreatedOnlyByFunction]


class SignedReplyStatusView(ReplyStatusView):
    """A subclass with a finalize_response of its own, calling DRF's through super() and then
    making the response final, as projects write: it signs it, and turns the answer into the
    status the client names in `final` (a late validation, say). ActionThrottle settles the final
    response once, whichever of the two classes it met first."""

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        response["X-Signed"] = "yes"
        if "final" in request.data:
            response.status_code = int(request.data["final"])
        return response


class ForgivingCrashingView(CrashingView):
    """Turns the exception its base's handle_exception re-raises into an answer of its own."""

    def handle_exception(self, exc):
        try:
            return super().handle_exception(exc)
        except RuntimeError:
            return Response({"detail": "try again later"}, status=status.HTTP_503_SERVICE_UNAVAILABLE)


@throttle_action("reply")
def page_reply(request, page):
    return _reply_form(request)


def posted_object(request):
    """A binding's target taken from the POST body, as the comments framework sends it."""
    return request.POST.get("object_pk")


class CreatedPostSkippingPreviews(ActionThrottle):
    counts = "created:demo_site.Post"
    skip = ["preview"]


class PostThenFailView(APIView):
    """Saves a post when sent a title (unless it is a preview), then fails validation of `next` (400)."""

    throttle_classes = [CreatedPostSkippingPreviews]
    throttle_action = "post"

    def post(self, request):
        from demo_site.models import Post

        if request.data.get("title") and "preview" not in request.data:
            Post.objects.create(author=request.user, title=request.data["title"], body="")
        return Response({"next": "not a place"}, status=status.HTTP_400_BAD_REQUEST)
