"""A Redis that may evict the throttle's keys is warned about, and evicted penalty mirrors come back soon."""

import logging
from datetime import timedelta

import pytest
import redis
from django.test.utils import override_settings

import throttling
import throttling.engine.background.eviction_watch
import throttling.engine.decision
import throttling.engine.keys
import throttling.engine.refusal_memory
from tests.support.helpers import wait_for
from tests.support.penalties import queued
from throttling import penalties
from throttling.checks import check_eviction
from throttling.engine.background.poller import poller

pytestmark = pytest.mark.django_db


def test_risk_names_an_evicting_policy_and_a_full_noeviction_redis():
    assert (
        throttling.engine.background.eviction_watch.risk(
            {"maxmemory_policy": "noeviction", "maxmemory": "0", "used_memory": "900000"}
        )
        is None
    )
    assert (
        throttling.engine.background.eviction_watch.risk(
            {"maxmemory_policy": "allkeys-lru", "maxmemory": "0", "used_memory": "1"}
        )
        is None
    )
    lru = throttling.engine.background.eviction_watch.risk(
        {"maxmemory_policy": "allkeys-lru", "maxmemory": "1000000", "used_memory": "10"}
    )
    assert "allkeys-lru" in lru and "evict" in lru
    ttl = throttling.engine.background.eviction_watch.risk(
        {"maxmemory_policy": "volatile-ttl", "maxmemory": "1000000", "used_memory": "10"}
    )
    assert "volatile-ttl" in ttl
    full = throttling.engine.background.eviction_watch.risk(
        {"maxmemory_policy": "noeviction", "maxmemory": "1000000", "used_memory": "950000"}
    )
    assert "near its maxmemory" in full


def test_w004_warns_about_an_evicting_redis_and_names_the_fix(own_redis):
    client = redis.Redis.from_url(own_redis.url)
    assert check_eviction() == []  # a fresh server: no maxmemory, noeviction
    client.config_set("maxmemory", 50_000_000)
    client.config_set("maxmemory-policy", "allkeys-lru")
    (warning,) = check_eviction()
    assert warning.id == "throttling.W004" and "allkeys-lru" in warning.msg
    assert "noeviction" in warning.hint


def test_w004_is_silent_when_redis_cannot_be_asked(own_redis):
    own_redis.kill()
    assert check_eviction() == []  # Redis being down is the decisions' business, never a crash here


def test_the_first_look_logs_the_risk_once(own_redis, policy, caplog):
    client = redis.Redis.from_url(own_redis.url)
    client.config_set("maxmemory", 50_000_000)
    client.config_set("maxmemory-policy", "volatile-lru")
    policy("reply", 60, 5)
    with override_settings(THROTTLING_POLICY_REFRESH=0, THROTTLING_EVICTION_CHECK=0):
        with caplog.at_level(logging.WARNING, logger="throttling"):
            throttling.engine.background.eviction_watch.eviction_watch.clear()  # this process has not looked at this Redis yet
            # A background thread left from an earlier test may have looked (and warned) between the
            # CONFIG SET and the clear: what counts is what the looks after the clear say.
            caplog.clear()
            throttling.check("ann", "reply")  # starts the background thread, which looks every 0.05 s here
            wait_for(
                lambda: throttling.engine.background.eviction_watch.eviction_watch.looks >= 5, message="five looks"
            )
    assert sum("may evict keys" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.django_db(transaction=True)
def test_evicted_penalty_mirrors_are_restored_without_waiting_for_the_minute(
    own_redis, policy, member, ladder, broker, dead_queue
):
    client = redis.Redis.from_url(own_redis.url)
    policy("reply", 60, 5)
    block = penalties.apply_penalty(member, level=2, duration=timedelta(hours=1), action="reply", reason="Spam.")
    assert throttling.check(member, "reply").reason == throttling.engine.decision.PENALISED
    with override_settings(THROTTLING_POLICY_REFRESH=0, THROTTLING_EVICTION_CHECK=0):
        throttling.engine.background.eviction_watch.eviction_watch.clear()
        throttling.check("warm-up", "reply")  # starts the background thread: its first look at the eviction count
        wait_for(lambda: throttling.engine.background.eviction_watch.eviction_watch.looks, message="the first look")
        # The thread is stopped while the pressure lasts: a look in the middle of it would send the
        # resync and take its lock there, and the junk that follows could evict that lock at random.
        thread = poller.thread
        poller.stop(timeout=10)
        assert not thread.is_alive()
        # Memory pressure: a small maxmemory, then enough junk that Redis must evict.
        client.config_set("maxmemory-policy", "allkeys-random")
        client.config_set("maxmemory", int(client.info("memory")["used_memory"]) + 200_000)
        pipe = client.pipeline(transaction=False)
        for i in range(3000):
            pipe.set(f"junk:{i}", "x" * 200)
        pipe.execute()
        assert client.info("stats")["evicted_keys"] > 0
        # The pressure ends here: the count has risen, and a random eviction of what comes next
        # (the resync's lock) would be this test's doing, not the app's.
        client.config_set("maxmemory", 0)
        throttling.check("warm-up", "reply")  # starts the background thread again
        # The background thread's next look sees the rise. One resync for the site went to Celery
        # (a queue no worker reads here), and the lock keeps the other processes from sending theirs.
        sent = wait_for(lambda: queued(broker, dead_queue), timeout=10, message="the resync at the broker")
    assert [name for name, _ in sent] == ["throttling.tasks.resync_penalties"]
    assert penalties.resync_soon(reason="evicted") is False
    # What the task does: the mirror is back and the member refused again.
    client.delete(throttling.engine.keys.member_penalty_key(member.pk))  # in case the random eviction spared it
    throttling.engine.refusal_memory.local_refusals.clear()  # as in a process that has not refused the member yet
    assert throttling.check(member, "reply").reason != throttling.engine.decision.PENALISED
    from throttling.tasks import resync_penalties

    resync_penalties()
    refused = throttling.check(member, "reply")
    assert refused.reason == throttling.engine.decision.PENALISED and refused.penalty.penalty_id == block.pk
