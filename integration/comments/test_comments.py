"""django-contrib-comments from the package index, limited by settings only (settings.py).

Every request goes through the framework's own views: post_comment (a comment saved redirects, a
preview or a failed form is its preview page with 200, a bad security hash is 400) and flag
(login_required). Members and visitors alike may comment; visitors are counted by address.
"""

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

import throttling
from tests.support.helpers import retry_after
from tests.support.penalties import offences_key
from tests.support.refusals import RefusalForm

from .conftest import PASSWORD

pytestmark = pytest.mark.django_db

# THROTTLING_DEFAULT_POLICIES in settings.py: 3 comments and 2 flags a minute.
COMMENTS = 3
POST_URL = "/comments/post/"


def form_data(page, **fields):
    """What the framework's comment form sends for `page`: its signed fields as it renders them,
    the member's text, the honeypot left empty, `next` and the button pressed."""
    from django_comments.forms import CommentForm

    data = {name: str(value) for name, value in CommentForm(page).initial.items()}
    data.update(name="Alice", email="alice@example.com", url="", honeypot="", next="/pages/about/")
    data.update(comment="A comment", post="Post")
    data.update(fields)
    return data


def saved(page):
    from django_comments.models import Comment

    return list(Comment.objects.filter(object_pk=str(page.pk)).order_by("pk").values_list("comment", flat=True))


def target(page):
    return f"flatpages.flatpage:{page.pk}"


@pytest.fixture
def member_client(member):
    client = Client()
    assert client.login(username=member.username, password=PASSWORD)
    return client


def test_the_frameworks_url_names_are_bound_and_pass_the_checks():
    call_command("check", fail_level="WARNING")


def test_the_limit_is_exact_and_a_failed_form_is_free(member_client, member, page):
    assert member_client.post(POST_URL, form_data(page, comment="")).status_code == 200  # its form again
    answers = [member_client.post(POST_URL, form_data(page, comment=f"Comment {n}")) for n in range(COMMENTS)]
    assert [a.status_code for a in answers] == [302] * COMMENTS
    refused = member_client.post(POST_URL, form_data(page, comment="One too many"))
    assert refused.status_code == 429
    assert 1 <= retry_after(refused) <= 60
    assert "You have commented too often" in refused.content.decode()
    assert saved(page) == [f"Comment {n}" for n in range(COMMENTS)]


def test_methods_named_in_lower_case_bind_the_framework_s_view(member_client, page, settings):
    # A binding as a site writes it by hand: the method in lower case, the default counting.
    settings.THROTTLING_VIEWS = {
        "comments-post-comment": {
            "action": "comment",
            "methods": ["post"],
            "target": "integration.comments.settings.commented_object",
        }
    }
    answers = [member_client.post(POST_URL, form_data(page, comment=f"comment {i}")) for i in range(5)]
    assert [a.status_code for a in answers] == [302] * COMMENTS + [429, 429]
    assert saved(page) == [f"comment {i}" for i in range(COMMENTS)]


def test_a_resend_keeps_every_field_the_member_sent(member, page):
    from django.middleware.csrf import _get_new_csrf_string

    browser = Client(enforce_csrf_checks=True)
    assert browser.login(username=member.username, password=PASSWORD)
    secret = _get_new_csrf_string()
    browser.cookies["csrftoken"] = secret
    for n in range(COMMENTS):
        assert browser.post(POST_URL, form_data(page, comment=f"C{n}", csrfmiddlewaretoken=secret)).status_code == 302

    written = "Thanks for the page,\nand <b>the</b> links & more."
    sent = form_data(page, comment=written, csrfmiddlewaretoken=secret)
    refused = browser.post(POST_URL, sent)
    assert refused.status_code == 429
    again = RefusalForm(refused.content.decode())
    assert again.attrs["action"] == POST_URL
    resent = dict(again.data())
    # Every field as it was sent (the signed content_type, object_pk, timestamp and security_hash,
    # the empty honeypot, next, the button pressed); only the CSRF token is a fresh one.
    assert {k: v for k, v in resent.items() if k != "csrfmiddlewaretoken"} == {
        k: v for k, v in sent.items() if k != "csrfmiddlewaretoken"
    }
    assert resent["csrfmiddlewaretoken"] and resent["csrfmiddlewaretoken"] != secret
    # Only what the member typed is editable, with the framework's labels; its machinery is hidden.
    editable = {attrs["name"] for _tag, attrs, _t, _o in again.controls if attrs.get("type") != "hidden"}
    assert editable == {"name", "email", "comment"}
    content = refused.content.decode()
    assert ">Comment</label>" in content and ">Email address</label>" in content
    assert "If you enter anything in this field" not in content

    # Once commenting works again, the form sent as it stands is the framework's comment, saved.
    throttling.reset(member, "comment", target=target(page))
    assert browser.post(again.attrs["action"], resent).status_code == 302
    assert saved(page)[-1] == written


