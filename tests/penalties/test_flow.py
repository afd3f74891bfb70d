"""The ladder end to end: real Redis, a real Celery worker, committed rows, both adapters' 429s."""

import html
import math

import pytest
from django.test import Client
from django.test.utils import override_settings
from rest_framework.test import APIClient

import throttling
import throttling.common.words
import throttling.engine.decision
from tests.support.helpers import retry_after, wait_for
from tests.support.penalties import Signals, cross, pending_key, seconds_until, spam_until_escalated
from throttling import penalties, signals
from throttling.engine.background.poller import poller
from throttling.models import Penalty, PenaltyEvent

REPLY_API = "/api/replies/"
REPLY_PAGE = "/reply/"


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_spam_warning_then_block_then_lift(celery_worker, ladder, member, policy, admin_user):
    policy("reply", 60, 2)
    spam_until_escalated(member, "reply")
    warning = wait_for(lambda: Penalty.objects.filter(user=member).first(), message="the warning")
    assert warning.level == 1 and warning.is_warning and warning.automatic
    # A warning blocks nothing beyond the throttle itself.
    d = throttling.check(member, "reply")
    assert d.penalty is None and d.reason == throttling.engine.decision.THROTTLED
    spam_until_escalated(member, "reply")
    block = wait_for(lambda: Penalty.objects.filter(user=member, level=2).first(), message="the block")
    assert (block.ends_at - block.starts_at).total_seconds() == 15 * 60
    wait_for(lambda: throttling.peek(member, "reply").penalty, message="enforcement")
    d = throttling.check(member, "reply")
    assert d.reason == throttling.engine.decision.PENALISED and d.penalty.level == 2
    assert 14 * 60 < d.retry_after <= 15 * 60
    penalties.lift(block, by=admin_user, reason="appeal accepted")
    throttling.reset(member, "reply")
    assert throttling.check(member, "reply").allowed
    assert list(PenaltyEvent.objects.filter(penalty=block).values_list("kind", flat=True)) == ["applied", "lifted"]


@pytest.mark.worker
@pytest.mark.urls("tests.support.urlconfs.adapters")
@pytest.mark.django_db(transaction=True)
@override_settings(TIME_ZONE="Asia/Tokyo")  # the end time is shown in the site's zone, not UTC
def test_both_adapters_name_the_penalty_until_staff_lift_it(
    celery_worker, ladder, member, policy, admin_user, redis_client
):
    """Spam -> warning -> spam -> 15 minutes -> 429s that say so -> lifted -> allowed -> same rung again."""
    policy("reply", 60, 2, offence_threshold=3, verb="replied")
    api = APIClient()
    api.force_authenticate(member)
    web = Client()
    web.force_login(member)

    # Two replies, then three refused ones: the third refusal is the crossing.
    statuses = [api.post(REPLY_API, {"text": f"reply {i}"}, format="json").status_code for i in range(5)]
    assert statuses == [201, 201, 429, 429, 429]
    warning = wait_for(lambda: Penalty.objects.filter(user=member).first(), message="the warning")
    assert (warning.level, warning.action, warning.is_warning, warning.automatic) == (1, "reply", True, True)
    assert warning.reason_text == "3 refused attempts at “reply” within 10 minutes after being throttled."
    wait_for(lambda: not redis_client.exists(pending_key(member.pk, "reply")), message="the run to close")
    poller.look(markers=True)  # this process sees the run closed (its background thread, when the message arrives)
    # A warning restricts nothing: the member still reads the ordinary throttle message.
    response = api.post(REPLY_API, {"text": "again"}, format="json")
    assert response.status_code == 429
    assert response.json()["detail"].startswith("You have replied too often.")

    # The same run again through the plain view: one more refusal already counts.
    for _ in range(2):
        assert web.post(REPLY_PAGE, {"text": "spam"}).status_code == 429
    block = wait_for(lambda: Penalty.objects.filter(user=member, level=2).first(), message="the 15-minute block")
    assert block.action == "reply" and block.automatic and block.lifted_at is None
    assert block.ends_at - block.starts_at == ladder[1][2]
    wait_for(lambda: throttling.peek(member, "reply").penalty, message="the block to be enforced")

    decision = throttling.check(member, "reply")
    assert decision.reason == throttling.engine.decision.PENALISED and decision.penalty.penalty_id == block.pk
    until = throttling.common.words.local_time(block.ends_at)
    assert until.endswith("(JST)")

    response = api.post(REPLY_API, {"text": "blocked"}, format="json")
    assert response.status_code == 429
    detail = response.json()["detail"]
    assert f"restricted for this action (“reply”) until {until}." in detail
    assert f"Reason: {block.reason}" in detail
    assert "A moderator can lift this restriction" in detail
    assert abs(retry_after(response) - math.ceil(seconds_until(block.ends_at))) <= 2

    response = web.post(REPLY_PAGE, {"text": "my blocked reply"})
    assert response.status_code == 429
    page = html.unescape(response.content.decode())
    assert f"Your account is restricted for this action (“reply”) until {until}." in page
    assert f"Reason: {block.reason}" in page
    assert "A moderator can lift this restriction if you think it is a mistake." in page
    assert "my blocked reply" in page  # what they wrote is given back
    assert abs(retry_after(response) - math.ceil(seconds_until(block.ends_at))) <= 2
    assert 14 * 60 < retry_after(response) <= 15 * 60

    with Signals(signals.penalty_lifted) as lifted:
        penalties.lift(block, by=admin_user, reason="appeal accepted")
    assert [(s["penalty"].pk, s["by"], s["reason"]) for s in lifted.sent] == [(block.pk, admin_user, "appeal accepted")]
    # Lifted at once in Redis: still throttled by the full log, no longer penalised.
    assert throttling.peek(member, "reply").reason == throttling.engine.decision.THROTTLED
    throttling.reset(member, "reply")
    assert api.post(REPLY_API, {"text": "welcome back"}, format="json").status_code == 201
    assert list(block.events.values_list("kind", flat=True)) == ["applied", "lifted"]

    # The lifted block is no strike: the next run gets the same rung, not the next one.
    again = cross(member, "reply", redis_client)
    assert (again.level, again.action) == (2, "reply")
    assert again.crossing != block.crossing
    assert [s[2] for s in celery_worker.signals("penalty_applied") if s[1] in (warning.pk, block.pk, again.pk)] == [
        warning.crossing,
        block.crossing,
        again.crossing,
    ]
