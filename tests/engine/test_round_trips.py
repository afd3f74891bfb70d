"""One EVALSHA and no SQL per decision in steady state: the request path."""

import time

import pytest
from django.test.utils import override_settings

import throttling
from tests.support.helpers import Monitor, deciding_connections, subscribers, wait_for
from tests.support.traffic import decide_for
from throttling.backends.redis import get_backend
from throttling.engine.background.poller import poller
from throttling.engine.decision import ADMITTED, THROTTLED
from throttling.engine.keys import refusals_version_key
from throttling.engine.policies.cache import version_key

pytestmark = pytest.mark.django_db


def command_calls(client, name):
    return client.info("commandstats").get(f"cmdstat_{name}", {}).get("calls", 0)


@override_settings(THROTTLING_POLICY_REFRESH=3600)
@pytest.mark.django_independent
def test_one_evalsha_per_decision(redis_server, redis_client, policy):
    policy("reply", 60, 20, windows=[(3600, 100)])
    throttling.check("warm-up", "reply")  # loads policies and the script
    n = 30
    evalsha_before = command_calls(redis_client, "evalsha")
    zadd_before = command_calls(redis_client, "zadd")
    with Monitor(redis_server.url) as monitor:
        decisions = [throttling.check(f"user-{i % 3}", "reply") for i in range(n)]
        decisions += [throttling.peek("user-0", "reply") for _ in range(5)]
    assert all(d.allowed for d in decisions)
    assert monitor.sent_by(deciding_connections()) == ["EVALSHA"] * (n + 5)
    # INFO commandstats agrees, and counts the writes the script makes inside Redis.
    assert command_calls(redis_client, "evalsha") - evalsha_before == n + 5
    assert command_calls(redis_client, "zadd") - zadd_before == n


@pytest.mark.django_independent
def test_a_refusal_is_one_evalsha_then_answered_from_memory(redis_server, policy):
    policy("reply", 60, 1)
    throttling.check("warm-up", "reply")
    with Monitor(redis_server.url) as monitor:
        refused = [throttling.check("warm-up", "reply") for _ in range(10)]
    assert not any(d.allowed for d in refused)
    assert monitor.sent_by(deciding_connections()) == ["EVALSHA"]
    # The same refusal, its wait counted down, its offences counted.
    assert [d.offences for d in refused] == list(range(1, 11))
    assert [d.limit for d in refused] == [1] * 10
    waits = [d.retry_after for d in refused]
    assert waits == sorted(waits, reverse=True) and 0 < waits[-1] < 60


@pytest.mark.django_independent
def test_without_local_refusals_every_refusal_is_one_evalsha(redis_server, policy, settings):
    settings.THROTTLING_LOCAL_REFUSALS = False
    policy("reply", 60, 1)
    throttling.check("warm-up", "reply")
    with Monitor(redis_server.url) as monitor:
        refused = [throttling.check("warm-up", "reply") for _ in range(10)]
    assert not any(d.allowed for d in refused)
    assert monitor.sent_by(deciding_connections()) == ["EVALSHA"] * 10


@pytest.mark.django_independent
def test_the_markers_are_read_by_the_background_thread_only(redis_server, policy):
    """The deciding thread sends its EVALSHAs and nothing else; another connection (the process's
    background thread) reads both change markers in one MGET a second."""
    policy("like", 60, 1000)
    throttling.check("warm-up", "like")
    started = time.monotonic()
    with Monitor(redis_server.url) as monitor:
        count = 0
        while time.monotonic() - started < 1.2:
            throttling.check(f"u{count % 50}", "like")
            count += 1
    deciding = deciding_connections()
    assert monitor.sent_by(deciding) == ["EVALSHA"] * count
    others = [c for _db, client, c in monitor.events if client not in deciding]
    reads = [c for c in others if c.split(" ", 1)[0].upper() == "MGET"]
    assert 1 <= len(reads) <= 2  # ~1.3 s / 1 s
    assert all(version_key() in c and refusals_version_key() in c for c in reads)


# The background thread's periods in the long watches below: the markers four times a second, the
# eviction watch every second, so that a watch of 3.5 s sees as many of its looks (~14 marker reads,
# ~3 eviction looks) as 12 s would with the default periods.
REFRESH = 0.25
WATCH = 3.5


@pytest.mark.slow
@pytest.mark.django_independent
def test_only_evalsha_from_the_deciding_connection_while_the_background_thread_looks(
    redis_server, redis_client, policy, settings
):
    """Admissions and refusals while the background thread reads the markers 14 times: the thread that
    decides sends EVALSHA only; the markers (MGET, at most one a period) and the eviction watch (INFO)
    come from the background thread's connection, and changes from its subscriber, which sends nothing
    once subscribed."""
    settings.THROTTLING_POLICY_REFRESH = REFRESH
    settings.THROTTLING_EVICTION_CHECK = 1
    policy("like", 60, 10)
    throttling.check("warm-up", "like")
    # The background thread's subscriber is in place before the window: subscribed on the backend these
    # settings built (a settings change builds a new one, and the thread subscribes again on it), and alone.
    wait_for(
        lambda: poller._subscribed_on is get_backend() and subscribers(redis_client) == 1,
        message="the background thread subscribed on the current backend",
    )
    with Monitor(redis_server.url) as monitor:
        started = time.monotonic()
        decisions, deciding = decide_for(WATCH, "like")
        seconds = time.monotonic() - started
    sent = monitor.sent_by(deciding)
    assert set(sent) == {"EVALSHA"}
    assert {d.reason for d in decisions} == {ADMITTED, THROTTLED}
    # Admissions each took their call; most refusals were answered from memory.
    assert sum(d.allowed for d in decisions) <= len(sent) < len(decisions)
    others = [c.split(" ", 1)[0].upper() for _db, client, c in monitor.events if client not in deciding]
    # EVALSHA and SCRIPT LOAD: the offences of refusals answered from memory, added to Redis
    assert {"MGET", "INFO"} <= set(others) <= {"MGET", "INFO", "EVALSHA", "SCRIPT"}
    assert 10 <= others.count("MGET") <= seconds / REFRESH + 1


def test_no_sql_per_decision(redis_server, policy, django_assert_num_queries):
    policy("reply", 60, 50)
    throttling.check("warm-up", "reply")
    with django_assert_num_queries(0):
        for i in range(40):
            throttling.check(f"member-{i}", "reply")
            throttling.peek(f"member-{i}", "reply")
