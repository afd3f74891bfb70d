"""ActionThrottle on plain APIViews and ViewSets, against the suite's own Redis."""

import pytest
from rest_framework.test import APIClient
from rest_framework.views import exception_handler

import throttling
from tests.support.helpers import retry_after, used
from throttling.engine.decision import Decision
from throttling.engine.keys import log_keys
from throttling.throttles import ActionThrottled

pytestmark = [pytest.mark.urls("tests.support.urlconfs.adapters"), pytest.mark.usefixtures("redis_server")]

REPLY = "/api/replies/"
REPLY_STATUS = "/api/reply-status/"
MAPPED = "/api/mapped/"
POSTS = "/api/posts/"


@pytest.fixture
def api(member):
    client = APIClient()
    client.force_authenticate(member)
    return client


def test_post_is_counted_and_get_is_not(api, member, policy):
    policy("reply", 60, 2, verb="replied")
    for _ in range(5):
        assert api.get(REPLY).status_code == 200
    assert used(member, "reply") == 0
    assert api.post(REPLY, {"text": "hi"}, format="json").status_code == 201
    assert used(member, "reply") == 1
    assert api.get(REPLY).status_code == 200
    assert used(member, "reply") == 1


def test_refusal_is_429_with_retry_after_and_the_action_in_words(api, member, policy):
    policy("reply", 60, 2, verb="replied")
    for _ in range(2):
        assert api.post(REPLY, {"text": "hi"}, format="json").status_code == 201
    refused = api.post(REPLY, {"text": "one more"}, format="json")
    assert refused.status_code == 429
    wait = retry_after(refused)
    assert 1 <= wait <= 60
    assert refused.json()["detail"] == f"You have replied too often. Try again in {wait} seconds."
    # Rounded up: the header never promises a moment at which the member is still refused.
    assert throttling.peek(member, "reply").retry_after <= wait


def test_refusal_without_a_verb_names_the_action(api, policy):
    policy("reply", 60, 1)
    api.post(REPLY, {"text": "hi"}, format="json")
    refused = api.post(REPLY, {"text": "hi"}, format="json")
    assert refused.status_code == 429
    wait = retry_after(refused)
    assert refused.json()["detail"] == f"You have used “reply” too often. Try again in {wait} seconds."


@pytest.mark.parametrize(
    "seconds, header, words",
    [
        (12.01, "13", "13 seconds"),
        (0.0004, "1", "1 second"),
        (59.0, "59", "59 seconds"),
        (3600.5, "3601", "61 minutes"),
    ],
)
def test_retry_after_is_whole_seconds_rounded_up_and_at_least_one(seconds, header, words):
    exc = ActionThrottled(Decision(False, "reply", limit=5, remaining=0, retry_after=seconds, verb="replied"))
    response = exception_handler(exc, {})
    assert response.status_code == 429
    assert response["Retry-After"] == header
    assert response.data["detail"] == f"You have replied too often. Try again in {words}."


def test_throttle_actions_maps_methods_to_actions(api, member, policy):
    policy("reply", 60, 1, verb="replied")
    policy("delete_post", 60, 1)
    for _ in range(3):
        assert api.put(MAPPED).status_code == 200  # not in the map: not limited
    assert api.post(MAPPED).status_code == 201
    assert api.delete(MAPPED).status_code == 204
    assert used(member, "reply") == 1 and used(member, "delete_post") == 1

    refused_post = api.post(MAPPED)
    assert refused_post.status_code == 429
    assert refused_post.json()["detail"].startswith("You have replied too often.")
    refused_delete = api.delete(MAPPED)
    assert refused_delete.status_code == 429
    assert refused_delete.json()["detail"].startswith("You have used “delete_post” too often.")
    assert api.put(MAPPED).status_code == 200


def test_validation_error_refunds_the_entry(api, member, policy, redis_client):
    policy("reply", 60, 2, verb="replied")
    for _ in range(5):
        response = api.post(REPLY, {"text": ""}, format="json")
        assert response.status_code == 400
        assert "text" in response.json()
    assert used(member, "reply") == 0
    log_key = log_keys(throttling.peek(member, "reply").identity, "reply")[0]
    assert redis_client.zcard(log_key) == 0
    # The whole quota is still there for replies that pass validation.
    assert [api.post(REPLY, {"text": "hi"}, format="json").status_code for _ in range(3)] == [201, 201, 429]


# A 429 the view answers itself is not this throttle's refusal: the action did not happen.
@pytest.mark.parametrize(
    "status, refunded", [(400, True), (403, True), (500, True), (201, False), (200, False), (429, True)]
)
def test_refund_follows_the_status_the_view_returns(api, member, policy, status, refunded):
    policy("reply", 60, 3)
    response = api.post(REPLY_STATUS, {"status": status}, format="json")
    assert response.status_code == status
    assert used(member, "reply") == (0 if refunded else 1)


@pytest.mark.parametrize("path", ["/api/created-only/", "/api/created-only-by-function/"])
@pytest.mark.parametrize("status, counted", [(201, True), (200, False), (202, False), (400, False), (429, False)])
def test_counts_on_a_throttle_class_says_which_answers_count(api, member, policy, path, status, counted):
    # The site's function, by its dotted path or itself as the class attribute (never bound to the
    # throttle): only 201 or a redirect counts.
    policy("reply", 60, 3)
    assert api.post(path, {"status": status}, format="json").status_code == status
    assert used(member, "reply") == (1 if counted else 0)


