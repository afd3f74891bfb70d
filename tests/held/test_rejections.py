"""Rejections are offences: two rejections at offence_threshold=2 give the member a penalty, applied by
the real Celery worker from the same ladder refusals climb."""

import pytest
from django.test import Client

import throttling
from tests.support.helpers import wait_for
from throttling.models import Held, Penalty

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls("tests.support.urlconfs.held")]


@pytest.mark.worker
def test_two_rejections_at_threshold_2_give_a_penalty(celery_worker, ladder, member, policy, admin_user, redis_server):
    policy("post", 60, 10, hold_until_approved=1, offence_threshold=2)
    client = Client()
    client.force_login(member)
    for n in range(2):
        assert client.post("/held/post/", {"comment": f"Buy now {n}"}).status_code == 302
    first, second = Held.objects.order_by("pk")
    assert throttling.reject(first, by=admin_user, reason="spam")
    assert not Penalty.objects.filter(user=member).exists()
    assert throttling.reject(second, by=admin_user, reason="spam")
    penalty = wait_for(lambda: Penalty.objects.filter(user=member).first(), message="the penalty")
    assert (penalty.level, penalty.action, penalty.automatic) == (1, "post", True)
    # What the member reads says rejected posts counted, not only refused attempts.
    assert penalty.reason_text == "2 refused attempts and rejected posts at “post” within 10 minutes."
