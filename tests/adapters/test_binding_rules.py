"""What a binding counts on a forum the site does not own: previews skipped, rows created, visitors by
address, login redirects never, targets as numbers and from the POST body, bad settings at start,
and headers after a refund."""

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponse
from django.test import AsyncClient, Client

import throttling
from demo_site.models import Post
from tests.support.helpers import used
from tests.support.penalties import offences_key, run_together
from tests.support.sites.forum import views as forum
from throttling.adapters.ratelimit_headers import RATELIMIT
from throttling.middleware import ActionThrottleMiddleware

pytestmark = [pytest.mark.urls("tests.support.urlconfs.forum"), pytest.mark.usefixtures("redis_server")]

MIDDLEWARE = "throttling.middleware.ActionThrottleMiddleware"
PUBLISH = "/forum/comment/publish/{}/"


@pytest.fixture
def bind(settings):
    """bind({URL name: binding}): the forum bound with settings only."""
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, MIDDLEWARE]
    forum.reset()

    def bound(views):
        settings.THROTTLING_VIEWS = views
        return settings

    yield bound
    forum.reset()


@pytest.fixture
def client(browser):
    return browser


# ----------------------------------------------------------------------------- skip


def test_a_preview_at_the_limit_is_the_apps_preview_and_costs_nothing(client, member, policy, bind, redis_client):
    bind({"forum:comment:publish": {"action": "reply", "counts": "redirect", "skip": ["preview"]}})
    forum.WAIT = 0
    try:
        policy("reply", 60, 1, offence_threshold=3)
        assert client.post(PUBLISH.format(1), {"comment": "saved"}).status_code == 302
        for n in range(5):
            preview = client.post(PUBLISH.format(1), {"comment": f"draft {n}", "preview": "Preview"})
            assert preview.status_code == 200
            assert f"Preview: draft {n}" in preview.content.decode()
            assert RATELIMIT not in preview
        assert redis_client.get(offences_key(member.pk, "reply")) is None  # never refused: no offence
        assert client.post(PUBLISH.format(1), {"comment": "second"}).status_code == 429
    finally:
        forum.WAIT = 10


@pytest.mark.urls("tests.support.urlconfs.adapters")
def test_skip_and_created_on_the_drf_throttle(client, member, policy):
    policy("post", 60, 1)
    # Saved, then a 400: the created row counts.
    assert client.post("/api/post-then-fail/", {"title": "Kept"}).status_code == 400
    assert Post.objects.count() == 1 and used(member, "post") == 1
    # At the limit a preview is the view's own answer, never our 429.
    preview = {"title": "Draft", "preview": "1"}
    assert [client.post("/api/post-then-fail/", preview).status_code for _ in range(3)] == [400] * 3
    assert client.post("/api/post-then-fail/", {"title": "Again"}).status_code == 429
    assert Post.objects.count() == 1


def test_skip_on_the_decorator(client, member, policy):
    from django.test import RequestFactory

    from throttling.decorators import throttle_action

    policy("reply", 60, 1)
    view = throttle_action("reply", skip=["preview"])(lambda request: HttpResponse("saved", status=201))
    factory = RequestFactory()

    def send(data):
        request = factory.post("/", data)
        request.user = member
        return view(request).status_code

    assert [send({"text": "a", "preview": "1"}) for _ in range(3)] == [201] * 3
    assert [send({"text": "a"}) for _ in range(2)] == [201, 429]
    with pytest.raises(ImproperlyConfigured, match="list of POST field names"):
        throttle_action("reply", skip="preview")


# ----------------------------------------------------------------------------- created:


def test_created_counts_a_post_saved_before_the_view_failed(client, member, policy, bind):
    bind({"forum:post": {"action": "post", "counts": "created:demo_site.Post"}})
    policy("post", 60, 3)
    bad_next = {"comment": "hello", "next": "javascript:alert(1)"}  # the member's own input
    answers = [client.post("/forum/post/", bad_next).status_code for _ in range(5)]
    assert answers == [400, 400, 400, 429, 429]
    assert Post.objects.filter(author=member).count() == 3


def test_under_redirect_the_same_failure_was_given_back(client, member, policy, bind):
    # Why created: is the robust choice: the status is the member's to choose after the save.
    bind({"forum:post": {"action": "post", "counts": "redirect"}})
    policy("post", 60, 3)
    bad_next = {"comment": "hello", "next": "javascript:alert(1)"}
    assert [client.post("/forum/post/", bad_next).status_code for _ in range(5)] == [400] * 5
    assert Post.objects.filter(author=member).count() == 5


