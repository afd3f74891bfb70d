"""Celery tasks: thin wrappers with primitive arguments over the penalties, the offence history and raids."""

import smtplib

from celery import shared_task
from django.db import OperationalError

from . import penalties, raids
from .conf import settings
from .engine.offences import report_batches as history
from .exceptions import BackendError
from .replayer import jobs

# A database that drops the connection or is locked for a moment: the task is tried again, backing off,
# up to five times. The tasks that record and tell (offences, surges, alerts) take these.
RETRIED_ON_DATABASE_ERRORS = {
    "autoretry_for": (OperationalError,),
    "retry_backoff": True,
    "max_retries": 5,
    "ignore_result": True,
}


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


@shared_task(name="throttling.tasks.record_offences", acks_late=True, **RETRIED_ON_DATABASE_ERRORS)
def record_offences(batch):
    """Store a batch of aggregated offences for the report (see throttling.engine.offences.report_batches)."""
    return history.store(batch)


@shared_task(
    name="throttling.tasks.resync_penalties",
    autoretry_for=(BackendError, OperationalError),
    retry_backoff=True,
    max_retries=3,
    ignore_result=True,
)
def resync_penalties():
    """Beat task: re-mirror active penalties into Redis and record expiries (as throttling_resync); tell
    moderators about surges that ended on time while no process was deciding."""
    raids.notice_ended_surges()
    return penalties.resync()


@shared_task(name="throttling.tasks.start_triggered_surge", **RETRIED_ON_DATABASE_ERRORS)
def start_triggered_surge(trigger_id, count):
    """Start the surge of a policy whose action passed its trigger's threshold; twice starts one."""
    surge = raids.start_triggered_surge(trigger_id, count)
    return surge.pk if surge else None


@shared_task(name="throttling.tasks.surge_ended", **RETRIED_ON_DATABASE_ERRORS)
def surge_ended(surge_id):
    """A surge's end has passed: tell moderators, once whoever sends it (the id only says which to look at)."""
    return raids.notice_ended_surges()


@shared_task(name="throttling.tasks.block_refused", **RETRIED_ON_DATABASE_ERRORS)
def block_refused(block_id, action):
    """A block refused a request: tell moderators if it is the block's first refusal anywhere."""
    return raids.first_refusal(block_id, action)


@shared_task(
    name="throttling.tasks.mail_alerts",
    bind=True,
    # The database, and the mail server: refused or dropped connections, timeouts (OSError) and the
    # server's own refusals (SMTPException). The alerts of a digest that could not go wait for it
    # (see Raids › Mail).
    autoretry_for=(OperationalError, OSError, smtplib.SMTPException),
    retry_backoff=True,
    retry_backoff_max=300,
    max_retries=10,
    ignore_result=True,
)
def mail_alerts(self):
    """Mail the alerts that wait in one digest, or come back when the next digest may go; retried
    while the mail server cannot take it."""
    mailed, wait = raids.mail_due()
    if wait is not None:
        self.apply_async(countdown=wait, queue=settings.CELERY_QUEUE)
    return mailed


@shared_task(name="throttling.tasks.replay_history", ignore_result=True)
def replay_history(job):
    """Replay a draft policy over an action's history for the admin (throttling.replayer.jobs)."""
    return jobs.run(job)
