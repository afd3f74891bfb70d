"""The HTML side: a home page and one page per post whose reply form is throttled by @throttle_action."""

from functools import wraps

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.utils.translation import gettext
from django.views.decorators.http import require_http_methods

from throttling.decorators import throttle_action

from . import DEMO_ADMIN, DEMO_MEMBERS, DEMO_PASSWORD
from .api import posts_with_counts
from .forms import ReplyForm


def home(request):
    context = {
        "posts": posts_with_counts(),
        "admin_name": DEMO_ADMIN,
        "members": DEMO_MEMBERS,
        "password": DEMO_PASSWORD,
    }
    return TemplateResponse(request, "demo_site/home.html", context)


def login_required_to_post(view):
    """Anyone may read; only members may write. Runs before the throttle so a
    visitor who is sent to the login page spends no quota."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if request.method == "POST" and not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        return view(request, *args, **kwargs)

    return wrapper


@require_http_methods(["GET", "HEAD", "POST"])
@login_required_to_post
@throttle_action("reply", form=ReplyForm, content="body", counts="created:demo_site.Reply", hold={"is_public": False})
@throttle_action("thread-reply", form=ReplyForm, target=lambda request, pk: pk)
def post_detail(request, pk):
    post = get_object_or_404(posts_with_counts(), pk=pk)
    status = 200
    if request.method == "POST":
        form = ReplyForm(request.POST)
        if form.is_valid():
            reply = form.save(commit=False)
            reply.post = post
            reply.author = request.user
            reply.save()  # written hidden and queued when the decision is held (hold= above)
            if reply.is_public:
                messages.success(request, gettext("Your reply is up."))
            return redirect(f"{post.get_absolute_url()}#reply-{reply.pk}")
        # 400 tells the decorator the reply did not happen, so its entry is refunded.
        status = 400
    else:
        form = ReplyForm()
    # A TemplateResponse renders after the decorator has refunded, so the
    # quota shown on a rejected form already counts the refund.
    return TemplateResponse(
        request,
        "demo_site/post_detail.html",
        {"post": post, "replies": post.replies.filter(is_public=True).select_related("author"), "form": form},
        status=status,
    )
