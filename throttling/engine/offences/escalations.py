"""Escalations leave the request path by Celery task name: recorded in Redis, then sent by the sender thread,
and sent again by resync until a worker has completed them (see Architecture › Escalations are never
lost). The engine never imports the penalties that the task applies."""

import json
import logging
import threading
import time

from django.db import transaction

from ...backends.redis import get_backend
from ...common import observe
from ...conf import settings
from ...exceptions import BackendError
from ..background.task_sender import current_celery_app, sender
from ..identity import member_identity
from ..keys import log_keys

logger = logging.getLogger("throttling")

ESCALATE_TASK = "throttling.tasks.escalate_offender"
RESYNC_TASK = "throttling.tasks.resync_penalties"
# How long one process's resync request keeps the others from sending theirs.
_RESYNC_LOCK_SECONDS = 10


def enqueue_escalation(user_id, action, run, offences, window):
    """Record one escalate_offender task for an offence run in Redis, and send it after the commit.

    Called on the request path only when the decision script reports a
    crossing, so at most once per run. The record comes first, so a process
    that exits or dies before the broker takes the task leaves it for resync.
    The task is sent by name: the engine never imports the penalties or the
    Celery tasks.

    Inside a transaction the task waits for the commit. The refusal itself
    wrote nothing, and the transaction may be rolled back because of it (DRF
    rolls back ATOMIC_REQUESTS on every exception it handles, a 429 included),
    which would drop an on_commit callback; so a send still waiting when the
    request finishes is made then, once.
    """
    escalation = Escalation(user_id, action, run, offences, window)
    escalation.record()
    observe.escalation(observe.QUEUED)
    waiting = [item for item in getattr(_deferred, "items", ()) if not item.handed]
    if not transaction.get_connection().in_atomic_block:
        # Outside any transaction, sends still waiting belong to transactions
        # that ended (rolled back outside a request): they go now.
        _deferred.items = ()
        for item in waiting:
            item.send()
        escalation.send()
        return
    _deferred.items = [*waiting, escalation]
    transaction.on_commit(escalation.send, robust=True)


_deferred = threading.local()


def send_deferred(**kwargs):
    """Send the escalations still waiting when a request finishes (connected to request_finished)."""
    items = getattr(_deferred, "items", ())
    _deferred.items = ()
    for item in items:
        item.send()


class Escalation:
    """One escalate_offender task, from its record in Redis until the broker has taken it.

    Redis holds it in the unsent set from before the first send until the
    broker takes it, then in the queued set until a worker has completed it
    (`escalation_done`). Whoever sends it, the sender thread or a resync,
    first claims the run for ESCALATION_RESEND_AFTER seconds, so it is not
    sent twice at once and a task the broker took is given that long to
    complete before resync sends it again.
    """

    __slots__ = ("args", "raw", "recorded", "handed", "claimed", "settled")

    def __init__(self, user_id, action, run, offences, window):
        self.args = (user_id, action, run, int(offences), int(window))
        self.raw = _encode(self.args)
        self.recorded = self.handed = self.claimed = self.settled = False

    def record(self):
        try:
            get_backend().keep_unsent(unsent_key(), recorded_key(), self.raw, time.time())
        except BackendError as exc:
            logger.warning("throttling: escalation %r not recorded in Redis before its send: %s", self.args, exc)
        else:
            self.recorded = True

    def send(self):
        """Hand the task to the sender thread (once)."""
        if not self.handed:
            self.handed = True
            sender.send(ESCALATE_TASK, self.args, on_error=self._failed, before=self._claim, on_sent=self._taken)

    def _claim(self):
        self.claimed = claim(self.args[2])
        return self.claimed

    def _taken(self):
        self.settled = True
        observe.escalation(observe.SENT)
        taken(self.raw)

    def _failed(self, exc):
        if self.settled:
            return
        self.settled = True
        if not self.recorded:
            _keep_unsent(self.args, exc)
            return
        logger.error("throttling: escalation %r waits in Redis for the next resync (%s)", self.args, exc)
        observe.escalation(observe.KEPT_FOR_RESEND)
        try:
            backend = get_backend()
            backend.incr(failures_key())
            if self.claimed:
                # Free the run at once: the next resync need not wait for the claim to end.
                backend.delete(claim_key(self.args[2]))
        except BackendError:
            pass  # the claim ends on its own


def _encode(args):
    # The same text in the web process, the worker (arguments come back from
    # the broker's JSON) and resync, so each can find the record by its value.
    return json.dumps(list(args), default=str)


def unsent_key():
    """Escalations the broker has not taken yet: a sorted set, member = JSON args, score = time recorded."""
    return f"{settings.KEY_PREFIX}:{{escalations}}:unsent"


def queued_key():
    """Escalations the broker took whose task no worker has completed yet: as unsent_key()."""
    return f"{settings.KEY_PREFIX}:{{escalations}}:queued"


def failures_key():
    """How many sends failed since the key was made (shown in the report's header)."""
    return f"{settings.KEY_PREFIX}:{{escalations}}:failures"


