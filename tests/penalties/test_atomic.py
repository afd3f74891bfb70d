"""Escalations survive ATOMIC_REQUESTS: DRF rolls the request back on a 429, the task is still sent once."""

import pytest
from django.db import connection
from rest_framework.test import APIClient

from tests.support.helpers import wait_for
from tests.support.penalties import offences_key, pending_key
from throttling.models import Penalty

pytestmark = pytest.mark.urls("tests.support.urlconfs.adapters")


@pytest.fixture
def atomic_requests(monkeypatch):
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", True)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_crossing_inside_a_rolled_back_request_still_escalates_once(
    celery_worker, atomic_requests, member, policy, redis_client
):
    policy("reply", 60, 1, offence_threshold=3)
    api = APIClient()
    api.force_authenticate(member)
    assert api.post("/api/replies/", {"text": "hi"}, format="json").status_code == 201
    # The worker waits until all six refusals are in: the run the third one opens is still pending
    # for the three after it, whatever the machine's speed.
    with celery_worker.paused():
        statuses = [api.post("/api/replies/", {"text": "again"}, format="json").status_code for _ in range(6)]
        assert statuses == [429] * 6
        assert redis_client.exists(pending_key(member.pk, "reply"))
        assert int(redis_client.get(offences_key(member.pk, "reply"))) >= 3
        assert not Penalty.objects.filter(user=member).exists()
    warning = wait_for(lambda: Penalty.objects.filter(user=member).first(), message="the escalation")
    assert warning.level == 1 and warning.automatic
    # One run, one task: the three offences after the crossing were inside the pending run.
    wait_for(lambda: not redis_client.exists(pending_key(member.pk, "reply")), message="run cleared")
    assert Penalty.objects.filter(user=member).count() == 1
    assert not redis_client.exists(offences_key(member.pk, "reply"))


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_crossing_inside_a_committed_transaction_waits_for_the_commit(celery_worker, member, policy):
    """The decorator answers 429 without raising, so the ATOMIC_REQUESTS block commits; the send follows it."""
    from django.db import transaction

    import throttling

    policy("reply", 60, 1, offence_threshold=2)
    throttling.check(member, "reply")
    with transaction.atomic():
        throttling.check(member, "reply")
        d = throttling.check(member, "reply")
        assert d.escalated
        # Not sent yet: nothing reaches the worker before the commit.
        assert not Penalty.objects.exists()
        from tests.support.processes.celery_app import app

        with app.connection_for_write() as conn:
            assert conn.default_channel.client.llen("celery") == 0
    wait_for(lambda: Penalty.objects.filter(user=member).exists(), message="the escalation after commit")
