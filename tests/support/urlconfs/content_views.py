"""Views that pass the post's text to the throttle, one per adapter and kind of body, for the repeated-content tests."""

import json

from django import forms
from django.http import HttpResponse, JsonResponse
from django.middleware.csrf import get_token
from django.shortcuts import redirect
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from throttling.decorators import throttle_action
from throttling.throttles import ActionThrottle

SAVED = []  # the texts the views saved, in order


class ReplyForm(forms.Form):
    body = forms.CharField(label="Your reply", widget=forms.Textarea)


FORM = (
    '<!doctype html><html><head><meta name="viewport" content="width=device-width"></head><body>'
    '<form method="post"><input type="hidden" name="csrfmiddlewaretoken" value="{token}">'
    '<label for="body">Your reply</label><textarea id="body" name="body"></textarea>'
    '<button type="submit">Reply</button>{error}</form></body></html>'
)


@throttle_action("reply", content="body", counts="redirect", form=ReplyForm)
def form_reply(request):
    """A classic form view: the form again (200) without text, a redirect once saved."""
    text = request.POST.get("body", "")
    if request.method != "POST" or not text.strip():
        error = "<p>body: this field is required</p>" if request.method == "POST" else ""
        return HttpResponse(FORM.format(token=get_token(request), error=error))
    SAVED.append(text)
    return redirect("/content/form/")


@throttle_action("reply", content="body")
def json_reply(request):
    """An AJAX endpoint: a JSON object in, JSON out."""
    text = json.loads(request.body)["body"]
    SAVED.append(text)
    return JsonResponse({"saved": text}, status=201)


@throttle_action("post", content=lambda request: f"{request.POST.get('title', '')}\n{request.POST.get('body', '')}")
def new_thread(request):
    """The text judged is the title and the body together: a function of the request."""
    SAVED.append(request.POST["title"])
    return HttpResponse("created", status=201)


@throttle_action("reply", content="body")
async def async_reply(request):
    SAVED.append(request.POST["body"])
    return HttpResponse("saved", status=201)


class ReplyView(APIView):
    """DRF: the field name; request.data reads form data and JSON alike."""

    throttle_classes = [ActionThrottle]
    throttle_action = "reply"
    throttle_content = "text"

    def post(self, request):
        SAVED.append(request.data["text"])
        return Response({"saved": True}, status=status.HTTP_201_CREATED)


class QuotingReplyView(APIView):
    """DRF: a method naming the text, leaving out what the member quoted."""

    throttle_classes = [ActionThrottle]
    throttle_action = "reply"

    def throttle_content(self, request):
        return request.data.get("text", "").split("\n>", 1)[0]

    def post(self, request):
        if not request.data.get("text"):
            return Response({"text": ["This field is required."]}, status=status.HTTP_400_BAD_REQUEST)
        SAVED.append(request.data["text"])
        return Response({"saved": True}, status=status.HTTP_201_CREATED)
