"""Escalations leave the request path by Celery task name: queued after commit, sent by the sender thread,
kept in Redis when the broker refuses them and sent again by resync (see Architecture › Escalations are
never lost). The engine never imports the penalties that the task applies."""

import json
import logging
import threading
import time

from django.db import transaction

from ..backends.redis import get_backend
from ..conf import settings
from ..exceptions import BackendError
from .identity import member_identity
from .keys import log_keys
from .sender import current_celery_app, sender

logger = logging.getLogger("throttling")

ESCALATE_TASK = "throttling.tasks.escalate_offender"
RESYNC_TASK = "throttling.tasks.resync_penalties"
# How long one process's resync request keeps the others from sending theirs.
_RESYNC_LOCK_SECONDS = 10


def enqueue_escalation(user_id, action, run, offences, window):
    """Queue one escalate_offender task for an offence run, after the database commit.

    Called on the request path only when the decision script reports a
    crossing, so at most once per run. The task is sent by name: the engine
    never imports the penalties or the Celery tasks.

    Inside a transaction the task waits for the commit. The refusal itself
    wrote nothing, and the transaction may be rolled back because of it (DRF
    rolls back ATOMIC_REQUESTS on every exception it handles, a 429 included),
    which would drop an on_commit callback; so a send still waiting when the
    request finishes is made then, once.
    """
    args = (user_id, action, run, offences, window)
    waiting = [item for item in getattr(_deferred, "items", ()) if not item.sent]
    if not transaction.get_connection().in_atomic_block:
        # Outside any transaction, sends still waiting belong to transactions
        # that ended (rolled back outside a request): they go now.
        _deferred.items = ()
        for item in waiting:
            item.send()
        send_escalation(*args)
        return
    item = _Deferred(args)
    _deferred.items = [*waiting, item]
    transaction.on_commit(item.send, robust=True)


class _Deferred:
    __slots__ = ("args", "sent")

    def __init__(self, args):
        self.args, self.sent = args, False

    def send(self):
        if not self.sent:
            self.sent = True
            send_escalation(*self.args)


_deferred = threading.local()


def send_deferred(**kwargs):
    """Send the escalations still waiting when a request finishes (connected to request_finished)."""
    items = getattr(_deferred, "items", ())
    _deferred.items = ()
    for item in items:
        item.send()


def send_escalation(user_id, action, run, offences, window):
    # Sent off the request thread. If the broker cannot take it, it waits in
    # Redis with its run still pending, and the next resync (beat's every
    # minute, or throttling_resync) sends it again: no escalation is lost.
    args = (user_id, action, run, offences, window)
    sender.send(ESCALATE_TASK, args, on_error=lambda exc: _keep_unsent(args, exc))


def unsent_key():
    """Escalations the broker could not take: a sorted set, member = JSON args, score = time."""
    return f"{settings.KEY_PREFIX}:{{escalations}}:unsent"


def failures_key():
    """How many sends failed since the key was made (shown in the report's header)."""
    return f"{settings.KEY_PREFIX}:{{escalations}}:failures"


def _keep_unsent(args, exc):
    logger.error("throttling: escalation %r kept to be sent again by the next resync (%s)", args, exc)
    try:
        get_backend().keep_unsent(unsent_key(), failures_key(), json.dumps(list(args)), time.time())
    except BackendError as redis_exc:
        # Redis is down too: close the run so the next refusal starts another.
        logger.error("throttling: escalation %r lost, Redis unavailable as well: %s", args, redis_exc)
        clear_run(args[0], args[1], args[2], quiet=True)


def resend_unsent(app=None):
    """Send every escalation waiting in Redis (synchronously); returns how many went."""
    backend = get_backend()
    app = app or current_celery_app()
    if app is None:
        return 0  # Celery is not installed: they wait in Redis
    sent = 0
    for raw in backend.unsent(unsent_key()):
        args = json.loads(raw)
        app.send_task(ESCALATE_TASK, args=args, queue=settings.CELERY_QUEUE, retry=False)
        backend.forget_unsent(unsent_key(), raw)
        sent += 1
    if sent:
        logger.info("throttling: %d escalation(s) the broker had refused were sent again", sent)
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
