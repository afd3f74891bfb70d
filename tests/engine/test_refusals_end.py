"""Refusals remembered in other processes end with their cause: a group change that moves a member's
trust tier, a refund, a lift just after Redis restarted. Each is measured in 3 other processes: every
one admits the member again within THROTTLING_POLICY_REFRESH + 1 s."""

import time
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group

import throttling
from throttling import penalties
from throttling.engine.decision import ADMITTED, PENALISED, THROTTLED
from throttling.models import PolicyTier

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PROCESSES = 3
REFRESH = 1.0  # THROTTLING_POLICY_REFRESH, the default


def _refused_everywhere(other_process, member, **kwargs):
    workers = [other_process("reply", f"user:{member.pk}", **kwargs) for _ in range(PROCESSES)]
    for worker in workers:
        state = worker.stdout.readline().split()
        assert state[3] in (THROTTLED, PENALISED), state
    return workers


def _admitted_everywhere(workers, changed_at, within=REFRESH + 1):
    for worker in workers:
        line = worker.stdout.readline()
        assert line, "the worker still refused when it stopped after 30 s"
        stamp, _limit, _remaining, reason = line.split()
        assert reason == ADMITTED, reason
        assert float(stamp) - changed_at < within


@pytest.mark.parametrize(
    "change",
    ["added to a trusted group", "added through the group", "removed from a probation group", "groups cleared"],
)
def test_a_group_change_that_moves_a_tier_admits_again_in_every_process(
    redis_server, policy, member, other_process, change
):
    trusted, probation = Group.objects.create(name="trusted"), Group.objects.create(name="probation")
    p = policy("reply", 600, 2, offence_threshold=0)
    PolicyTier.objects.create(policy=p, group=trusted, multiplier=3, position=0)
    PolicyTier.objects.create(policy=p, group=probation, multiplier=Decimal("0.5"), position=1)
    on_probation = change in ("removed from a probation group", "groups cleared")
    if on_probation:
        member.groups.add(probation)  # a limit of 1
    for _ in range(1 if on_probation else 2):
        assert throttling.check(member, "reply").allowed
    workers = _refused_everywhere(other_process, member)
    time.sleep(1)  # the workers answer from memory meanwhile, and remember the member's groups
    if change == "added to a trusted group":
        member.groups.add(trusted)
    elif change == "added through the group":
        trusted.user_set.add(member)
    elif change == "removed from a probation group":
        member.groups.remove(probation)
    else:
        member.groups.clear()
    _admitted_everywhere(workers, time.time())
    assert throttling.check(member, "reply").allowed  # this process too


def test_a_group_no_tier_names_changes_nothing_anywhere(redis_server, redis_client, policy, member):
    from throttling.engine.keys import groups_version_key

    policy("reply", 600, 1)
    throttling.check(member, "reply")
    member.groups.add(Group.objects.create(name="readers"))
    assert redis_client.get(groups_version_key()) is None


@pytest.mark.django_independent
@pytest.mark.parametrize("algorithm", ["sliding_log", "token_bucket"])
def test_a_refund_admits_again_in_every_process(redis_server, policy, member, other_process, algorithm):
    policy("reply", 600, 1, offence_threshold=0, algorithm=algorithm)
    taken = throttling.check(member, "reply")
    workers = _refused_everywhere(other_process, member)
    time.sleep(1)
    assert throttling.refund(taken)
    _admitted_everywhere(workers, time.time())


@pytest.mark.django_independent
def test_a_lift_just_after_redis_restarted_admits_again_in_every_process(
    own_redis, policy, member, admin_user, other_process
):
    """Redis keeps nothing across a restart here (no persistence), its change markers included. The
    lift's message is sent while the other processes' subscribers are still waiting to subscribe
    again (after 8 s of failures, their next try is 8 s away; coming back would end every refusal),
    so only their once-a-second read of the markers can tell them in time."""
    policy("reply", 60, 5)
    own_redis.kill()  # a restart since the policy was saved: no policy marker from now on
    own_redis.start()
    penalty = penalties.apply_penalty(member, level=2, duration=timedelta(hours=1), action="reply", reason="Spam.")
    workers = _refused_everywhere(other_process, member, redis_url=own_redis.url)
    time.sleep(1.5)  # every worker has read the markers
    own_redis.kill()
    time.sleep(8)  # their subscribers fail to come back meanwhile, and wait longer before each try
    own_redis.start()
    penalties.lift(penalty, by=admin_user, reason="appeal")
    _admitted_everywhere(workers, time.time())
