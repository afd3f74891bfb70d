"""ActionThrottleMiddleware and THROTTLING_VIEWS: a forum the site does not own (tests/support/sites/forum),
limited with settings only, against the suite's own Redis."""

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient, Client

import throttling
from tests.support.helpers import retry_after, used
from tests.support.penalties import Signals, offences_key, run_together
from tests.support.sites.forum import views as forum
from throttling import signals
from throttling.adapters.ratelimit_headers import POLICY, RATELIMIT

pytestmark = [pytest.mark.urls("tests.support.urlconfs.forum"), pytest.mark.usefixtures("redis_server")]

MIDDLEWARE = "throttling.middleware.ActionThrottleMiddleware"
PUBLISH = "/forum/comment/publish/{}/"

BINDINGS = {
    "forum:comment:publish": {
        "action": "reply",
        "methods": ["POST"],
        "target": "topic_id",
        "counts": "redirect",
        "form": "tests.support.sites.forum.forms.CommentForm",
    },
    "forum:comment:quick": {"action": "reply", "counts": "redirect"},
    "forum:comment:like:create": "like",
    "forum:guestbook": {"action": "sign", "anonymous": "count", "counts": "redirect"},
    "forum:vote-list": "vote",
    "mine-publish": {"action": "reply", "target": "topic_id", "counts": "redirect"},
    "api-reply": "reply",
}


@pytest.fixture
def bound(settings):
    """The forum bound with settings only: the middleware after AuthenticationMiddleware, THROTTLING_VIEWS."""
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, MIDDLEWARE]
    settings.THROTTLING_VIEWS = BINDINGS
    forum.reset()
    yield settings
    forum.reset()


@pytest.fixture
def client(browser, bound):
    return browser


def post(client, topic, text):
    return client.post(PUBLISH.format(topic), {"comment": text})


def saved():
    return [text for _, _, text in forum.COMMENTS]


# ----------------------------------------------------------------------------- the limit


def test_a_bound_view_is_limited_by_its_url_name_per_target(client, member, policy, monkeypatch):
    monkeypatch.setattr(forum, "WAIT", 0)  # the forum's own limit out of the way
    policy("reply", 60, 3, verb="replied")
    answers = [post(client, 1, f"reply {i}") for i in range(3)]
    assert [r.status_code for r in answers] == [302, 302, 302]
    assert all(r[POLICY] == '"reply-60";q=3;w=60' for r in answers)
    assert answers[-1][RATELIMIT].startswith('"reply-60";r=0;')
    refused = post(client, 1, "the fourth, kept for the member")
    assert refused.status_code == 429
    assert 1 <= retry_after(refused) <= 60
    assert refused[RATELIMIT].startswith('"reply-60";r=0;')
    assert "the fourth, kept for the member" in refused.content.decode()
    assert "Your comment" in refused.content.decode()  # labelled as the binding's form labels it
    assert saved() == ["reply 0", "reply 1", "reply 2"]  # the view never ran
    # Counted per topic (the URL's topic_id), and only the bound methods count.
    assert post(client, 2, "another topic").status_code == 302
    assert client.get(PUBLISH.format(1)).status_code == 200
    assert throttling.peek(member, "reply", target=1).remaining == 0
    assert throttling.peek(member, "reply", target=2).remaining == 2


@pytest.mark.django_db(transaction=True)
def test_a_bound_view_admits_exactly_the_limit_to_racing_requests(bound, member, policy, monkeypatch):
    monkeypatch.setattr(forum, "WAIT", 0)
    policy("reply", 60, 5)
    clients = [Client() for _ in range(8)]
    for c in clients:
        c.force_login(member)
    outcome = run_together(8, lambda i: [post(clients[i], 1, f"{i}-{n}").status_code for n in range(3)])
    assert [exc for _, exc in outcome if exc] == []
    codes = [code for answers, _ in outcome for code in answers]
    assert codes.count(302) == 5 and codes.count(429) == 19
    assert len(forum.COMMENTS) == 5


def test_the_short_form_binds_an_ajax_like_counting_successes(client, member, policy):
    policy("like", 60, 2)
    answers = [client.post(f"/forum/comment/like/{comment}/").status_code for comment in (7, 8, 9)]
    assert answers == [200, 200, 429]
    assert forum.LIKES == [(member.pk, 7), (member.pk, 8)]


def test_a_drf_router_view_is_bound_by_its_route_name(client, policy):
    policy("vote", 60, 1)
    assert client.post("/forum/api/votes/").status_code == 201
    assert client.post("/forum/api/votes/").status_code == 429


def test_a_view_that_is_not_bound_is_left_alone(client, member, policy):
    policy("reply", 60, 1)
    for _ in range(3):
        assert client.post("/forum/topic/new/", {"title": "Hello"}).status_code == 302
        assert client.post("/forum/flag/3/").status_code == 302
    assert used(member, "reply") == 0


