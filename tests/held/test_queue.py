"""Held posts on views the site does not own (settings only) and its own (decorator, DRF): written hidden,
queued with the start of their text, approved (shown again, once), the member told once."""

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.contrib.messages import get_messages
from django.test import AsyncClient, Client

import throttling
from demo_site.models import Post
from tests.support.sites.forum import views as forum
from throttling import signals
from throttling.common.choices import HeldStatus
from throttling.models import Held

pytestmark = [pytest.mark.urls("tests.support.urlconfs.forum"), pytest.mark.usefixtures("redis_server")]

MIDDLEWARE = "throttling.middleware.ActionThrottleMiddleware"
SPAM = "Cheap watches at https://example.com/deals today only, buy two and get a third one for free"
HOLDING = {
    "forum:post": {
        "action": "post",
        "counts": "created:demo_site.Post",
        "content": "comment",
        "hold": {"is_public": False},
    },
    "forum:apost": {
        "action": "post",
        "counts": "created:demo_site.Post",
        "content": "comment",
        "hold": {"is_public": False},
    },
}


@pytest.fixture
def bind(settings):
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, MIDDLEWARE]
    settings.THROTTLING_VIEWS = HOLDING
    forum.reset()
    yield settings
    forum.reset()


@pytest.fixture
def repeat_held(policy):
    return policy("post", 60, 10, same_content_max=1, same_content_period=600, same_content_answer="hold")


class Caught:
    def __init__(self, signal):
        self.calls = []
        signal.connect(self, weak=False)
        self.signal = signal

    def __call__(self, sender, held, **kwargs):
        self.calls.append(held.pk)


@pytest.fixture
def caught():
    made = []

    def catch(signal):
        made.append(Caught(signal))
        return made[-1]

    yield catch
    for one in made:
        one.signal.disconnect(one)


def test_a_repeat_is_held_by_settings_only(
    bind, repeat_held, browser, member, django_capture_on_commit_callbacks, caught
):
    held_signal = caught(signals.held)
    first = browser.post("/forum/post/", {"comment": SPAM})
    with django_capture_on_commit_callbacks(execute=True):
        again = browser.post("/forum/post/", {"comment": SPAM})
    assert (first.status_code, again.status_code) == (302, 302)
    shown, hidden = Post.objects.order_by("pk")
    assert shown.is_public and not hidden.is_public
    held = Held.objects.get()
    assert held.status == HeldStatus.PENDING and held.content_object == hidden
    assert (held.user, held.action, held.reason) == (member, "post", "duplicate")
    assert held.excerpt.startswith("Cheap watches at https://example.com/deals")
    assert held.hidden == {"is_public": True}
    assert held_signal.calls == [held.pk]
    # The member is told once, on their next page.
    told = [str(m) for m in get_messages(again.wsgi_request)]
    assert told == ["Thanks! Your post was received and will appear once a moderator has looked at it."]


def test_no_reader_sees_a_held_post_written(bind, repeat_held, browser):
    written = []

    def seen(sender, instance, created, **kwargs):
        if created:
            written.append(Post.objects.filter(pk=instance.pk).values_list("is_public", flat=True).get())

    from django.db.models.signals import post_save

    post_save.connect(seen, sender=Post)
    try:
        browser.post("/forum/post/", {"comment": SPAM})
        browser.post("/forum/post/", {"comment": SPAM})
    finally:
        post_save.disconnect(seen, sender=Post)
    assert written == [True, False]  # the INSERT itself wrote it hidden


def test_approve_shows_it_again_once(
    bind, repeat_held, browser, admin_user, django_capture_on_commit_callbacks, caught
):
    approved = caught(signals.held_approved)
    browser.post("/forum/post/", {"comment": SPAM})
    browser.post("/forum/post/", {"comment": SPAM})
    held = Held.objects.get()
    with django_capture_on_commit_callbacks(execute=True):
        assert throttling.approve(held, by=admin_user) is True
        assert throttling.approve(held, by=admin_user) is False  # decided already
    held.refresh_from_db()
    assert held.status == HeldStatus.APPROVED and held.decided_by == admin_user and held.decided_at
    assert held.content_object.is_public
    assert approved.calls == [held.pk]


def test_reject_keeps_it_hidden_or_deletes_it(bind, repeat_held, browser, admin_user, settings):
    for _ in range(3):
        browser.post("/forum/post/", {"comment": SPAM})
    kept, deleted = Held.objects.order_by("pk")
    assert throttling.reject(kept, by=admin_user, reason="spam") is True
    kept.refresh_from_db()
    assert (kept.status, kept.note) == (HeldStatus.REJECTED, "spam") and not kept.content_object.is_public
    settings.THROTTLING_HELD_REJECTED = "delete"
    post_pk = deleted.object_id
    throttling.reject(deleted, by=admin_user, reason="spam")
    assert not Post.objects.filter(pk=post_pk).exists()


def test_over_the_rate_is_refused_on_the_view(bind, policy, browser):
    policy("post", 60, 2, same_content_max=1, same_content_period=600, same_content_answer="hold")
    answers = [browser.post("/forum/post/", {"comment": SPAM}).status_code for _ in range(3)]
    assert answers == [302, 302, 429]
    assert Post.objects.count() == 2 and Held.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_an_async_view_holds_too(bind, policy, member):
    policy("post", 60, 10, same_content_max=1, same_content_period=600, same_content_answer="hold")
    client = AsyncClient()
    client.force_login(member)

    async def send():
        return (await client.post("/forum/apost/", {"comment": SPAM})).status_code

    assert [async_to_sync(send)() for _ in range(2)] == [302, 302]
    shown, hidden = Post.objects.order_by("pk")
    assert shown.is_public and not hidden.is_public
    assert Held.objects.get().content_object == hidden


