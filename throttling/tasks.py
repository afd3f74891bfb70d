"""Celery tasks: thin wrappers with primitive arguments over the penalties and the offence history."""

from celery import shared_task
from django.db import OperationalError

from . import penalties
from .engine import history
from .exceptions import BackendError


@shared_task(
    name="throttling.tasks.escalate_offender",
    acks_late=True,  # a worker lost mid-task leaves the message to be delivered again
    reject_on_worker_lost=True,
    autoretry_for=(BackendError, OperationalError),
    retry_backoff=True,
    retry_backoff_max=60,
    max_retries=8,
    ignore_result=True,
)
def escalate_offender(user_id, action, run, offences=0, window=0):
    """Apply the next ladder rung to member `user_id` for the offence run `run`.

    Idempotent: the same run delivered twice makes one penalty (a unique
    constraint on the run), and a second delivery only finishes the Redis side.
    """
    penalty = penalties.escalate(user_id, action, run, offences, window)
    return penalty.pk if penalty else None


@shared_task(
    name="throttling.tasks.record_offences",
    acks_late=True,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=5,
    ignore_result=True,
)
def record_offences(batch):
    """Store a batch of aggregated offences for the report (see throttling.engine.history)."""
    return history.store(batch)


@shared_task(
    name="throttling.tasks.resync_penalties",
    autoretry_for=(BackendError, OperationalError),
    retry_backoff=True,
    max_retries=3,
    ignore_result=True,
)
def resync_penalties():
    """Beat task: re-mirror active penalties into Redis and record expiries (as throttling_resync)."""
    return penalties.resync()