# ----------------------------------------------------------------------------- counting what happened


def test_failed_forms_and_the_forums_own_refusals_cost_nothing_under_redirect(client, member, policy, redis_client):
    policy("reply", 60, 2, offence_threshold=3)
    with Signals(signals.action_throttled) as throttled:
        # Five empty comments: the forum shows the form again (200) each time.
        for _ in range(5):
            answer = post(client, 1, "")
            assert answer.status_code == 200 and "This field is required" in answer.content.decode()
        assert throttling.peek(member, "reply", target=1).remaining == 2
        # The member's real reply is admitted and saved.
        assert post(client, 1, "my real reply").status_code == 302
        # Four more refused by the forum itself ("wait 10 s"), answered with the form again.
        for i in range(4):
            answer = post(client, 1, f"too soon {i}")
            assert answer.status_code == 200 and "Please wait 10 seconds" in answer.content.decode()
        forum.LAST_POSTED.clear()  # ten seconds later
        assert post(client, 1, "my second reply").status_code == 302
    assert saved() == ["my real reply", "my second reply"]
    assert throttled.sent == []  # never refused by the throttle: no offence, no penalty on the way
    assert redis_client.get(offences_key(member.pk, "reply")) is None


def test_under_success_a_form_shown_again_counts(client, member, policy, bound):
    bound.THROTTLING_VIEWS = {"forum:comment:publish": {"action": "reply", "target": "topic_id"}}
    policy("reply", 60, 2)
    assert [post(client, 1, "").status_code for _ in range(3)] == [200, 200, 429]


def test_the_apps_own_429_and_its_errors_cost_nothing(client, member, policy):
    policy("like", 60, 2)
    assert client.post("/forum/comment/like/5/").status_code == 200
    for _ in range(3):
        own = client.post("/forum/comment/like/5/")  # the forum's own refusal: liked already
        assert own.status_code == 429 and own.json() == {"error": "You like this already."}
    assert client.post("/forum/comment/like/0/").status_code == 404
    assert used(member, "like") == 1
    assert client.post("/forum/comment/like/6/").status_code == 200
    ours = client.post("/forum/comment/like/7/")
    assert ours.status_code == 429 and 1 <= retry_after(ours) <= 60


def test_a_counts_callable_by_dotted_path(client, member, policy, bound):
    bound.THROTTLING_VIEWS = {
        "forum:comment:publish": {
            "action": "reply",
            "counts": "tests.support.urlconfs.adapters_views.created_or_redirected",
        }
    }
    policy("reply", 60, 5)
    post(client, 1, "")
    assert used(member, "reply") == 0
    post(client, 1, "saved")
    assert used(member, "reply") == 1


# ----------------------------------------------------------------------------- logged out


def test_a_logged_out_post_gets_the_forums_login_redirect_and_costs_nothing(bound, policy, rf):
    policy("reply", 60, 1)
    visitor = Client()
    for _ in range(3):
        answer = post(visitor, 1, "who am I")
        assert answer.status_code == 302 and answer["Location"].startswith("/accounts/login/")
        assert RATELIMIT not in answer
    assert used(rf.post("/", REMOTE_ADDR="127.0.0.1"), "reply") == 0


def test_anonymous_count_counts_visitors_per_address(bound, policy):
    policy("sign", 60, 2)
    first, second = Client(REMOTE_ADDR="10.0.0.1"), Client(REMOTE_ADDR="10.0.0.2")
    sign = {"comment": "hello"}
    assert [first.post("/forum/guestbook/", sign).status_code for _ in range(3)] == [302, 302, 429]
    assert second.post("/forum/guestbook/", sign).status_code == 302
    assert first.post("/forum/guestbook/", {"comment": ""}).status_code == 429  # refused before the view


# ----------------------------------------------------------------------------- decided once


def test_a_view_bound_and_decorated_is_decided_once(client, member, policy, monkeypatch):
    monkeypatch.setattr(forum, "WAIT", 0)
    policy("reply", 60, 3)
    answers = [client.post("/mine/4/", {"comment": f"reply {i}"}) for i in range(3)]
    assert [r.status_code for r in answers] == [302, 302, 302]
    assert answers[0][POLICY] == '"reply-60";q=3;w=60'  # one policy item: not listed twice
    assert client.post("/mine/4/", {"comment": "fourth"}).status_code == 429
    throttling.reset(member, "reply", target=4)
    assert client.post("/mine/4/", {"comment": ""}).status_code == 200
    assert throttling.peek(member, "reply", target=4).remaining == 3


