"""The third answer: a match a moderator should judge is admitted and held, with why; over the rate is refused."""

import asyncio

import pytest
from django.contrib.auth import get_user_model

import throttling
from bench.content_corpus import BASES
from throttling.common.choices import HeldStatus
from throttling.engine.decision import ADMITTED, DUPLICATE, NEW_MEMBER, REPEATED, THROTTLED, WAVE
from throttling.models import Block, Held

pytestmark = pytest.mark.django_db

SPAM = BASES["cash"]["text"]
OTHER = BASES["bike"]["text"]


def test_a_repeat_is_held_not_refused_under_the_answer_hold(redis_server, policy):
    policy("reply", 60, 10, same_content_max=1, same_content_period=600, same_content_answer="hold")
    first = throttling.check("alice", "reply", content=SPAM)
    again = throttling.check("alice", "reply", content=SPAM)
    assert first.allowed and not first.held and first.reason == ADMITTED
    assert again.allowed and again.held
    assert again.reason == DUPLICATE and again.duplicate == REPEATED
    assert again.offences == 0
    # Recorded like any admission: it took quota, and a third repeat is held too.
    assert again.remaining == first.remaining - 1
    third = throttling.check("alice", "reply", content=SPAM)
    assert third.held and third.remaining == again.remaining - 1
    assert not throttling.check("alice", "reply", content=OTHER).held


def test_the_answer_refuse_still_refuses(redis_server, policy):
    policy("reply", 60, 10, same_content_max=1, same_content_period=600)
    throttling.check("alice", "reply", content=SPAM)
    again = throttling.check("alice", "reply", content=SPAM)
    assert not again.allowed and not again.held and again.reason == DUPLICATE


def test_a_wave_is_held_from_the_third_member_at_members_2(redis_server, policy):
    policy("reply", 60, 10, same_content_members=2, same_content_period=600, same_content_answer="hold")
    decisions = [throttling.check(f"spammer-{i}", "reply", content=SPAM) for i in range(5)]
    assert all(d.allowed for d in decisions)
    assert [d.held for d in decisions] == [False, False, True, True, True]
    assert decisions[2].reason == DUPLICATE and decisions[2].duplicate == WAVE


def test_over_the_rate_is_refused_whatever_the_content_answer(redis_server, policy):
    policy("reply", 60, 2, same_content_max=1, same_content_period=600, same_content_answer="hold")
    assert throttling.check("alice", "reply", content=SPAM).allowed
    assert throttling.check("alice", "reply", content=SPAM).held
    over = throttling.check("alice", "reply", content=SPAM)
    assert not over.allowed and not over.held and over.reason == THROTTLED


@pytest.mark.parametrize("algorithm", ["sliding_log", "token_bucket"])
def test_both_algorithms_hold(redis_server, policy, algorithm):
    policy(
        "reply", 60, 10, algorithm=algorithm, same_content_max=1, same_content_period=600, same_content_answer="hold"
    )
    throttling.check("alice", "reply", content=SPAM)
    assert throttling.check("alice", "reply", content=SPAM).held


def test_a_hold_block_holds_everything_of_the_member(redis_server, policy, member):
    policy("reply", 60, 10)
    Block.objects.create(user=member, severity="hold", reason="carrier NAT, watch closely")
    decision = throttling.check(member, "reply")
    assert decision.allowed and decision.held and decision.reason == "blocked"
    other = get_user_model().objects.create_user("someone-else")
    assert not throttling.check(other, "reply").held


def test_a_hold_block_of_a_range_holds_requests_from_it(redis_server, policy, rf):
    policy("reply", 60, 10)
    Block.objects.create(network="203.0.113.0/24", severity="hold", reason="a raid's carrier")
    inside = rf.post("/", REMOTE_ADDR="203.0.113.9")
    outside = rf.post("/", REMOTE_ADDR="198.51.100.7")
    assert throttling.check(inside, "reply").held
    assert not throttling.check(outside, "reply").held


def _approved(user, action, n):
    for _ in range(n):
        Held.objects.create(user=user, identity="x", action=action, reason=NEW_MEMBER, status=HeldStatus.APPROVED)


def test_hold_until_approved_holds_a_new_member_until_enough_approvals(redis_server, policy):
    policy("post", 60, 10, hold_until_approved=2)
    users = get_user_model().objects
    newcomer, other = users.create_user("newcomer"), users.create_user("other-newcomer")
    first = throttling.check(newcomer, "post")
    assert first.held and first.reason == NEW_MEMBER
    _approved(newcomer, "post", 1)
    throttling.engine.policies.approvals.approvals.forget(newcomer.pk, "post")
    assert throttling.check(newcomer, "post").held
    _approved(newcomer, "post", 1)
    throttling.engine.policies.approvals.approvals.forget(newcomer.pk, "post")
    trusted = throttling.check(newcomer, "post")
    assert trusted.allowed and not trusted.held and trusted.reason == ADMITTED
    assert throttling.check(other, "post").held
    # A visitor who is not signed in is always held under it.
    assert throttling.check("visitor-203.0.113.9", "post").held


def test_a_new_members_approvals_are_counted_once_per_decision(redis_server, policy, settings):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    policy("post", 60, 10, hold_until_approved=2)
    newcomer = get_user_model().objects.create_user("counted-newcomer")
    settings.THROTTLING_TRUST_CACHE = 0  # nothing remembered: every decision counts again
    for _ in range(2):
        with CaptureQueriesContext(connection) as queries:
            assert throttling.check(newcomer, "post").held
        counts = [q["sql"] for q in queries.captured_queries if "throttling_held" in q["sql"]]
        assert len(counts) == 1, counts


@pytest.mark.django_db(transaction=True)
def test_async_decisions_hold_too(redis_server, policy):
    policy("post", 60, 10, hold_until_approved=1)
    newcomer = get_user_model().objects.create_user("async-newcomer")
    decision = asyncio.run(throttling.acheck(newcomer, "post"))
    assert decision.allowed and decision.held and decision.reason == NEW_MEMBER
    _approved(newcomer, "post", 1)
    throttling.engine.policies.approvals.approvals.forget(newcomer.pk, "post")
    assert not asyncio.run(throttling.acheck(newcomer, "post")).held


@pytest.mark.topology
@pytest.mark.django_db(transaction=True)
def test_a_wave_across_cluster_nodes_is_held_too(on_cluster, policy):
    """On a cluster the wave's half is judged in its own slot first: a wave it refuses is held in the member's."""
    from tests.backends.test_content_topologies import VARIANTS, _apart

    policy("reply", 60, 10, same_content_members=2, same_content_period=600, same_content_answer="hold")
    members = _apart(on_cluster, 4)
    decisions = [throttling.check(who, "reply", content=VARIANTS[i]) for i, who in enumerate(members)]
    assert all(d.allowed for d in decisions)
    assert [d.held for d in decisions] == [False, False, True, True]
    assert {d.duplicate for d in decisions[2:]} == {WAVE}
    # Held decisions are recorded: they took quota.
    assert throttling.peek(members[3], "reply").remaining == 9