def test_a_throttled_request_is_not_refunded(api, member, policy, redis_client):
    policy("reply", 60, 2)
    for _ in range(2):
        api.post(REPLY_STATUS, {"status": 201}, format="json")
    assert api.post(REPLY_STATUS, {"status": 201}, format="json").status_code == 429
    log_key = log_keys(throttling.peek(member, "reply").identity, "reply")[0]
    assert redis_client.zcard(log_key) == 2
    assert not throttling.peek(member, "reply").allowed


def test_anonymous_clients_are_limited_by_address(policy):
    policy("reply", 60, 1)
    first = APIClient(REMOTE_ADDR="192.0.2.10")
    assert first.post(REPLY, {"text": "hi"}, format="json").status_code == 201
    assert first.post(REPLY, {"text": "hi"}, format="json").status_code == 429
    other = APIClient(REMOTE_ADDR="192.0.2.11")
    assert other.post(REPLY, {"text": "hi"}, format="json").status_code == 201


def test_viewset_is_throttled_and_refunded(api, member, policy):
    policy("post", 60, 2, verb="posted")
    assert api.get(POSTS).status_code == 200
    assert api.post(POSTS, {"text": ""}, format="json").status_code == 400
    assert used(member, "post") == 0
    assert api.post(POSTS, {"text": "a"}, format="json").status_code == 201
    assert api.post(POSTS, {"text": "b"}, format="json").status_code == 201
    refused = api.post(POSTS, {"text": "c"}, format="json")
    assert refused.status_code == 429
    wait = retry_after(refused)
    assert refused.json()["detail"] == f"You have posted too often. Try again in {wait} seconds."
    assert api.get(POSTS).status_code == 200


def test_viewset_with_throttle_actions(api, member, policy):
    policy("post", 60, 5)
    policy("delete_post", 60, 1)
    assert api.delete("/api/mapped-posts/7/").status_code == 204
    assert api.delete("/api/mapped-posts/8/").status_code == 429
    assert api.post("/api/mapped-posts/").status_code == 201
    assert used(member, "post") == 1 and used(member, "delete_post") == 1


def test_exceptions_refund_whether_drf_handles_them_or_not(api, member, policy):
    policy("reply", 60, 3)
    assert api.post("/api/crash/", {"crash": "404"}, format="json").status_code == 404
    assert used(member, "reply") == 0
    with pytest.raises(RuntimeError):
        api.post("/api/crash/", {"crash": "500"}, format="json")
    assert used(member, "reply") == 0


def test_a_subclass_with_its_own_finalize_response_is_settled_on_its_final_response(api, member, policy):
    policy("reply", 60, 5)
    # The base class first, then its subclass: each is wrapped once, and for a response passing
    # through both wrappers the outer one settles, after the subclass's own code has run.
    assert api.post(REPLY_STATUS, {"status": 201}, format="json").status_code == 201
    refused = api.post("/api/signed-reply-status/", {"status": 201, "final": 400}, format="json")
    assert refused.status_code == 400 and refused["X-Signed"] == "yes"
    assert refused["RateLimit-Policy"] == '"reply-60";q=5;w=60'  # one policy item, not one per wrapper
    assert used(member, "reply") == 1  # judged on the final 400: given back
    saved = api.post("/api/signed-reply-status/", {"status": 400, "final": 201}, format="json")
    assert saved.status_code == 201 and saved["RateLimit"].startswith('"reply-60";r=3;')
    assert used(member, "reply") == 2  # judged on the final 201: kept


def test_an_exception_a_subclass_answers_is_settled_by_its_answer(api, member, policy):
    policy("reply", 60, 5)
    # The base class first (its wrapper, inside the subclass's, sees the exception first).
    assert api.post("/api/crash/", {"crash": "404"}, format="json").status_code == 404
    answered = api.post("/api/forgiving-crash/", {"crash": "500"}, format="json")
    assert answered.status_code == 503
    assert answered["RateLimit-Policy"] == '"reply-60";q=5;w=60'  # finalized like any answer
    assert used(member, "reply") == 0  # a 503 does not count


def test_a_decision_leaves_no_reference_cycle_on_the_view(member, policy, rf):
    """What ActionThrottle leaves on a view refers to nothing that refers back to the view, so a
    view is freed as soon as DRF drops it, without waiting for the garbage collector."""
    import gc
    import weakref

    from rest_framework.request import Request

    from tests.support.urlconfs.adapters_views import ReplyView
    from throttling.throttles import ActionThrottle

    policy("reply", 60, 5)
    request = Request(rf.post(REPLY))
    request.user = member
    view = ReplyView()
    gone = weakref.ref(view)
    gc.disable()
    try:
        assert ActionThrottle().allow_request(request, view) is True
        assert used(member, "reply") == 1
        del view
        assert gone() is None
    finally:
        gc.enable()


def test_methods_named_in_lower_case_are_the_same_methods():
    from throttling.engine.api import view_action

    class Lower:
        throttle_action = "reply"
        throttle_methods = ["post"]

    class LowerMapped:
        throttle_actions = {"post": "reply", "delete": "delete_post"}

    assert view_action(Lower, "POST") == "reply" and view_action(Lower, "PUT") is None
    assert view_action(LowerMapped, "POST") == "reply" and view_action(LowerMapped, "DELETE") == "delete_post"
    assert view_action(LowerMapped, "PUT") is None


def test_the_decorator_takes_one_method_as_a_string(member, policy, rf):
    from django.http import HttpResponse

    from throttling.decorators import throttle_action

    view = throttle_action("reply", methods="post")(lambda request: HttpResponse("saved"))
    policy("reply", 60, 1)
    answers = []
    for _ in range(2):
        request = rf.post("/reply/", {"text": "hi"})
        request.user = member
        answers.append(view(request).status_code)
    assert answers == [200, 429]
