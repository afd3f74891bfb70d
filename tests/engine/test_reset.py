"""Resetting a member: every target of the action is forgotten, or the one `target=` names; the index
of targets that makes it possible stays as small and as short-lived as the counts it lists."""

import asyncio
import time

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.urls import reverse

import throttling
from throttling.engine.keys import state_keys, targets_key

pytestmark = pytest.mark.django_db

ALGORITHMS = ["sliding_log", "token_bucket"]
TARGETS = ["thread-1", "thread-2", 3]


def _refused_on_every_target(who, action, targets=TARGETS):
    for target in (None, *targets):
        assert throttling.check(who, action, target=target).allowed
        assert not throttling.check(who, action, target=target).allowed, target


def _admitted(who, action, targets=TARGETS):
    """Which of None and `targets` `who` may act on now (a peek: nothing recorded)."""
    return [throttling.peek(who, action, target=t).allowed for t in (None, *targets)]


@pytest.mark.django_independent
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_reset_forgets_every_target_of_the_action(redis_server, redis_client, policy, member, algorithm):
    policy("reply", 600, 1, algorithm=algorithm)
    policy("like", 600, 1, algorithm=algorithm)
    _refused_on_every_target(member, "reply")
    _refused_on_every_target(member, "like", ["post-9"])
    throttling.reset(member, "reply")
    assert _admitted(member, "reply") == [True] * 4
    assert _admitted(member, "like", ["post-9"]) == [False, False]  # another action: untouched
    assert not redis_client.exists(targets_key(f"u:{member.pk}", "reply"))
    # Counted afresh on every target, and found again by the next reset.
    _refused_on_every_target(member, "reply")
    throttling.reset(member)
    assert _admitted(member, "reply") == [True] * 4
    assert _admitted(member, "like", ["post-9"]) == [True, True]


@pytest.mark.django_independent
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_target_narrows_a_reset_to_that_target(redis_server, policy, algorithm):
    policy("reply", 600, 1, algorithm=algorithm)
    _refused_on_every_target("ann", "reply")
    throttling.reset("ann", "reply", target="thread-2")
    assert _admitted("ann", "reply") == [False, False, True, False]
    throttling.reset("ann", "reply")  # the index still lists the others
    assert _admitted("ann", "reply") == [True] * 4


@pytest.mark.django_independent
def test_areset_forgets_every_target_too(redis_server, policy):
    policy("reply", 600, 1)
    _refused_on_every_target("bo", "reply")

    async def reset(**kwargs):
        await throttling.areset("bo", "reply", **kwargs)

    asyncio.run(reset(target=3))
    assert _admitted("bo", "reply") == [False, False, False, True]
    asyncio.run(reset())
    assert _admitted("bo", "reply") == [True] * 4


def test_the_admins_reset_frees_every_target(admin_client, redis_server, policy, member):
    policy("reply", 600, 1)
    _refused_on_every_target(member, "reply")
    response = admin_client.post(
        reverse("admin:throttling_actionpolicy_reset"), {"member": "alice", "action": ["reply"]}
    )
    assert response.status_code == 302
    assert _admitted(member, "reply") == [True] * 4
    assert LogEntry.objects.filter(action_flag=CHANGE).count() == 1


@pytest.mark.django_independent
def test_a_targets_admission_after_the_read_keeps_its_place(redis_server, redis_client, policy):
    """What reset.lua promises: a target admitted after targets.lua read the index stays in it, so a
    later reset still finds it; one read is deleted."""
    policy("reply", 600, 1)
    throttling.check("cy", "reply", target="old")
    index = targets_key("s:cy", "reply")
    backend = throttling.backends.redis.get_backend()
    read_at, found = backend.script_call("targets", [index], [])
    assert found == [b"old"]
    throttling.check("cy", "reply", target="new")  # between the read and the delete
    old_key = state_keys("s:cy", "reply", target="old")[0]
    backend.script_call("reset", [old_key, index], [read_at, 1])
    assert redis_client.zrange(index, 0, -1) == [b"new"]
    assert _admitted("cy", "reply", ["old", "new"]) == [True, True, False]
    throttling.reset("cy", "reply")
    assert _admitted("cy", "reply", ["old", "new"]) == [True, True, True]


