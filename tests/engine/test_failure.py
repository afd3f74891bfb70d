"""Redis refused, stalled, restarted or flushed never breaks a page."""

import logging
import os
import signal
import time

import pytest
import redis
from django.test.utils import override_settings

import throttling
import throttling.engine.decision
import throttling.engine.policies.cache
from throttling import signals

# The product's timeouts (hasty), not the suite's longer ones: their bound is what is tested.
pytestmark = [pytest.mark.django_independent, pytest.mark.django_db, pytest.mark.usefixtures("hasty")]

# A decision with default settings must come back within 200 ms; the bound asserted
# here is looser because CI machines stall, but it still rules out retry loops and
# unbounded waits (default timeouts are 0.1 s).
BOUND = 1.0


@pytest.fixture
def failures():
    seen = []

    def receiver(sender, **kwargs):
        seen.append(kwargs)

    signals.backend_failure.connect(receiver)
    yield seen
    signals.backend_failure.disconnect(receiver)


def timed(fn, *args, **kwargs):
    started = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - started


def test_server_down_fails_open_with_warning_and_signal(own_redis, policy, failures, caplog):
    policy("reply", 60, 1)
    assert throttling.check("ann", "reply").allowed
    own_redis.kill()
    with caplog.at_level(logging.WARNING, logger="throttling"):
        decisions = [timed(throttling.check, "ann", "reply") for _ in range(3)]
    for decision, elapsed in decisions:
        assert decision.allowed and decision.reason == throttling.engine.decision.BACKEND_FAILURE
        assert elapsed < BOUND
    assert len(failures) == 3 and all(f["fail_open"] for f in failures)
    assert failures[0]["action"] == "reply" and failures[0]["identity"] == "s:ann"
    assert any("Redis unavailable" in r.getMessage() for r in caplog.records)


def test_fail_closed_globally_and_per_policy(own_redis, policy, failures):
    policy("reply", 60, 5)
    policy("post", 60, 5, on_backend_failure="closed")
    policy("like", 60, 5, on_backend_failure="open")
    throttling.check("bea", "reply")
    own_redis.kill()
    assert throttling.check("bea", "reply").allowed  # site default: open
    closed = throttling.check("bea", "post")
    assert not closed.allowed and closed.retry_after == 5
    assert "temporarily unavailable" in closed.message
    with override_settings(THROTTLING_FAIL_OPEN=False, THROTTLING_FAIL_CLOSED_RETRY_AFTER=9):
        refused = throttling.check("bea", "reply")
        assert not refused.allowed and refused.retry_after == 9
        assert throttling.check("bea", "like").allowed  # the policy says open


def test_repeated_content_follows_the_fail_open_setting_during_an_outage(own_redis, policy, failures):
    """Content is judged in the decision's call: an outage admits every post failing open, refuses failing closed."""
    spam = "Cheap pills at https://pharma.example/buy"
    policy("reply", 60, 100, same_content_max=1, same_content_members=1, same_content_period=600)
    assert throttling.check("cat", "reply", content=spam).allowed
    assert not throttling.check("cat", "reply", content=spam).allowed  # a repeat, Redis up
    own_redis.kill()
    during = [throttling.check(f"m{i}", "reply", content=spam) for i in range(5)]
    during.append(throttling.check("cat", "reply", content=spam))
    assert all(d.allowed and d.reason == throttling.engine.decision.BACKEND_FAILURE for d in during)
    with override_settings(THROTTLING_FAIL_OPEN=False):
        assert not throttling.check("dan", "reply", content="a post never seen before").allowed


def test_stalled_server_costs_a_bounded_wait(own_redis, policy):
    policy("reply", 60, 5)
    throttling.check("cy", "reply")
    os.kill(own_redis.pid, signal.SIGSTOP)
    try:
        decision, elapsed = timed(throttling.check, "cy", "reply")
        again, elapsed_again = timed(throttling.check, "cy", "reply")
    finally:
        os.kill(own_redis.pid, signal.SIGCONT)
    assert decision.reason == throttling.engine.decision.BACKEND_FAILURE and decision.allowed
    assert elapsed < BOUND and elapsed_again < BOUND


def test_restarted_server_is_used_again(own_redis, policy):
    policy("reply", 60, 2)
    throttling.check("dee", "reply")
    own_redis.restart()  # empty, and every pooled connection is now dead
    decisions = [throttling.check("dee", "reply") for _ in range(4)]
    # At most the first call notices the dead connection; then counting resumes.
    failed = [d for d in decisions if d.reason == throttling.engine.decision.BACKEND_FAILURE]
    counted = [d for d in decisions if d.reason != throttling.engine.decision.BACKEND_FAILURE]
    assert len(failed) <= 1 and decisions[-1].reason != throttling.engine.decision.BACKEND_FAILURE
    assert [d.allowed for d in counted][:2] == [True, True]
    assert not counted[-1].allowed


def test_script_flush_is_recovered_without_double_count(own_redis, policy):
    policy("reply", 60, 5)
    first = throttling.check("eve", "reply")
    client = redis.Redis.from_url(own_redis.url)
    client.script_flush()
    second = throttling.check("eve", "reply")
    assert second.allowed and second.reason == throttling.engine.decision.ADMITTED
    assert client.zcard(first.log_key) == 2
    assert second.remaining == 3


def test_flushall_loses_counts_not_pages(own_redis, policy):
    policy("reply", 60, 1)
    throttling.check("fay", "reply")
    redis.Redis.from_url(own_redis.url).flushall()
    assert throttling.check("fay", "reply").allowed


def test_policies_load_while_redis_is_down(own_redis, policy):
    policy("reply", 60, 1, on_backend_failure="closed")
    own_redis.kill()
    throttling.engine.policies.cache.policies.clear()
    decision = throttling.check("gus", "reply")
    # The policy was read from the database (it says fail closed) despite the outage.
    assert not decision.allowed and decision.reason == throttling.engine.decision.BACKEND_FAILURE


def test_drf_view_during_outage_is_not_a_500(own_redis, policy):
    from django.contrib.auth.models import AnonymousUser
    from rest_framework.response import Response
    from rest_framework.test import APIRequestFactory
    from rest_framework.views import APIView

    from throttling.throttles import ActionThrottle

    class ReplyView(APIView):
        authentication_classes = []
        permission_classes = []
        throttle_classes = [ActionThrottle]
        throttle_action = "reply"

        def post(self, request):
            return Response({"ok": True}, status=201)

    policy("reply", 60, 1)
    own_redis.kill()
    request = APIRequestFactory().post("/reply/", {"body": "hi"}, format="json")
    request.user = AnonymousUser()
    assert ReplyView.as_view()(request).status_code == 201
    with override_settings(THROTTLING_FAIL_OPEN=False):
        response = ReplyView.as_view()(APIRequestFactory().post("/reply/", {}, format="json"))
        assert response.status_code == 429
        assert response["Retry-After"] == "5"
