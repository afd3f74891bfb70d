"""Behind a real Sentinel (master, replica, one sentinel): exact, and following a failover within seconds."""

import time

import pytest
import redis
from asgiref.sync import async_to_sync
from django.test.utils import override_settings

import throttling
import throttling.engine.decision
from tests.support.helpers import redis_caches, subscribers, wait_for
from tests.support.processes.topology import SentinelGroup
from tests.support.traffic import Traffic
from throttling.engine.keys import changes_channel, log_keys, refusals_version_key
from throttling.engine.refusal_memory import local_refusals

pytestmark = [pytest.mark.topology, pytest.mark.django_db(transaction=True)]

LIMIT = 5


@pytest.fixture(scope="module")
def group():
    g = SentinelGroup().start()
    yield g
    g.stop()


@pytest.fixture
def behind_sentinel(group):
    redis.Redis(port=group.master_port()).flushall()
    with override_settings(THROTTLING_REDIS_URL=group.url):
        yield group


def _count_on(port, who, action="reply"):
    return redis.Redis(port=port).zcard(log_keys(f"s:{who}", action)[0])


def test_decisions_are_exact_and_land_on_the_master(behind_sentinel, policy):
    policy("reply", 60, LIMIT)
    results = [throttling.check("sam", "reply") for _ in range(LIMIT + 2)]
    assert [d.allowed for d in results] == [True] * LIMIT + [False, False]
    assert _count_on(behind_sentinel.master_port(), "sam") == LIMIT


def test_a_failover_during_traffic_raises_nothing_and_decisions_follow_the_new_master(behind_sentinel, policy):
    policy("reply", 60, LIMIT)
    with Traffic("reply", threads=3, pause=0.002) as traffic:
        time.sleep(0.3)
        old = behind_sentinel.master_port()
        issued = time.monotonic()
        new = behind_sentinel.failover()  # returns once the sentinel names it and it takes writes
        switched_at = time.monotonic()
        assert new != old
        # Within 5 s of the switch, a fresh member's decisions are counted on the new master, exactly.
        landed_after = None
        n = 0
        while time.monotonic() - switched_at < 5:
            n += 1
            who = f"after-switch-{n}"
            if (
                throttling.check(who, "reply").reason == throttling.engine.decision.ADMITTED
                and _count_on(new, who) == 1
            ):
                landed_after = time.monotonic() - switched_at
                break
            time.sleep(0.05)
    print(
        f"failover took {switched_at - issued:.2f} s; decisions on the new master "
        f"{landed_after:.3f} s after it; {len(traffic.decided)} decided meanwhile"
    )
    assert traffic.errors == []
    assert landed_after is not None and landed_after < 5, landed_after
    fresh = [throttling.check("after-the-failover", "reply") for _ in range(LIMIT + 2)]
    assert [d.allowed for d in fresh] == [True] * LIMIT + [False, False]
    assert _count_on(new, "after-the-failover") == LIMIT
    reasons = [d.reason for d in traffic.decided]
    assert reasons and set(reasons) <= {
        throttling.engine.decision.ADMITTED,
        throttling.engine.decision.THROTTLED,
        throttling.engine.decision.BACKEND_FAILURE,
    }


def test_the_change_channel_is_listened_to_on_the_master_the_sentinel_names(behind_sentinel, policy):
    """After a failover the subscriber follows the new master; the markers are read once an hour here,
    so only a message heard there can end a refusal."""
    with override_settings(THROTTLING_POLICY_REFRESH=3600):
        policy("reply", 60, 1)
        throttling.check("warm-up", "reply")
        old = behind_sentinel.master_port()
        wait_for(lambda: subscribers(redis.Redis(port=old)), message="subscribed on the master")
        new = behind_sentinel.failover()
        wait_for(lambda: subscribers(redis.Redis(port=new)), message="subscribed on the new master")
        wait_for(lambda: throttling.check("ann", "reply").allowed, message="decided on the new master")
        assert not throttling.check("ann", "reply").allowed
        assert local_refusals.entries
        redis.Redis(port=new).publish(changes_channel(), f"1 {refusals_version_key()}")
        wait_for(lambda: not local_refusals.entries, message="the refusal ended by the message")


def test_async_decisions_are_exact_behind_sentinel(behind_sentinel, policy):
    import asyncio

    policy("reply", 60, LIMIT)

    async def gather():
        return await asyncio.gather(*(throttling.acheck("flock", "reply") for _ in range(30)))

    decisions = async_to_sync(gather)()
    assert sum(d.allowed for d in decisions) == LIMIT
    assert _count_on(behind_sentinel.master_port(), "flock") == LIMIT


def test_a_django_redis_sentinel_alias_is_followed_too(group, policy):
    """No THROTTLING_REDIS_URL: the cache alias's Sentinel settings are used the same way."""
    redis.Redis(port=group.master_port()).flushall()
    caches = redis_caches(f"redis://{group.service}/0")
    caches["default"]["OPTIONS"] = {
        "CLIENT_CLASS": "django_redis.client.SentinelClient",
        "SENTINELS": [("127.0.0.1", group.sentinel.port)],
    }
    with override_settings(
        CACHES=caches, DJANGO_REDIS_CONNECTION_FACTORY="django_redis.pool.SentinelConnectionFactory"
    ):
        from throttling.backends.redis import get_backend

        assert get_backend().topology.kind == "sentinel"
        policy("reply", 60, LIMIT)
        assert sum(throttling.check("via-alias", "reply").allowed for _ in range(LIMIT + 1)) == LIMIT
        assert _count_on(group.master_port(), "via-alias") == LIMIT
