"""Refusals answered from memory: the same refusal without a Redis call, never an admission, and
ended in every process by a reset, a lift, an override or a policy edit."""

import time
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync

import throttling
from tests.support.helpers import Monitor, deciding_connections, wait_for
from throttling import penalties
from throttling.engine.decision import ADMITTED, BACKEND_FAILURE, EXEMPT, PENALISED, SHADOW, THROTTLED
from throttling.engine.keys import log_keys
from throttling.engine.refusal_memory import local_refusals

pytestmark = [pytest.mark.django_independent, pytest.mark.django_db]


def _sent(redis_server, decide):
    """(what decide() returns, the commands this thread sent meanwhile)."""
    with Monitor(redis_server.url) as monitor:
        result = decide()
    return result, monitor.sent_by(deciding_connections())


def test_a_refusal_is_answered_from_memory_as_redis_gave_it(redis_server, policy):
    policy("reply", 60, 2, windows=[(3600, 10)], verb="replied")
    throttling.check("ann", "reply")
    throttling.check("ann", "reply")
    first = throttling.check("ann", "reply")
    time.sleep(0.05)
    again, sent = _sent(redis_server, lambda: throttling.check("ann", "reply"))
    assert sent == []
    assert (again.allowed, again.reason, again.limit, again.remaining) == (False, THROTTLED, 2, 0)
    assert again.message == first.message and again.windows == first.windows and again.keys == first.keys
    assert first.retry_after - 1 < again.retry_after < first.retry_after  # counted down
    assert again.offences == first.offences + 1


def test_never_admitted_locally_once_the_wait_is_over(redis_server, policy):
    policy("reply", 1, 1)
    assert throttling.check("bo", "reply").allowed
    refused = throttling.check("bo", "reply")
    assert not refused.allowed
    time.sleep(refused.retry_after + 0.01)
    admitted, sent = _sent(redis_server, lambda: throttling.check("bo", "reply"))
    assert admitted.reason == ADMITTED and sent == ["EVALSHA"]


def test_another_cost_or_target_is_decided_by_redis(redis_server, policy):
    policy("upload", 60, 5)
    assert throttling.check("cy", "upload", cost=3).allowed
    assert not throttling.check("cy", "upload", cost=3).allowed  # remembered, at cost 3
    smaller, sent = _sent(redis_server, lambda: throttling.check("cy", "upload", cost=2))
    assert smaller.allowed and sent == ["EVALSHA"]
    policy("reply", 60, 1)
    assert throttling.check("cy", "reply", target="thread-1").allowed
    assert not throttling.check("cy", "reply", target="thread-1").allowed
    other, sent = _sent(redis_server, lambda: throttling.check("cy", "reply", target="thread-2"))
    assert other.allowed and sent == ["EVALSHA"]


def test_shadow_exempt_and_failures_are_never_remembered(own_redis, policy, member, django_user_model):
    policy("like", 60, 1, mode="shadow")
    for _ in range(3):
        assert throttling.check("di", "like").reason in (ADMITTED, SHADOW)
    policy("reply", 60, 1)
    staff = django_user_model.objects.create_user("mod", is_staff=True)
    assert [throttling.check(staff, "reply").reason for _ in range(3)] == [EXEMPT] * 3
    assert local_refusals.entries == {}
    own_redis.kill()
    assert throttling.check("di", "reply").reason == BACKEND_FAILURE
    assert local_refusals.entries == {}


def test_a_member_is_counted_by_redis_until_the_run_crosses(redis_server, policy, member, dead_queue):
    """The crossing, and so the escalation, is always a decision Redis made; later refusals of the
    pending run are answered from memory and their offences added at the next look."""
    policy("reply", 60, 1, offence_threshold=3)
    throttling.check(member, "reply")
    before = [throttling.check(member, "reply") for _ in range(3)]
    assert [(d.offences, d.escalated) for d in before] == [(1, False), (2, False), (3, True)]
    after, sent = _sent(redis_server, lambda: [throttling.check(member, "reply") for _ in range(5)])
    assert sent == [] and [d.offences for d in after] == [4, 5, 6, 7, 8]
    local_refusals.flush()
    offences = log_keys(before[0].identity, "reply")[1]
    assert int(throttling.backends.redis.get_backend().get(offences)) == 8


def test_offences_of_a_closed_run_are_dropped(redis_server, redis_client, policy, member):
    policy("reply", 60, 1, offence_threshold=2)
    throttling.check(member, "reply")
    assert [throttling.check(member, "reply").escalated for _ in range(4)] == [False, True, False, False]
    keys = log_keys(f"u:{member.pk}", "reply")
    redis_client.delete(keys[1], keys[3])  # what closing the run does once its rung is applied
    local_refusals.flush()
    assert not redis_client.exists(keys[1])  # the next run starts afresh, counted by Redis


def test_memory_is_bounded_and_the_soonest_to_expire_go_first(redis_server, policy, monkeypatch):
    monkeypatch.setattr(local_refusals, "max_entries", 3)
    policy("short", 10, 1)
    policy("long", 600, 1)
    for who, action in [("a", "long"), ("b", "short"), ("c", "long"), ("d", "long")]:
        throttling.check(who, action)
        throttling.check(who, action)
    assert sorted(k[0] for k in local_refusals.entries) == ["s:a", "s:c", "s:d"]  # "b" ended first


def test_a_refund_forgets_the_refusals_it_made_room_for(redis_server, policy):
    policy("reply", 60, 1)
    admitted = throttling.check("ed", "reply")
    assert not throttling.check("ed", "reply").allowed
    assert throttling.refund(admitted)
    assert throttling.check("ed", "reply").allowed