def test_the_decorator_holds_with_hold(policy, member, settings):
    settings.ROOT_URLCONF = "tests.support.urlconfs.held"
    policy("post", 60, 10, hold_until_approved=1)
    client = Client()
    client.force_login(member)
    assert client.post("/held/post/", {"comment": "My first post here"}).status_code == 302
    post = Post.objects.get()
    assert not post.is_public
    held = Held.objects.get()
    assert held.reason == "new_member" and held.content_object == post
    throttling.approve(held)
    assert client.post("/held/post/", {"comment": "My second post"}).status_code == 302
    assert Post.objects.order_by("pk").last().is_public and Held.objects.count() == 1


def test_a_drf_view_holds_with_the_decision_it_is_given(policy, member, settings):
    settings.ROOT_URLCONF = "tests.support.urlconfs.held"
    policy("post", 60, 10, hold_until_approved=1)
    client = Client()
    client.force_login(member)
    assert client.post("/held/api/", {"comment": "From the API"}).status_code == 201
    held = Held.objects.get()
    assert held.reason == "new_member" and not held.content_object.is_public
    assert held.excerpt == "From the API"


def test_hold_needs_created_counts():
    from django.core.exceptions import ImproperlyConfigured

    from throttling.decorators import throttle_action

    with pytest.raises(ImproperlyConfigured, match="created:"):
        throttle_action("post", hold={"is_public": False})
    with pytest.raises(ImproperlyConfigured, match="dict of the fields"):
        throttle_action("post", counts="created:demo_site.Post", hold=["is_public"])


def test_another_new_member_is_still_held(policy):
    policy("post", 60, 10, hold_until_approved=1)
    users = get_user_model().objects
    one, two = users.create_user("one"), users.create_user("two")
    Held.objects.create(user=one, identity="u:1", action="post", reason="new_member", status="approved")
    assert not throttling.check(one, "post").held
    assert throttling.check(two, "post").held


def test_the_notice_in_chinese(bind, repeat_held, browser):
    from django.utils import translation

    browser.post("/forum/post/", {"comment": SPAM})
    with translation.override("zh-hans"):  # the member's language, as LocaleMiddleware activates it
        again = browser.post("/forum/post/", {"comment": SPAM})
    assert [str(m) for m in get_messages(again.wsgi_request)] == ["谢谢！你的帖子已收到，版主查看后就会显示。"]


def test_a_binding_holds_only_rows_it_counts():
    from throttling.adapters import url_bindings as bindings

    _, problems = bindings.parse({"forum:post": {"action": "post", "hold": {"is_public": False}}})
    assert len(problems) == 1 and 'needs counts="created:<app_label.ModelName>"' in problems[0]
    _, problems = bindings.parse(
        {"forum:post": {"action": "post", "counts": "created:demo_site.Post", "hold": "is_public"}}
    )
    assert len(problems) == 1 and "dict of the fields" in problems[0]
    _, problems = bindings.parse(
        {"forum:post": {"action": "post", "counts": "created:demo_site.Post", "hold": {"visible": False}}}
    )
    assert len(problems) == 1 and "demo_site.Post has no field 'visible'" in problems[0]
    bound, problems = bindings.parse(HOLDING)
    assert problems == [] and bound["forum:post"].hold == {"is_public": False}


def test_hold_until_approved_2_holds_a_new_member_twice_then_not(policy, settings, django_user_model, admin_user):
    settings.ROOT_URLCONF = "tests.support.urlconfs.held"
    policy("post", 60, 10, hold_until_approved=2)
    newcomer, other = (django_user_model.objects.create_user(name) for name in ("newcomer", "other"))
    clients = {}
    for user in (newcomer, other):
        clients[user] = Client()
        clients[user].force_login(user)

    def post(user, text):
        assert clients[user].post("/held/post/", {"comment": text}).status_code == 302
        return Post.objects.filter(author=user).order_by("pk").last()

    first, second = post(newcomer, "Hello, I am new here"), post(newcomer, "A second post of mine")
    assert not first.is_public and not second.is_public
    for held in Held.objects.filter(user=newcomer):
        assert throttling.approve(held, by=admin_user)  # a moderator approves both: trust earned
    first.refresh_from_db()
    assert first.is_public
    third = post(newcomer, "Now I post freely")
    assert third.is_public and Held.objects.filter(user=newcomer).count() == 2
    assert not post(other, "Another newcomer's first post").is_public  # still held


def test_a_hold_block_holds_the_members_posts_on_the_view(bind, policy, browser, member):
    from throttling.models import Block

    policy("post", 60, 10)
    Block.objects.create(user=member, severity="hold", reason="behind a carrier's address a raid used")
    assert browser.post("/forum/post/", {"comment": "Just a regular post"}).status_code == 302
    held = Held.objects.get()
    assert held.reason == "blocked" and not held.content_object.is_public


def test_the_excerpt_is_what_a_reader_sees_however_the_text_is_padded():
    from throttling.held.service import excerpt_of

    assert excerpt_of("\u200b" * 4500 + "Cheap pills at https://pharma.example/buy") == (
        "Cheap pills at https://pharma.example/buy"
    )
    assert excerpt_of("Chea\u200bp  pills\u2060 at\nhome") == "Cheap pills at home"