def test_created_counts_nothing_when_no_row_was_created(client, member, policy, bind):
    bind({"forum:apost": {"action": "post", "counts": "created:demo_site.Post"}})
    policy("post", 60, 2)
    # A redirect without a row (the form was empty) is not the action.
    assert [client.post("/forum/apost/", {"comment": ""}).status_code for _ in range(4)] == [302] * 4
    assert used(member, "post") == 0


@pytest.mark.django_db(transaction=True)
def test_created_sees_only_this_requests_rows_under_threads(bind, member, policy):
    bind({"forum:apost": {"action": "post", "counts": "created:demo_site.Post"}})
    policy("post", 60, 100)
    clients = [Client() for _ in range(8)]
    for c in clients:
        c.force_login(member)
    # Half the requests create a row while the other half, at the same moment, create none.
    outcome = run_together(
        8, lambda i: [clients[i].post("/forum/apost/", {"comment": "x" if i % 2 else ""}).status_code for _ in range(3)]
    )
    assert [exc for _, exc in outcome if exc] == []
    assert Post.objects.count() == 12
    assert used(member, "post") == 12


@pytest.mark.django_db(transaction=True)
def test_created_under_an_async_stack(bind, member, policy):
    bind({"forum:apost": {"action": "post", "counts": "created:demo_site.Post"}})
    policy("post", 60, 2)
    client = AsyncClient()
    client.force_login(member)

    async def send(text):
        return (await client.post("/forum/apost/", {"comment": text, "next": "javascript:x"})).status_code

    assert [async_to_sync(send)(t) for t in ("", "one", "", "two", "three")] == [400, 400, 400, 400, 429]
    assert Post.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_created_sees_a_sync_views_rows_under_an_async_stack(bind, member, policy):
    # The sync view runs in a thread of the event loop's: the request's context goes with it.
    bind({"forum:post": {"action": "post", "counts": "created:demo_site.Post"}})
    policy("post", 60, 2)
    client = AsyncClient()
    client.force_login(member)

    async def send():
        return (await client.post("/forum/post/", {"comment": "x", "next": "javascript:x"})).status_code

    assert [async_to_sync(send)() for _ in range(3)] == [400, 400, 429]
    assert Post.objects.count() == 2


def test_created_names_an_installed_model(bind, client):
    bind({"forum:post": {"action": "post", "counts": "created:demo_site.Nothing"}})
    with pytest.raises(ImproperlyConfigured, match="names no installed model"):
        client.post("/forum/post/", {"comment": "x"})


# ----------------------------------------------------------------------------- visitors


def test_visitors_are_counted_by_address_by_default_ipv6_by_prefix(bind, policy):
    bind({"forum:guestbook": {"action": "sign", "counts": "redirect"}})
    policy("sign", 60, 2)
    sign = {"comment": "hello"}
    here, neighbour = Client(REMOTE_ADDR="2001:db8::1"), Client(REMOTE_ADDR="2001:db8::ffff")
    elsewhere = Client(REMOTE_ADDR="2001:db8:0:1::1")
    assert here.post("/forum/guestbook/", sign).status_code == 302
    assert neighbour.post("/forum/guestbook/", sign).status_code == 302  # the same /64
    assert neighbour.post("/forum/guestbook/", sign).status_code == 429
    assert elsewhere.post("/forum/guestbook/", sign).status_code == 302


@pytest.mark.parametrize("name, path", [("forum:comment:publish", PUBLISH.format(1)), ("forum:post", "/forum/post/")])
def test_a_login_redirect_is_never_counted_nor_refused(bind, policy, rf, name, path):
    # publish is login_required (never decided for a visitor), post redirects by its own check
    # (decided, and given back): neither becomes a 429, however often.
    bind({name: {"action": "reply", "counts": "success", "anonymous": "count"}})
    policy("reply", 60, 2)
    visitor = Client()
    for _ in range(6):
        answer = visitor.post(path, {"comment": "who am I"})
        assert answer.status_code == 302 and answer["Location"].startswith("/accounts/login/")
    assert used(rf.post("/", REMOTE_ADDR="127.0.0.1"), "reply") == 0


@pytest.mark.django_db(transaction=True)
def test_racing_visitors_of_a_login_required_view_all_get_the_login_redirect(bind, policy):
    bind({"forum:comment:publish": {"action": "reply", "anonymous": "count"}})
    policy("reply", 60, 1)
    outcome = run_together(8, lambda i: [Client().post(PUBLISH.format(1), {}).status_code for _ in range(3)])
    assert [code for codes, _ in outcome for code in codes] == [302] * 24


