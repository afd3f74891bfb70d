"""django-machina from the package index, limited by settings only (settings.py).

Every request goes through machina's own views, templates and permission checks: starting a topic
and replying are form views (a failed form or a preview is the form again with 200, a saved post
redirects), and a visitor without the permission is sent to log in.
"""

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

import throttling
from tests.support.helpers import retry_after
from tests.support.penalties import offences_key
from tests.support.refusals import PageForm, RefusalForm

from .conftest import PASSWORD

pytestmark = pytest.mark.django_db

# THROTTLING_DEFAULT_POLICIES in settings.py: 2 topics and 3 replies a minute.
TOPICS = 2
REPLIES = 3


def topic_url(forum):
    return reverse("forum_conversation:topic_create", kwargs={"forum_slug": forum.slug, "forum_pk": forum.pk})


def reply_url(topic):
    forum = topic.forum
    kwargs = {"forum_slug": forum.slug, "forum_pk": forum.pk, "topic_slug": topic.slug, "topic_pk": topic.pk}
    return reverse("forum_conversation:post_create", kwargs=kwargs)


def machinas_form(client, url):
    """Machina's own form at `url`, as its page renders it: every field with the value a browser sends."""
    form = PageForm(client.get(url).content.decode(), containing="content")
    assert form.attrs is not None, "machina's page has no post form"
    return dict(form.data())


def reply(client, topic, text, **extra):
    """A reply sent from machina's form as a signed-in member's page renders it (its attachments'
    management form included); a visitor, who gets no form, sends the text alone."""
    page = client.get(reply_url(topic))
    form = dict(PageForm(page.content.decode(), containing="content").data()) if page.status_code == 200 else {}
    return client.post(reply_url(topic), {**form, "subject": "Re: Welcome", "content": text, **extra})


def posts_by(user):
    from machina.apps.forum_conversation.models import Post

    return list(Post.objects.filter(poster=user).order_by("pk").values_list("content", flat=True))


def test_machinas_url_names_are_bound_and_pass_the_checks():
    call_command("check", fail_level="WARNING")


def test_replies_are_limited_per_topic_and_a_failed_form_is_free(member_client, member, topic):
    assert reply(member_client, topic, "").status_code == 200  # machina's form again, with its error
    answers = [reply(member_client, topic, f"Reply {n}") for n in range(REPLIES)]
    assert [a.status_code for a in answers] == [302] * REPLIES
    refused = reply(member_client, topic, "One too many")
    assert refused.status_code == 429
    assert 1 <= retry_after(refused) <= 60
    assert "You have replied too often" in refused.content.decode()
    assert posts_by(member) == [f"Reply {n}" for n in range(REPLIES)]


def test_a_resend_keeps_every_field_the_member_sent(member_client, member, forum):
    from machina.apps.forum_conversation.models import Topic

    sent = machinas_form(member_client, topic_url(forum))
    assert "enable_signature" in sent and "attachment-TOTAL_FORMS" in sent and "poll-TOTAL_FORMS" in sent
    for n in range(TOPICS):
        answer = member_client.post(topic_url(forum), {**sent, "subject": f"Topic {n}", "content": f"Body {n}"})
        assert answer.status_code == 302
    written = "Limits per forum,\nand why they <b>help</b>."
    sent.update(subject="A third topic", content=written, enable_signature="on")
    refused = member_client.post(topic_url(forum), sent)
    assert refused.status_code == 429
    again = RefusalForm(refused.content.decode())
    resent = dict(again.data())
    # Every field as it was sent: "Attach a signature" still ticked, the topic type, the poll's and
    # the attachments' formset management forms, the empty poll fields; only the CSRF token is fresh.
    assert {k: v for k, v in resent.items() if k != "csrfmiddlewaretoken"} == {
        k: v for k, v in sent.items() if k != "csrfmiddlewaretoken"
    }
    assert resent["enable_signature"] == "on"
    editable = {attrs["name"] for _tag, attrs, _t, _o in again.controls if attrs.get("type") != "hidden"}
    assert editable == {"subject", "content"}
    assert "<select" not in refused.content.decode() and 'type="checkbox"' not in refused.content.decode()

    # Once starting topics works again, the form as it stands starts the topic, signature and all.
    throttling.reset(member, "topic", target=forum.pk)
    assert member_client.post(again.attrs["action"], resent).status_code == 302
    started = Topic.objects.get(subject="A third topic")
    assert started.first_post.content.raw == written
    assert started.first_post.enable_signature is True


def test_a_preview_at_the_limit_is_machinas_preview(member_client, member, topic, redis_client):
    for n in range(REPLIES):
        assert reply(member_client, topic, f"Reply {n}").status_code == 302
    for _ in range(4):
        preview = reply(member_client, topic, "A draft to look at", preview="Preview")
        assert preview.status_code == 200
        assert "A draft to look at" in preview.content.decode()
    assert redis_client.get(offences_key(member.pk, "reply")) is None  # never refused: no offence
    assert reply(member_client, topic, "Real").status_code == 429
    assert posts_by(member) == [f"Reply {n}" for n in range(REPLIES)]


def test_a_visitor_keeps_machinas_login_redirect(topic, redis_client):
    visitor = Client()
    for _ in range(6):
        answer = reply(visitor, topic, "Who am I")
        assert answer.status_code == 302 and answer["Location"].startswith("/accounts/login/")
    assert not [key for key in redis_client.keys() if b"reply" in key]


def test_a_member_signed_in_through_the_login_form_is_limited(member, topic):
    client = Client()
    assert client.login(username=member.username, password=PASSWORD)
    assert [reply(client, topic, f"R{n}").status_code for n in range(REPLIES + 1)] == [302] * REPLIES + [429]


def test_a_new_members_reply_is_held_for_review_by_settings_only(settings, member_client, member, topic):
    """Settings only: the binding hides the post machina saves ("hold": approved False) while the member
    has no approved post; machina's own topic page leaves it out until a moderator approves it."""
    from machina.apps.forum_conversation.models import Post

    from throttling.models import ActionPolicy, Held

    binding = {
        **settings.THROTTLING_VIEWS["forum_conversation:post_create"],
        "content": "content",
        "hold": {"approved": False},
    }
    settings.THROTTLING_VIEWS = {**settings.THROTTLING_VIEWS, "forum_conversation:post_create": binding}
    ActionPolicy.objects.filter(action="reply").update(hold_until_approved=1)
    throttling.invalidate_policies()
    assert reply(member_client, topic, "My first reply here").status_code == 302
    post = Post.objects.get(poster=member)
    assert not post.approved
    held = Held.objects.get()
    assert (held.reason, held.content_object, held.excerpt) == ("new_member", post, "My first reply here")
    forum = topic.forum
    page_url = reverse(
        "forum_conversation:topic",
        kwargs={"forum_slug": forum.slug, "forum_pk": forum.pk, "slug": topic.slug, "pk": topic.pk},
    )
    assert "My first reply here" not in member_client.get(page_url).content.decode()
    assert throttling.approve(held)
    assert "My first reply here" in member_client.get(page_url).content.decode()
    # Trust earned: the next reply is not held.
    assert reply(member_client, topic, "My second reply").status_code == 302
    assert Post.objects.get(poster=member, content="My second reply").approved