@pytest.mark.parametrize("way", ["sync", "async"])
@pytest.mark.parametrize("change", ["clear", "forget"])
def test_a_refusal_decided_before_a_change_that_ends_refusals_is_not_kept_after_it(
    redis_server, policy, monkeypatch, change, way
):
    # A change (a policy save, a reset, a lift: clear; a refund: forget) heard while a decision was
    # on its way to Redis: the refusal Redis gave was decided on what no longer holds.
    from throttling.engine import flow

    module = flow  # the one decision flow, driven by check() (sync) and acheck() (async)
    decide = throttling.check if way == "sync" else async_to_sync(throttling.acheck)
    policy("reply", 600, 1)
    assert decide("fay", "reply").allowed
    decided = module.interpret

    def heard_meanwhile(planned, reply):
        result = decided(planned, reply)
        if change == "clear":
            local_refusals.clear()
        else:
            local_refusals.forget(planned.keys[0])
        return result

    monkeypatch.setattr(module, "interpret", heard_meanwhile)
    refused = decide("fay", "reply")
    assert not refused.allowed and refused.retry_after > 500
    assert local_refusals.entries == {}
    monkeypatch.setattr(module, "interpret", decided)
    assert not decide("fay", "reply").allowed
    assert len(local_refusals.entries) == 1  # a refusal decided after the change is kept


def test_a_group_change_a_tier_names_ends_refusals_and_remembered_groups(
    redis_server, redis_client, policy, member, django_capture_on_commit_callbacks
):
    from django.contrib.auth.models import Group

    from throttling.engine.keys import groups_version_key
    from throttling.engine.policies import trust
    from throttling.models import PolicyTier

    trusted = Group.objects.create(name="trusted")
    PolicyTier.objects.create(policy=policy("reply", 600, 1, offence_threshold=0), group=trusted, multiplier=3)
    throttling.check(member, "reply")
    assert not throttling.check(member, "reply").allowed
    assert local_refusals.entries and trust.groups.cached(member) == frozenset()
    with django_capture_on_commit_callbacks(execute=True):
        member.groups.add(trusted)
        assert not local_refusals.entries and trust.groups.cached(member) is None  # here, at once
        assert redis_client.get(groups_version_key()) is None  # the others once it is committed
    assert redis_client.get(groups_version_key()) is not None
    assert throttling.check(member, "reply").allowed  # three a window now


def test_off_every_refusal_is_decided_by_redis(redis_server, policy, settings):
    settings.THROTTLING_LOCAL_REFUSALS = False
    policy("reply", 60, 1)
    throttling.check("fi", "reply")
    refused, sent = _sent(redis_server, lambda: [throttling.check("fi", "reply") for _ in range(3)])
    assert sent == ["EVALSHA"] * 3 and local_refusals.entries == {}


# --- Every process forgets within a second ------------------------------------------------------

PROCESSES = 3


def _refused_everywhere(other_process, who, env=None):
    workers = [other_process("reply", who, env) for _ in range(PROCESSES)]
    for worker in workers:
        state = worker.stdout.readline().split()
        assert state[3] in (THROTTLED, PENALISED), state
    return workers


def _admitted_everywhere(workers, changed_at, within=1.0):
    for worker in workers:
        stamp, _limit, _remaining, reason = worker.stdout.readline().split()
        assert reason == ADMITTED or reason == EXEMPT, reason
        assert float(stamp) - changed_at < within


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("change", ["reset", "override", "policy edit"])
def test_a_moderators_change_admits_again_in_every_process_within_a_second(
    redis_server, policy, member, other_process, change
):
    from throttling.models import MemberOverride

    p = policy("reply", 600, 1, offence_threshold=0)
    throttling.check(member, "reply")
    workers = _refused_everywhere(other_process, f"user:{member.pk}")
    time.sleep(1)  # the workers answer from memory meanwhile
    if change == "reset":
        throttling.reset(member, "reply")
    elif change == "override":
        MemberOverride.objects.create(user=member, exempt=True, reason="trusted")
    else:
        p.max_count = 5
        p.save()
    _admitted_everywhere(workers, time.time())


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_lift_admits_again_in_every_process_within_a_second(redis_server, policy, member, admin_user, other_process):
    policy("reply", 60, 5)
    penalty = penalties.apply_penalty(member, level=2, duration=timedelta(hours=1), action="reply", reason="Spam.")
    workers = _refused_everywhere(other_process, f"user:{member.pk}")
    time.sleep(1)
    penalties.lift(penalty, by=admin_user, reason="appeal")
    _admitted_everywhere(workers, time.time())
    wait_for(lambda: throttling.peek(member, "reply").allowed, message="this process too")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("change", ["reset", "policy edit"])
def test_the_change_is_pushed_to_every_process_at_once(redis_server, policy, member, other_process, change):
    """The other processes read the markers once an hour: only the message on the change channel can
    tell them, and it does within a fraction of THROTTLING_POLICY_REFRESH."""
    p = policy("reply", 600, 1, offence_threshold=0)
    throttling.check(member, "reply")
    workers = _refused_everywhere(other_process, f"user:{member.pk}", {"THROTTLING_TEST_POLICY_REFRESH": "3600"})
    time.sleep(1)  # every worker has subscribed meanwhile
    if change == "reset":
        throttling.reset(member, "reply")
    else:
        p.max_count = 5
        p.save()
    _admitted_everywhere(workers, time.time(), within=0.5)