def test_a_member_sent_to_log_in_again_is_given_back_too(client, member, policy, bind, settings):
    settings.LOGIN_URL = "/forum/"  # post_then_go_next sends the member on to /forum/: "log in"
    bind({"forum:post": {"action": "post", "counts": "success"}})
    policy("post", 60, 1)
    assert [client.post("/forum/post/", {"comment": "x"}).status_code for _ in range(3)] == [302] * 3
    assert used(member, "post") == 0


# ----------------------------------------------------------------------------- targets


def test_a_whole_number_target_is_that_number_and_slugs_ignore_case(client, member, policy, bind):
    bind({"forum:publish-by-slug": {"action": "reply", "target": "topic"}})
    policy("reply", 60, 1)
    assert client.post("/forum/page/1/comment/", {"comment": "a"}).status_code == 302
    assert client.post("/forum/page/01/comment/", {"comment": "b"}).status_code == 429
    assert client.post("/forum/page/001/comment/", {"comment": "c"}).status_code == 429
    assert client.post("/forum/page/Welcome/comment/", {"comment": "d"}).status_code == 302
    assert client.post("/forum/page/welcome/comment/", {"comment": "e"}).status_code == 429
    assert throttling.peek(member, "reply", target="1").remaining == 0


@pytest.mark.parametrize("target", ["tests.support.urlconfs.adapters_views.posted_object", "callable"])
def test_a_target_from_the_post_body_by_function_or_dotted_path(client, member, policy, bind, target):
    from tests.support.urlconfs.adapters_views import posted_object

    bind({"forum:comment-on-object": {"action": "reply", "target": posted_object if target == "callable" else target}})
    policy("reply", 60, 1)
    send = lambda pk: client.post("/forum/comments/post/", {"object_pk": pk, "comment": "hi"}).status_code  # noqa: E731
    assert [send("7"), send("07"), send("8")] == [302, 429, 302]
    # An empty target counts per member, never a 500.
    assert [send(""), send("")] == [302, 429]
    assert throttling.peek(member, "reply").remaining == 0


def test_an_empty_target_on_the_decorator_counts_per_member(member, policy):
    from django.test import RequestFactory

    from throttling.decorators import throttle_action

    policy("reply", 60, 1)
    view = throttle_action("reply", target=lambda request: request.POST.get("thread"))(
        lambda request: HttpResponse("saved", status=201)
    )
    answers = []
    for thread in ("", "  "):
        request = RequestFactory().post("/", {"thread": thread})
        request.user = member
        answers.append(view(request).status_code)
    assert answers == [201, 429]


# ----------------------------------------------------------------------------- at start


def test_a_malformed_binding_stops_the_middleware_at_start_with_e008s_words(settings):
    from throttling.checks.middleware import check_bindings

    settings.THROTTLING_VIEWS = {"forum:comment:publish": {"action": "reply", "counts": "sometimes"}}
    [error] = [e for e in check_bindings() if e.id == "throttling.E008"]
    with pytest.raises(ImproperlyConfigured) as raised:
        ActionThrottleMiddleware(lambda request: HttpResponse())
    assert str(raised.value) == error.msg


def test_a_wsgi_application_with_a_malformed_binding_does_not_load(settings):
    from django.core.handlers.wsgi import WSGIHandler

    settings.MIDDLEWARE = [*settings.MIDDLEWARE, MIDDLEWARE]
    settings.THROTTLING_VIEWS = {"forum:comment:publish": {"action": "reply", "anonymous": "maybe"}}
    with pytest.raises(ImproperlyConfigured, match="anonymous"):
        WSGIHandler()


# ----------------------------------------------------------------------------- headers


def test_the_headers_of_a_given_back_response_describe_the_quota_after_it(client, member, policy, bind):
    bind({"forum:comment:publish": {"action": "reply", "counts": "redirect"}})
    policy("reply", 60, 3)
    failed = client.post(PUBLISH.format(1), {"comment": ""})  # the form again: given back
    assert failed.status_code == 200
    assert failed[RATELIMIT].startswith('"reply-60";r=3;')
    assert used(member, "reply") == 0
    saved = client.post(PUBLISH.format(1), {"comment": "kept"})
    assert saved.status_code == 302 and saved[RATELIMIT].startswith('"reply-60";r=2;')
