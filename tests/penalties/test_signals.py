"""Signals mark changes of state, never single requests: throttled once per offence window,
applied, lifted and expired once per penalty, however often the code that sends them runs."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import RequestFactory
from django.utils import timezone

import throttling
from tests.support.helpers import wait_for
from tests.support.penalties import Signals, offences_key, run_together
from throttling import penalties, signals
from throttling.models import PenaltyEvent


@pytest.mark.slow
def test_action_throttled_once_per_offence_window_per_identity_and_action(
    redis_client, policy, member, django_user_model, settings
):
    policy("reply", 60, 1, offence_threshold=0)
    policy("like", 60, 1, offence_threshold=0)
    policy("flag", 60, 1, offence_threshold=0, offence_window=2)
    bob = django_user_model.objects.create_user("bob")
    request = RequestFactory().post("/", REMOTE_ADDR="198.51.100.7")
    request.user = AnonymousUser()
    with Signals(signals.action_throttled) as throttled:
        for who in (member, bob, request):
            for action in ("reply", "like"):
                results = [throttling.check(who, action).allowed for _ in range(15)]
                assert results == [True] + [False] * 14
    sent = [(s["identity"], s["action"], s["user"]) for s in throttled.sent]
    assert sent == [
        ("u:%d" % member.pk, "reply", member),
        ("u:%d" % member.pk, "like", member),
        ("u:%d" % bob.pk, "reply", bob),
        ("u:%d" % bob.pk, "like", bob),
        ("ip:198.51.100.7", "reply", None),
        ("ip:198.51.100.7", "like", None),
    ]
    assert all(s["decision"].offences == 1 and not s["decision"].allowed for s in throttled.sent)

    # The offence window (2 s here) ends: the next refusal Redis decides opens a new one. (A process
    # answering the member's refusals from memory does not see the window end: the signal of the
    # new window comes with the first refusal Redis decides again.)
    settings.THROTTLING_LOCAL_REFUSALS = False
    assert throttling.check(member, "flag").allowed
    with Signals(signals.action_throttled) as throttled:
        for _ in range(3):
            assert not throttling.check(member, "flag").allowed
        wait_for(lambda: not redis_client.exists(offences_key(member.pk, "flag")), timeout=5, message="the window")
        for _ in range(3):
            assert not throttling.check(member, "flag").allowed
    assert [(s["action"], s["decision"].offences) for s in throttled.sent] == [("flag", 1), ("flag", 1)]


def test_peek_never_signals(policy, member, redis_server):
    policy("reply", 60, 1)
    throttling.check(member, "reply")
    with Signals(signals.action_throttled) as throttled:
        assert not any(throttling.peek(member, "reply").allowed for _ in range(5))
    assert throttled.sent == []


@pytest.mark.django_db(transaction=True)
def test_applied_and_lifted_once_even_if_lift_is_called_twice(redis_server, member, admin_user, django_user_model):
    mod = django_user_model.objects.create_user("mod", is_staff=True)
    with Signals(signals.penalty_applied) as applied, Signals(signals.penalty_lifted) as lifted:
        penalty = penalties.apply_penalty(member, level=2, duration=timedelta(hours=1), action="reply", by=mod)
        first = penalties.lift(penalty, by=admin_user, reason="appeal accepted")
        second = penalties.lift(penalty, by=mod, reason="again")
    assert [s["penalty"].pk for s in applied.sent] == [penalty.pk]
    assert [(s["penalty"].pk, s["by"], s["reason"]) for s in lifted.sent] == [
        (penalty.pk, admin_user, "appeal accepted")
    ]
    # The second lift changed nothing: the first lifter and reason stand.
    assert first.lifted_at == second.lifted_at
    penalty.refresh_from_db()
    assert (penalty.lifted_by, penalty.lift_reason) == (admin_user, "appeal accepted")
    assert list(penalty.events.values_list("kind", "actor")) == [("applied", mod.pk), ("lifted", admin_user.pk)]


@pytest.mark.django_db(transaction=True)
def test_expired_once_even_with_two_resyncs_at_once(redis_server, member, django_user_model):
    bob = django_user_model.objects.create_user("bob")
    earlier = timezone.now() - timedelta(hours=3)
    ended = [
        penalties.apply_penalty(who, level=2, duration=timedelta(minutes=15), action=action, now=earlier)
        for who, action in ((member, "reply"), (member, "like"), (bob, ""))
    ]
    warning = penalties.apply_penalty(member, level=1, duration=timedelta(0), action="reply", now=earlier)
    running = penalties.apply_penalty(bob, level=3, duration=timedelta(hours=1), action="reply")
    with Signals(signals.penalty_expired) as expired:
        outcome = run_together(2, lambda i: penalties.record_expiries())
        assert [exc for _, exc in outcome] == [None, None]
        assert sum(n for n, _ in outcome) == 3
        assert penalties.record_expiries() == 0
    assert sorted(s["penalty"].pk for s in expired.sent) == sorted(p.pk for p in ended)
    assert PenaltyEvent.objects.filter(kind="expired").count() == 3
    # A warning never expires (it never restricted anything); a running penalty has not ended.
    assert not PenaltyEvent.objects.filter(kind="expired", penalty__in=[warning, running]).exists()