def recorded_key():
    """How many escalations were recorded since the key was made."""
    return f"{settings.KEY_PREFIX}:{{escalations}}:recorded"


def taken_key():
    """How many escalations the broker took (resends included) since the key was made."""
    return f"{settings.KEY_PREFIX}:{{escalations}}:taken"


def claim_key(run):
    """Present while somebody sends the run's escalation, or sent it less than ESCALATION_RESEND_AFTER s ago."""
    return f"{settings.KEY_PREFIX}:{{escalations}}:claim:{run}"


def claim(run):
    """Claim a run's escalation for sending; False when another sender holds it."""
    try:
        return get_backend().set_nx(claim_key(run), 1, settings.ESCALATION_RESEND_AFTER)
    except BackendError:
        return True  # better sent twice than never: the task applies a run once


def taken(raw):
    """The broker took the task: it moves from the unsent set to the queued one."""
    try:
        backend = get_backend()
        # Queued first: a process that stops in between leaves it in both, never in neither.
        backend.keep_unsent(queued_key(), taken_key(), raw, time.time())
        backend.forget_unsent(unsent_key(), raw)
    except BackendError as exc:
        logger.warning("throttling: escalation %s sent, but not marked as sent in Redis: %s", raw, exc)


def escalation_done(user_id, action, run, offences=0, window=0):
    """A worker completed the escalation: its records go (called by the task, quietly)."""
    raw = _encode((user_id, action, run, int(offences), int(window)))
    try:
        backend = get_backend()
        backend.remove_members(queued_key(), [raw])
        backend.remove_members(unsent_key(), [raw])
        backend.delete(claim_key(run))
    except BackendError as exc:
        # Resync finds the penalty for the run and removes them then.
        logger.warning("throttling: escalation %s done, its record in Redis not removed: %s", raw, exc)


def _keep_unsent(args, exc):
    # Not recorded before the send (Redis failed then): try once more now.
    logger.error("throttling: escalation %r kept to be sent again by the next resync (%s)", args, exc)
    try:
        get_backend().keep_unsent(unsent_key(), failures_key(), _encode(args), time.time())
    except BackendError as redis_exc:
        # Redis is down too: close the run so the next refusal starts another.
        logger.error("throttling: escalation %r lost, Redis unavailable as well: %s", args, redis_exc)
        observe.escalation(observe.LOST)
        clear_run(args[0], args[1], args[2], quiet=True)
    else:
        observe.escalation(observe.KEPT_FOR_RESEND)


def resend_unsent(app=None, applied=None):
    """Send again every escalation no worker has completed (synchronously); returns how many went.

    Those the broker never took go at once; those it took go again once
    ESCALATION_RESEND_AFTER seconds have passed without a worker completing
    them (a queue the broker lost). `applied(runs)` names the runs whose
    penalty is in the database already: those are not sent, only closed.
    A failed send raises, leaving the rest for the next resync.
    """
    backend = get_backend()
    app = app or current_celery_app()
    if app is None:
        return 0  # Celery is not installed: they wait in Redis
    raws = dict.fromkeys([*backend.unsent(unsent_key()), *backend.unsent(queued_key())])
    escalations = [(raw, json.loads(raw)) for raw in raws]
    done = set(applied({args[2] for _raw, args in escalations})) if applied and escalations else set()
    sent = 0
    for raw, args in escalations:
        user_id, action, run = args[:3]
        if not claim(run):
            continue  # being sent, or sent too recently to call it lost
        if run in done:
            # The worker that applied it may have died before closing the run.
            clear_run(user_id, action, run, quiet=True)
            escalation_done(*args)
            continue
        try:
            app.send_task(ESCALATE_TASK, args=args, queue=settings.CELERY_QUEUE, retry=False)
        except Exception:
            backend.delete(claim_key(run))
            raise
        taken(raw)
        observe.escalation(observe.RESENT)
        sent += 1
    if sent:
        logger.info("throttling: %d escalation(s) no worker had completed were sent again", sent)
    return sent


def send_failures():
    """(escalations failed to send so far, escalations still waiting); (0, 0) when Redis cannot say."""
    try:
        return get_backend().unsent_counts(unsent_key(), failures_key())
    except BackendError:
        return 0, 0


def clear_run(user_id, action, run, quiet=False):
    """Close an offence run: its counter and pending mark go, unless a newer run owns them."""
    _log, offences, _pen, pending = log_keys(member_identity(user_id), action)
    try:
        get_backend().close_run(offences, pending, run)
    except BackendError:
        if not quiet:
            raise


def resync_soon(**kwargs):
    """Queue one resync for the whole site after Redis lost keys (an evicted mirror admits a
    penalised member): the first process to notice sends it, the others see the lock."""
    if not settings.PENALTIES:
        return False
    try:
        if not get_backend().set_nx(f"{settings.KEY_PREFIX}:resync-requested", 1, _RESYNC_LOCK_SECONDS):
            return False
    except BackendError:
        return False
    logger.warning("throttling: Redis lost keys (%s); re-mirroring penalties now", kwargs.get("reason", "unknown"))
    sender.send(RESYNC_TASK, ())
    return True
