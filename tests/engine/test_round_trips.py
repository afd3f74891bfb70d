"""One EVALSHA and no SQL per decision in steady state: the request path."""

import time

import pytest
from django.test.utils import override_settings

import throttling
from tests.support.helpers import Monitor

pytestmark = pytest.mark.django_db


def command_calls(client, name):
    return client.info("commandstats").get(f"cmdstat_{name}", {}).get("calls", 0)


@override_settings(THROTTLING_POLICY_REFRESH=3600)
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
    assert monitor.commands == ["EVALSHA"] * (n + 5)
    # INFO commandstats agrees, and counts the writes the script makes inside Redis.
    assert command_calls(redis_client, "evalsha") - evalsha_before == n + 5
    assert command_calls(redis_client, "zadd") - zadd_before == n


def test_refusals_are_one_evalsha_too(redis_server, policy):
    policy("reply", 60, 1)
    throttling.check("warm-up", "reply")
    with override_settings(THROTTLING_POLICY_REFRESH=3600):
        throttling.check("warm-up", "reply")
        with Monitor(redis_server.url) as monitor:
            refused = [throttling.check("warm-up", "reply") for _ in range(10)]
    assert not any(d.allowed for d in refused)
    assert monitor.commands == ["EVALSHA"] * 10


def test_policy_change_marker_is_read_at_most_every_refresh(redis_server, policy):
    """With the default refresh, the only extra commands are a GET of the marker every 0.5 s
    and, every THROTTLING_EVICTION_CHECK (5 s), an INFO of the evicted-keys count (the first
    look also reads INFO memory, to warn once about an evicting Redis)."""
    policy("like", 60, 1000)
    throttling.check("warm-up", "like")
    started = time.monotonic()
    with Monitor(redis_server.url) as monitor:
        count = 0
        while time.monotonic() - started < 1.2:
            throttling.check(f"u{count % 50}", "like")
            count += 1
    assert monitor.commands.count("EVALSHA") == count
    others = [c for c in monitor.commands if c != "EVALSHA"]
    assert set(others) <= {"GET", "INFO"}
    assert 1 <= others.count("GET") <= 4  # ~1.3 s / 0.5 s
    assert others.count("INFO") <= 2  # one look in 1.2 s: stats, and memory the first time
    assert count > 10 * len(others)


def test_no_sql_per_decision(redis_server, policy, django_assert_num_queries):
    policy("reply", 60, 50)
    throttling.check("warm-up", "reply")
    with django_assert_num_queries(0):
        for i in range(40):
            throttling.check(f"member-{i}", "reply")
            throttling.peek(f"member-{i}", "reply")