def test_a_bound_drf_view_with_action_throttle_is_decided_once(client, member, policy):
    policy("reply", 60, 2)
    answers = [client.post("/api/replies/", {"text": "hi"}) for _ in range(3)]
    assert [r.status_code for r in answers] == [201, 201, 429]
    assert answers[0][POLICY] == '"reply-60";q=2;w=60'
    # A reply that fails DRF's validation is refunded once, by the binding.
    assert client.post("/api/replies/", {"text": ""}).status_code == 429
    throttling.reset(member, "reply")
    assert client.post("/api/replies/", {"text": ""}).status_code == 400
    assert used(member, "reply") == 0


def test_the_middleware_listed_twice_decides_once(client, policy, bound, monkeypatch):
    monkeypatch.setattr(forum, "WAIT", 0)
    bound.MIDDLEWARE = [*bound.MIDDLEWARE, MIDDLEWARE]  # read at the client's first request
    policy("reply", 60, 2)
    assert [post(client, 1, f"reply {i}").status_code for i in range(3)] == [302, 302, 429]


# ----------------------------------------------------------------------------- async


def test_an_async_view_through_the_middleware(bound, member, policy):
    policy("reply", 60, 2)
    client = AsyncClient()
    client.force_login(member)

    async def send(text):
        return await client.post("/forum/comment/quick/1/", {"comment": text})

    answers = [async_to_sync(send)(text) for text in ("", "one", "", "two", "three")]
    assert [r.status_code for r in answers] == [200, 302, 200, 302, 429]
    assert 1 <= retry_after(answers[-1]) <= 60
    assert [text for _, _, text in forum.COMMENTS] == ["one", "two"]
    visitor = AsyncClient()
    skipped = async_to_sync(visitor.post)("/forum/comment/quick/1/", {"comment": "hi"})
    assert skipped.status_code == 302 and skipped["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("methods", [["post"], ["Post", "put"]])
def test_methods_in_lower_case_bind_as_in_upper_case(client, bound, member, policy, monkeypatch, methods):
    monkeypatch.setattr(forum, "WAIT", 0)
    bound.THROTTLING_VIEWS = {"forum:comment:publish": {"action": "reply", "methods": methods, "counts": "redirect"}}
    policy("reply", 60, 2)
    assert [post(client, 1, f"reply {i}").status_code for i in range(3)] == [302, 302, 429]
    assert saved() == ["reply 0", "reply 1"]


def test_a_target_the_url_lacks_stops_the_site_at_start(bound):
    from django.core.exceptions import ImproperlyConfigured
    from django.core.handlers.wsgi import WSGIHandler

    from throttling.middleware import ActionThrottleMiddleware

    bound.THROTTLING_VIEWS = {"forum:comment:publish": {"action": "reply", "target": "comment_id"}}
    words = r"THROTTLING_VIEWS\['forum:comment:publish'\] counts per 'comment_id', which is not a keyword argument"
    with pytest.raises(ImproperlyConfigured, match=words):
        ActionThrottleMiddleware(lambda request: None)
    with pytest.raises(ImproperlyConfigured, match=words):
        WSGIHandler()  # what a WSGI server starts: it loads the middleware
    # The URL's own argument is fine, and so is a function of the request.
    bound.THROTTLING_VIEWS = {"forum:comment:publish": {"action": "reply", "target": "topic_id"}}
    ActionThrottleMiddleware(lambda request: None)
    bound.THROTTLING_VIEWS = {"forum:comment:publish": {"action": "reply", "target": lambda request: 1}}
    ActionThrottleMiddleware(lambda request: None)


def _broken_target(request):
    raise LookupError("no such comment")


def test_a_target_function_that_raises_fails_the_request_and_counts_nothing(bound, member, policy):
    bound.THROTTLING_VIEWS = {"forum:comment:publish": {"action": "reply", "target": _broken_target}}
    policy("reply", 60, 2)
    web = Client(raise_request_exception=False)
    web.force_login(member)
    assert post(web, 1, "hello").status_code == 500
    assert saved() == []
    assert throttling.peek(member, "reply").remaining == 2


def test_a_binding_that_cannot_be_read_stops_the_request_with_words(client, bound):
    from django.core.exceptions import ImproperlyConfigured

    bound.THROTTLING_VIEWS = {"forum:comment:publish": {"action": "reply", "counts": "sometimes"}}
    with pytest.raises(ImproperlyConfigured, match=r"THROTTLING_VIEWS\['forum:comment:publish'\]: counts='sometimes'"):
        post(client, 1, "hello")


@pytest.mark.urls("tests.support.urlconfs.checks")
@pytest.mark.parametrize("name", ["board:topic:reply", "forum:topic:reply"])
def test_a_binding_by_instance_or_application_namespace(client, bound, policy, name):
    # urls_checks includes the application namespace "forum" under the instance namespace "board".
    bound.THROTTLING_VIEWS = {name: "reply"}
    policy("reply", 60, 1)
    assert [client.post("/board/t/1/reply/").status_code for _ in range(2)] == [200, 429]
