"""Repeated content on a count per target: the targets index a reset reads and the post's content are
kept by the same single script call, all or nothing."""

import pytest
from asgiref.sync import async_to_sync

import throttling
from bench.content_corpus import BASES
from tests.support.helpers import Monitor, deciding_connections
from throttling.engine.decision import DUPLICATE, REPEATED, THROTTLED, WAVE
from throttling.engine.keys import state_keys, targets_key

pytestmark = pytest.mark.django_db

ALGORITHMS = ["sliding_log", "token_bucket"]
SPAM = BASES["cash"]["text"]
VARIANT = BASES["cash"]["variants"]["one word changed"]
OTHER = BASES["bike"]["text"]
THIRD = BASES["bike"]["different"][0]


def listed(redis_client, identity):
    return sorted(redis_client.zrange(targets_key(identity, "reply"), 0, -1))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_per_target_the_content_is_judged_in_the_call_that_lists_the_target(
    redis_server, redis_client, policy, algorithm
):
    policy("reply", 600, 1, algorithm=algorithm, same_content_max=1, same_content_period=600)
    assert throttling.check("warm-up", "reply", target="thread-9", content=OTHER).allowed
    with Monitor(redis_server.url) as monitor:
        first = throttling.check("alice", "reply", target="thread-1", content=SPAM)
        repeat = throttling.check("alice", "reply", target="thread-2", content=VARIANT)
        other = throttling.check("alice", "reply", target="thread-2", content=OTHER)
        throttled = throttling.check("alice", "reply", target="thread-1", content=THIRD)
    assert monitor.sent_by(deciding_connections()) == ["EVALSHA"] * 4
    assert first.allowed and other.allowed
    # The member's repeat is refused on any target, and took nothing of thread-2's quota.
    assert repeat.reason == DUPLICATE and repeat.duplicate == REPEATED
    assert throttled.reason == THROTTLED
    assert listed(redis_client, "s:alice") == [b"thread-1", b"thread-2"]
    # The post the rate refused was not remembered: on another thread it is a first post.
    assert throttling.check("alice", "reply", target="thread-3", content=THIRD).allowed
    assert listed(redis_client, "s:alice") == [b"thread-1", b"thread-2", b"thread-3"]
    # A reset forgets every target and the member's posts.
    throttling.reset("alice", "reply")
    assert not redis_client.exists(targets_key("s:alice", "reply"))
    for thread in ("thread-1", "thread-2", "thread-3"):
        assert not redis_client.exists(state_keys("s:alice", "reply", algorithm, thread)[0])
    assert throttling.check("alice", "reply", target="thread-1", content=SPAM).allowed


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_wave_refused_per_target_lists_no_target(redis_server, redis_client, policy, algorithm):
    policy("reply", 600, 1, algorithm=algorithm, same_content_members=2, same_content_period=600)
    assert throttling.check("alice", "reply", target="thread-1", content=SPAM).allowed
    assert throttling.check("bob", "reply", target="thread-1", content=VARIANT).allowed
    wave = throttling.check("carol", "reply", target="thread-2", content=SPAM)
    assert wave.reason == DUPLICATE and wave.duplicate == WAVE
    assert not redis_client.exists(targets_key("s:carol", "reply"))
    assert not redis_client.exists(state_keys("s:carol", "reply", algorithm, "thread-2")[0])
    assert throttling.check("carol", "reply", target="thread-2", content=OTHER).allowed
    assert listed(redis_client, "s:carol") == [b"thread-2"]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_refund_per_target_forgets_the_content_and_gives_the_quota_back(
    redis_server, redis_client, policy, algorithm
):
    policy("reply", 600, 1, algorithm=algorithm, same_content_max=1, same_content_period=600)
    first = throttling.check("alice", "reply", target="thread-1", content=SPAM)
    assert throttling.refund(first)
    assert throttling.check("alice", "reply", target="thread-1", content=SPAM).allowed
    assert listed(redis_client, "s:alice") == [b"thread-1"]


def test_async_per_target_decisions_with_content(redis_server, policy):
    policy("reply", 600, 1, same_content_max=1, same_content_period=600)

    @async_to_sync
    async def decide():
        first = await throttling.acheck("alice", "reply", target="thread-1", content=SPAM)
        repeat = await throttling.acheck("alice", "reply", target="thread-2", content=SPAM)
        return first, repeat

    first, repeat = decide()
    assert first.allowed and repeat.duplicate == REPEATED
