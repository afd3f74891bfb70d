"""Escalation outcomes counted through a real Celery worker: queued and sent by the web process,
applied by the worker (its counts read from its multiprocess files)."""

import uuid

import pytest

import throttling
from tests.support.metrics import Counts
from tests.support.penalties import cross
from throttling.engine.background.task_sender import sender

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_queued_sent_and_applied_are_counted(start_worker, settings, tmp_path, redis_client, member, policy, ladder):
    settings.THROTTLING_METRICS = True
    queue = f"metrics-{uuid.uuid4().hex[:12]}"
    settings.THROTTLING_CELERY_QUEUE = queue
    start_worker([queue], env={"PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "THROTTLING_TEST_METRICS": "1"})
    here, worker = Counts(), Counts(tmp_path)
    policy("reply", 60, 1, offence_threshold=2)
    assert throttling.check(member, "reply").allowed

    penalty = cross(member, "reply", redis_client)
    assert penalty.automatic
    assert sender.join(timeout=20)
    assert here.escalations() == {"queued": 1, "sent": 1}
    assert worker.escalations() == {"applied": 1}
    # Once more: the next rung, counted again.
    cross(member, "reply", redis_client)
    assert sender.join(timeout=20)
    assert here.escalations() == {"queued": 2, "sent": 2}
    assert worker.escalations() == {"applied": 2}
