"""A wave of spam escalates like any refused attempt: real Redis, a real Celery worker, committed rows."""

import pytest
from django.contrib.auth import get_user_model

import throttling
from bench.content_corpus import BASES
from tests.support.helpers import wait_for
from throttling.engine.decision import DUPLICATE, PENALISED, WAVE
from throttling.engine.offences.report_batches import buffer
from throttling.models import OffenceRecord, Penalty

SPAM = BASES["cash"]["text"]


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_late_member_of_a_wave_who_keeps_posting_is_penalised(celery_worker, ladder, policy):
    policy("reply", 60, 100, same_content_members=2, same_content_period=600, offence_threshold=3)
    User = get_user_model()
    first, second, late = (User.objects.create_user(name, password="pw") for name in ("w1", "w2", "w3"))
    assert throttling.check(first, "reply", content=SPAM).allowed
    assert throttling.check(second, "reply", content=SPAM).allowed
    refusals = [throttling.check(late, "reply", content=SPAM) for _ in range(3)]
    assert [(d.reason, d.duplicate) for d in refusals] == [(DUPLICATE, WAVE)] * 3
    assert [d.escalated for d in refusals] == [False, False, True]
    warning = wait_for(lambda: Penalty.objects.filter(user=late).first(), message="the warning")
    assert warning.level == 1 and warning.automatic and warning.action == "reply"
    # The next run of the wave's refusals takes the next rung: 15 minutes, refused as penalised.
    wait_for(lambda: throttling.check(late, "reply", content=SPAM).escalated, message="the second crossing")
    block = wait_for(lambda: Penalty.objects.filter(user=late, level=2).first(), message="the block")
    assert (block.ends_at - block.starts_at).total_seconds() == 15 * 60
    # (a refused Decision is falsy: the test waits for the pair holding it)
    _, refused = wait_for(
        lambda: (
            (True, d)
            if (
                d := throttling.check(late, "reply", content="Something else entirely, said in many more words.")
            ).reason
            == PENALISED
            else None
        ),
        message="the penalty in force",
    )
    assert refused.penalty.level == 2
    # The first two members are not touched.
    assert not Penalty.objects.filter(user__in=[first, second]).exists()
    # The report's history has the refusals of repeated content as their own reason.
    buffer.flush()
    record = wait_for(lambda: OffenceRecord.objects.filter(user=late, duplicate=True).first(), message="history")
    assert record.action == "reply" and record.count >= 4 and not record.shadow