@pytest.mark.django_independent
@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_the_index_lists_only_targets_that_may_still_count(redis_server, redis_client, policy, algorithm):
    """A window of 2 s: the index lives 3 s from its last write, and a target's first admission drops
    the targets last listed more than 3 s ago (listed within 1 s of their last admission)."""
    policy("reply", 2, 5, algorithm=algorithm)
    index = targets_key("s:di", "reply")
    throttling.check("di", "reply", target="a")
    time.sleep(1.0)
    throttling.check("di", "reply", target="b")
    assert redis_client.zrange(index, 0, -1) == [b"a", b"b"]
    assert 2000 < redis_client.pttl(index) <= 3000
    time.sleep(2.1)
    throttling.check("di", "reply", target="c")
    assert redis_client.zrange(index, 0, -1) == [b"b", b"c"]
    # Refusals and peeks write nothing to it, and a count per member has none.
    throttling.peek("di", "reply", target="d")
    throttling.check("di", "reply")
    assert redis_client.zrange(index, 0, -1) == [b"b", b"c"]
    assert not redis_client.exists(targets_key("s:di", "like"))


@pytest.mark.slow
@pytest.mark.parametrize(
    "algorithm, period, max_count, writes",
    # The bucket never refills completely between two writes: a token drains in 0.2 s, two come every 0.3 s.
    [("sliding_log", 1, 100, 25), ("token_bucket", 2, 10, 35)],
)
@pytest.mark.django_independent
def test_a_busy_target_stays_listed_at_the_cost_of_one_write_per_half_window(
    redis_server, redis_client, policy, algorithm, period, max_count, writes
):
    """Admitted (and, on a bucket, refunded) every 0.1 s for longer than the index would live
    unrefreshed (1.5 windows): still found by the reset, and listed again only at the first write of
    each half window."""
    policy("reply", period, max_count, algorithm=algorithm)
    index = targets_key("s:ed", "reply")
    scores = set()
    for n in range(writes):
        decision = throttling.check("ed", "reply", target="busy")
        assert decision.allowed
        if algorithm == "token_bucket" and n % 3 == 2:
            assert throttling.refund(decision)
        scores.add(redis_client.zscore(index, "busy"))
        time.sleep(0.1)
    halves = writes * 0.1 / (period / 2)
    assert halves <= len(scores) <= halves + 4  # not one per write
    assert redis_client.exists(decision.log_key)
    throttling.reset("ed", "reply")
    assert not redis_client.exists(decision.log_key) and not redis_client.exists(index)


@pytest.mark.django_independent
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_refund_on_a_target_gives_back_there_only(redis_server, policy, algorithm):
    policy("reply", 600, 2, algorithm=algorithm)
    for target in ("x", "y", "y"):
        taken = throttling.check("fy", "reply", target=target)
    assert throttling.peek("fy", "reply", target="y").remaining == 0
    assert throttling.refund(taken)
    assert throttling.peek("fy", "reply", target="y").remaining == 1
    assert throttling.peek("fy", "reply", target="x").remaining == 1


@pytest.mark.django_independent
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_refund_that_leaves_nothing_on_a_target_takes_it_out_of_the_index(
    redis_server, redis_client, policy, algorithm
):
    """A request given back whole (a visitor sent to log in, a failed form) leaves no trace of its target."""
    policy("reply", 600, 5, algorithm=algorithm)
    index = targets_key("s:gu", "reply")
    kept = throttling.check("gu", "reply", target="kept")
    assert throttling.refund(throttling.check("gu", "reply", target="gone"))
    assert redis_client.zrange(index, 0, -1) == [b"kept"]
    # A target that still counts keeps its place, however often it is given back.
    assert throttling.refund(throttling.check("gu", "reply", target="kept"))
    assert redis_client.zrange(index, 0, -1) == [b"kept"]
    assert throttling.refund(kept)
    assert not redis_client.exists(index)
    # Listed again by its next admission, and found by a reset.
    throttling.check("gu", "reply", target="gone")
    assert redis_client.zrange(index, 0, -1) == [b"gone"]
    throttling.reset("gu", "reply")
    assert throttling.peek("gu", "reply", target="gone").remaining == 5


@pytest.mark.django_independent
def test_an_async_refund_takes_an_emptied_target_out_of_the_index_too(redis_server, redis_client, policy):
    policy("reply", 600, 5)

    async def given_back():
        return await throttling.arefund(await throttling.acheck("hu", "reply", target="gone"))

    assert asyncio.run(given_back())
    assert not redis_client.exists(targets_key("s:hu", "reply"))
