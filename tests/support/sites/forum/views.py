"""The forum's views. What it saved is in COMMENTS; reset() forgets it between tests."""

import time

from django.contrib.auth.decorators import login_required
from django.contrib.auth.mixins import LoginRequiredMixin
from django.http import Http404, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import redirect
from django.utils.html import escape
from django.views import View
from rest_framework import viewsets
from rest_framework.response import Response

from .forms import CommentForm, TopicForm

WAIT = 10  # seconds: the forum's own limit between two comments of one member
COMMENTS = []  # (user pk or None, topic id, text), in the order saved
LAST_POSTED = {}  # user pk -> time.monotonic() of their last saved comment
LIKES = []


def reset():
    COMMENTS.clear()
    LAST_POSTED.clear()
    LIKES.clear()


def _form_page(form):
    """The form shown (again): 200, as classic Django form views answer a failed post."""
    return HttpResponse(f'<form method="post">{form.non_field_errors()}{form.as_p()}</form>')


def _save(request, topic_id, form):
    """The forum's own rule first ("wait 10 s", answered with the form again), then the comment."""
    user = request.user.pk if request.user.is_authenticated else None
    last = LAST_POSTED.get(user)
    if user is not None and last is not None and time.monotonic() - last < WAIT:
        form.add_error(None, f"Please wait {WAIT} seconds between comments.")
        return None
    if not form.is_valid():
        return None
    COMMENTS.append((user, topic_id, form.cleaned_data["comment"]))
    LAST_POSTED[user] = time.monotonic()
    return redirect(f"/forum/topic/{topic_id}/")


@login_required
def publish(request, topic_id):
    form = CommentForm(request.POST or None)
    if request.method == "POST" and "preview" in request.POST:
        return HttpResponse(f"<p>Preview: {escape(request.POST.get('comment', ''))}</p>{form.as_p()}")
    if request.method == "POST":
        saved = _save(request, topic_id, form)
        if saved is not None:
            return saved
    return _form_page(form)


async def quick_publish(request, topic_id):
    """The same, as an async view (it reads the member with auser())."""
    user = await request.auser()
    if not user.is_authenticated:
        return redirect(f"/accounts/login/?next={request.path}")
    form = CommentForm(request.POST)
    if form.is_valid():
        COMMENTS.append((user.pk, topic_id, form.cleaned_data["comment"]))
        return redirect(f"/forum/topic/{topic_id}/")
    return _form_page(form)


def guestbook(request):
    """Open to visitors: a signed message, then a redirect."""
    form = CommentForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        COMMENTS.append((None, 0, form.cleaned_data["comment"]))
        return redirect("/forum/guestbook/")
    return _form_page(form)


@login_required
def like(request, comment_id):
    """The AJAX like: JSON, 200; the forum's own 429 for a second like of one comment; 404 for no comment."""
    if comment_id == 0:
        raise Http404("no such comment")
    if (request.user.pk, comment_id) in LIKES:
        return JsonResponse({"error": "You like this already."}, status=429)
    LIKES.append((request.user.pk, comment_id))
    return JsonResponse({"likes": sum(1 for _, c in LIKES if c == comment_id)})


class TopicCreateView(LoginRequiredMixin, View):
    def get(self, request):
        return _form_page(TopicForm())

    def post(self, request):
        form = TopicForm(request.POST)
        if not form.is_valid():
            return _form_page(form)
        return redirect("/forum/topic/1/")


class FlagView:
    """A view that is an instance: it has no __name__."""

    def __call__(self, request, comment_id):
        return redirect(f"/forum/comment/{comment_id}/")


flag = FlagView()


class VoteViewSet(viewsets.ViewSet):
    def create(self, request):
        return Response({"voted": True}, status=201)


def publish_by_slug(request, topic):
    """Comments on a topic named in the URL as the member typed it ("7", "007", "Welcome")."""
    if not request.user.is_authenticated:
        return redirect(f"/accounts/login/?next={request.path}")  # its own check: no decorator
    COMMENTS.append((request.user.pk, topic, request.POST.get("comment", "")))
    return redirect("/forum/")


def post_then_go_next(request):
    """Saves a post, then sends the member where `next` says: a `next` a redirect cannot take
    ("javascript:...") fails with 400 after the post was saved."""
    from demo_site.models import Post

    user = request.user if request.user.is_authenticated else None
    if user is None:
        return redirect(f"/accounts/login/?next={request.path}")
    Post.objects.create(author=user, title="From the forum", body=request.POST.get("comment", ""))
    return HttpResponseRedirect(request.POST.get("next") or "/forum/")


async def apost_then_go_next(request):
    """The same, as an async view."""
    from demo_site.models import Post

    user = await request.auser()
    if request.POST.get("comment"):
        await Post.objects.acreate(author=user, title="From the forum", body=request.POST["comment"])
    return HttpResponseRedirect(request.POST.get("next") or "/forum/")


def comment_on_object(request):
    """The comments framework's way: what is commented on is in the POST body (object_pk)."""
    COMMENTS.append((request.user.pk, request.POST.get("object_pk"), request.POST.get("comment", "")))
    return redirect("/forum/")