def test_a_preview_at_the_limit_is_the_frameworks_preview(member_client, member, page, redis_client):
    for n in range(COMMENTS):
        assert member_client.post(POST_URL, form_data(page, comment=f"C{n}")).status_code == 302
    for _ in range(4):
        preview = member_client.post(POST_URL, form_data(page, comment="Draft", preview="Preview"))
        assert preview.status_code == 200
        assert "Preview your comment" in preview.content.decode()
    assert redis_client.get(offences_key(member.pk, "comment")) is None  # never refused: no offence
    assert member_client.post(POST_URL, form_data(page, comment="Real")).status_code == 429


def test_a_comment_saved_then_failing_counts(member, page):
    # The site's own receiver (a notification mail, say) fails after the framework saved the comment.
    from django_comments.signals import comment_was_posted

    def notify(sender, comment, request, **kwargs):
        raise ConnectionError("the mail server is down")

    client = Client(raise_request_exception=False)
    assert client.login(username=member.username, password=PASSWORD)
    comment_was_posted.connect(notify, dispatch_uid="failing-notification")
    try:
        answers = [client.post(POST_URL, form_data(page, comment=f"C{n}")).status_code for n in range(5)]
    finally:
        comment_was_posted.disconnect(dispatch_uid="failing-notification")
    assert answers == [500] * COMMENTS + [429, 429]
    assert saved(page) == [f"C{n}" for n in range(COMMENTS)]


def test_visitor_comments_are_limited_per_address(page):
    here, neighbour, elsewhere = (Client(REMOTE_ADDR=a) for a in ("203.0.113.5", "203.0.113.5", "203.0.113.6"))
    visitor = {"name": "Guest", "email": "guest@example.com"}
    answers = [here.post(POST_URL, form_data(page, comment=f"V{n}", **visitor)).status_code for n in range(COMMENTS)]
    assert answers == [302] * COMMENTS
    assert neighbour.post(POST_URL, form_data(page, comment="More", **visitor)).status_code == 429
    assert elsewhere.post(POST_URL, form_data(page, comment="Other", **visitor)).status_code == 302


def test_a_visitor_flagging_keeps_the_login_redirect(member, page, redis_client):
    from django_comments.models import Comment

    comment = Comment.objects.create(
        content_object=page, site_id=1, user=member, comment="Flag me", ip_address="127.0.0.1"
    )
    visitor = Client()
    url = reverse("comments-flag", args=[comment.pk])
    for _ in range(6):
        answer = visitor.post(url)
        assert answer.status_code == 302 and answer["Location"].startswith("/accounts/login/")
    assert not [key for key in redis_client.keys() if b"flag" in key]


def test_a_repeat_is_held_for_review_by_settings_only(settings, member_client, member, page):
    """Settings only: the binding hides the comment the framework saves ("hold") and the policy holds a
    member's repeat; the framework's own listing leaves it out until a moderator approves it."""
    from django.template import Context, Template
    from django_comments.models import Comment

    from throttling.models import ActionPolicy, Held

    binding = {**settings.THROTTLING_VIEWS["comments-post-comment"], "content": "comment", "hold": {"is_public": False}}
    settings.THROTTLING_VIEWS = {**settings.THROTTLING_VIEWS, "comments-post-comment": binding}
    ActionPolicy.objects.filter(action="comment").update(
        same_content_max=1, same_content_period=600, same_content_answer="hold"
    )
    throttling.invalidate_policies()
    text = "Great page, see https://example.com/deals for more of the same"
    # The same to a reader, though not to the framework's own check of identical comments (which saves none).
    again = "GREAT page!! See https://example.com/deals for more of the same."
    assert member_client.post(POST_URL, form_data(page, comment=text)).status_code == 302
    assert member_client.post(POST_URL, form_data(page, comment=again)).status_code == 302
    shown, hidden = Comment.objects.order_by("pk")
    assert shown.is_public and not hidden.is_public
    held = Held.objects.get()
    assert (held.status, held.reason, held.user, held.content_object) == ("pending", "duplicate", member, hidden)
    assert held.excerpt == again  # the start of what the member sent

    def listed():  # the framework's own listing, as its templates count comments
        return Template("{% load comments %}{% get_comment_count for page as n %}{{ n }}").render(
            Context({"page": page})
        )

    assert listed() == "1"
    assert throttling.approve(held)
    assert listed() == "2"
