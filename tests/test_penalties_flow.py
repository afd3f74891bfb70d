"""The ladder end to end: real Redis, a real Celery worker, committed rows."""

import pytest

import throttling
from tests.celery_worker import wait_for
from throttling import core, penalties
from throttling.models import Penalty, PenaltyEvent


def spam_until_escalated(who, action, limit=20):
    """Refused attempts until one reports that it queued an escalation."""
    for _ in range(limit):
        d = throttling.check(who, action)
        if d.escalated:
            return d
    raise AssertionError("no escalation after %d attempts" % limit)


@pytest.mark.django_db(transaction=True)
def test_spam_warning_then_block_then_lift(celery_worker, member, policy, admin_user):
    policy("reply", 60, 2)
    spam_until_escalated(member, "reply")
    warning = wait_for(lambda: Penalty.objects.filter(user=member).first(), message="the warning")
    assert warning.level == 1 and warning.is_warning and warning.automatic
    # A warning blocks nothing beyond the throttle itself.
    d = throttling.check(member, "reply")
    assert d.penalty is None and d.reason == core.THROTTLED
    spam_until_escalated(member, "reply")
    block = wait_for(lambda: Penalty.objects.filter(user=member, level=2).first(), message="the block")
    assert (block.ends_at - block.starts_at).total_seconds() == 15 * 60
    wait_for(lambda: throttling.check(member, "reply").penalty, message="enforcement")
    d = throttling.check(member, "reply")
    assert d.reason == core.PENALISED and d.penalty.level == 2
    assert 14 * 60 < d.retry_after <= 15 * 60
    penalties.lift(block, by=admin_user, reason="appeal accepted")
    throttling.reset(member, "reply")
    assert throttling.check(member, "reply").allowed
    assert list(PenaltyEvent.objects.filter(penalty=block).values_list("kind", flat=True)) == ["applied", "lifted"]
