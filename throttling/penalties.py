"""Penalties: the ladder maths, the transactional writes, the Redis mirror and its resync."""

import itertools
import logging
import threading
from dataclasses import dataclass
from datetime import timedelta
from functools import partial

from django.contrib.auth import get_user_model
from django.core.signals import request_finished
from django.dispatch import receiver
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext, ngettext

from . import signals
from .backends.redis import get_backend
from .conf import settings
from .keys import PenaltyInfo, log_keys, member_penalty_key
from .messages import wait_in_words
from .exceptions import BackendError
from .identity import member_identity
from .sender import sender

logger = logging.getLogger("throttling")

ESCALATE_TASK = "throttling.tasks.escalate_offender"


# --- The ladder, as pure functions (STYLE habit 6) --------------------------


@dataclass(frozen=True)
class Rung:
    level: int
    name: str
    duration: timedelta
    all_actions: bool

    @property
    def is_warning(self):
        return not self.duration


def rung_for(strike_starts, ladder, now, forgiveness_days):
    """The rung a new strike gets: one past the strikes still remembered.

    `strike_starts` are the start times of the member's strikes (penalties not
    lifted); those older than `forgiveness_days` are forgiven. Past the top of
    the ladder the top rung repeats. Returns None for an empty ladder.
    """
    if not ladder:
        return None
    ladder = sorted(ladder, key=lambda r: r.level)
    horizon = now - timedelta(days=forgiveness_days)
    remembered = sum(1 for start in strike_starts if start > horizon)
    return ladder[min(remembered, len(ladder) - 1)]


def current_ladder():
    from .models import PenaltyStep

    return [
        Rung(s.level, s.name, s.duration, s.all_actions) for s in PenaltyStep.objects.order_by("level")
    ]


def standing(user, now=None):
    """(strikes still counted, the rung the next strike would get) for a member."""
    from .models import Penalty

    now = now or timezone.now()
    strikes = list(Penalty.objects.strikes(user, now).values_list("starts_at", flat=True))
    return len(strikes), rung_for(strikes, current_ladder(), now, settings.FORGIVENESS_DAYS)


def ladder_problems(ladder):
    """What is wrong with a ladder as a whole, in words a moderator understands (empty if fine)."""
    problems = []
    ladder = sorted(ladder, key=lambda r: r.level)
    if not ladder:
        return [gettext("The penalty ladder is empty: repeat offenders are only throttled, never penalised.")]
    if [r.level for r in ladder] != list(range(1, len(ladder) + 1)):
        problems.append(
            gettext("Levels should be numbered 1, 2, 3 … without gaps; they are %(levels)s.")
            % {"levels": ", ".join(str(r.level) for r in ladder)}
        )
    for lower, higher in itertools.pairwise(ladder):
        if higher.duration < lower.duration:
            problems.append(
                gettext("Level %(higher)d (%(h)s) is shorter than level %(lower)d (%(l)s).")
                % {"higher": higher.level, "h": higher.name, "lower": lower.level, "l": lower.name}
            )
    return problems


# --- Escalation --------------------------------------------------------------


def enqueue_escalation(user_id, action, run, offences, window):
    """Queue one escalate_offender task for an offence run, after the database commit.

    Called on the request path only when the decision script reports a
    crossing, so at most once per run. The task is sent by name: the core
    never imports the Celery adapter.

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
        _send_escalation(*args)
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
            _send_escalation(*self.args)


_deferred = threading.local()


@receiver(request_finished, dispatch_uid="throttling-deferred-escalations")
def _send_deferred(**kwargs):
    items = getattr(_deferred, "items", ())
    _deferred.items = ()
    for item in items:
        item.send()


def _send_escalation(user_id, action, run, offences, window):
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
    import json
    import time

    logger.error("throttling: escalation %r kept to be sent again by the next resync (%s)", args, exc)
    try:
        get_backend().keep_unsent(unsent_key(), failures_key(), json.dumps(list(args)), time.time())
    except BackendError as redis_exc:
        # Redis is down too: close the run so the next refusal starts another.
        logger.error("throttling: escalation %r lost, Redis unavailable as well: %s", args, redis_exc)
        _clear_run(args[0], args[1], args[2], quiet=True)


def resend_unsent(app=None):
    """Send every escalation waiting in Redis (synchronously); returns how many went."""
    import json

    from .sender import current_celery_app

    backend = get_backend()
    app = app or current_celery_app()
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


def _clear_run(user_id, action, run, quiet=False):
    """Close an offence run: its counter and pending mark go, unless a newer run owns them."""
    _log, offences, _pen, pending = log_keys(member_identity(user_id), action)
    try:
        get_backend().close_run(offences, pending, run)
    except BackendError:
        if not quiet:
            raise


AUTOMATIC_REASON = "offences"


def automatic_reason(action, offences, window):
    """An automatic penalty's reason as (code, parameters): rendered later in each reader's language."""
    return AUTOMATIC_REASON, {"action": action, "offences": int(offences or 0), "window": int(window or 0)}


def render_reason(code, params):
    """The text of a reason code in the active language ("" for no code)."""
    if code != AUTOMATIC_REASON:
        return ""
    action, offences, window = params.get("action", ""), params.get("offences", 0), params.get("window", 0)
    if offences and window:
        return ngettext(
            "%(n)d refused attempt at “%(action)s” within %(window)s after being throttled.",
            "%(n)d refused attempts at “%(action)s” within %(window)s after being throttled.",
            offences,
        ) % {"n": offences, "action": action, "window": wait_in_words(window)}
    return gettext("Repeated refused attempts at “%(action)s” after being throttled.") % {"action": action}


def escalate(user_id, action, run, offences=0, window=0, now=None):
    """Apply the next rung to a member for one offence run; safe to call twice.

    The same run delivered again finds its penalty (a unique constraint on the
    run, not only a lookup, keeps it to one row) and only completes the Redis
    side. Returns the penalty, or None when there is nothing to apply (no such
    member, empty ladder). A Redis failure raises BackendError after the
    database commit; calling again finishes the job.
    """
    from .models import Penalty

    if not run:
        # Manual penalties have no run: a blank one would find one of them.
        raise ValueError("An escalation needs the name of its offence run; it cannot be empty.")
    now = now or timezone.now()
    user_model = get_user_model()
    created = False
    with transaction.atomic():
        # The member's row lock serialises escalations of one member, so two
        # runs (say, reply and like) cannot both take the same rung.
        user = user_model._default_manager.select_for_update().filter(pk=user_id).first()
        if user is None:
            penalty = None
        else:
            penalty = Penalty.objects.filter(crossing=run, user=user).first()
            if penalty is None:
                strikes = list(Penalty.objects.strikes(user, now).values_list("starts_at", flat=True))
                rung = rung_for(strikes, current_ladder(), now, settings.FORGIVENESS_DAYS)
                if rung is None:
                    logger.warning("throttling: the penalty ladder is empty; member %s is only throttled", user_id)
                else:
                    penalty, created = _create_automatic(user, action, run, rung, offences, window, now)
    if penalty is None:
        _clear_run(user_id, action, run, quiet=True)
        return None
    if created:
        logger.info("throttling: %s (level %d) applied to member %s", penalty.ends_at - penalty.starts_at, penalty.level, user_id)
    mirror_members([user_id])
    _clear_run(user_id, action, run)
    return penalty


def _create_automatic(user, action, run, rung, offences, window, now):
    from .models import Penalty, PenaltyEvent

    code, params = automatic_reason(action, offences, window)
    try:
        with transaction.atomic():  # a savepoint: the constraint may refuse a duplicate
            penalty = Penalty.objects.create(
                user=user,
                action="" if rung.all_actions else action,
                level=rung.level,
                starts_at=now,
                ends_at=now + rung.duration,
                reason="",
                reason_code=code,
                reason_params=params,
                automatic=True,
                crossing=run,
            )
            PenaltyEvent.objects.create(
                penalty=penalty,
                kind=PenaltyEvent.Kind.APPLIED,
                at=now,
                details=gettext("Ladder rung %(level)d (%(name)s) after: %(reason)s")
                % {"level": rung.level, "name": rung.name, "reason": penalty.reason_text},
            )
    except IntegrityError:
        # The same run, delivered twice at once: the other delivery made the row.
        # (A run is named by the decision that crossed, so it belongs to one
        # member; a run already used for somebody else applies nothing.)
        existing = Penalty.objects.filter(crossing=run, user=user).first()
        if existing is None:
            logger.error("throttling: offence run %r belongs to another member; nothing applied to %s", run, user.pk)
        return existing, False
    transaction.on_commit(partial(_announce, signals.penalty_applied, penalty), robust=True)
    return penalty, True


def apply_penalty(user, *, level, duration, action="", reason="", by=None, now=None):
    """A moderator's penalty: written, audited and mirrored at once. Counts as a strike."""
    from .models import Penalty, PenaltyEvent

    now = now or timezone.now()
    with transaction.atomic():
        penalty = Penalty(
            user=user, action=action, level=level, starts_at=now, ends_at=now + duration, reason=reason
        )
        penalty.full_clean()
        penalty.save()
        PenaltyEvent.objects.create(penalty=penalty, kind=PenaltyEvent.Kind.APPLIED, at=now, actor=by, details=reason)
        transaction.on_commit(partial(_announce, signals.penalty_applied, penalty), robust=True)
    penalty.mirror_error = _mirror_quietly(penalty.user_id)
    return penalty


def lift(penalty, by=None, reason=""):
    """Lift a penalty now: the row, an audit event and the Redis mirror, in this call.

    A lifted penalty no longer counts as a strike. Lifting twice is harmless
    (the second call changes nothing). If Redis cannot be reached the database
    still records the lift and `penalty.mirror_error` says why; the member is
    freed in Redis by the next `throttling_resync` (or when the penalty ends).
    """
    from .models import Penalty, PenaltyEvent

    now = timezone.now()
    with transaction.atomic():
        current = Penalty.objects.select_for_update().get(pk=penalty.pk)
        if current.lifted_at is None:
            current.lifted_at = now
            current.lifted_by = by
            current.lift_reason = reason
            current.save(update_fields=["lifted_at", "lifted_by", "lift_reason"])
            PenaltyEvent.objects.create(
                penalty=current, kind=PenaltyEvent.Kind.LIFTED, at=now, actor=by, details=reason
            )
            transaction.on_commit(
                partial(_announce, signals.penalty_lifted, current, by=by, reason=reason), robust=True
            )
    for name in ("lifted_at", "lifted_by_id", "lift_reason"):
        setattr(penalty, name, getattr(current, name))
    penalty.mirror_error = _mirror_quietly(current.user_id)
    return penalty


def _mirror_quietly(user_id):
    try:
        mirror_members([user_id])
    except BackendError as exc:
        logger.warning("throttling: penalties of member %s not mirrored to Redis: %s", user_id, exc)
        return exc
    return None


def _announce(signal, penalty, **kwargs):
    signal.send(sender=type(penalty), penalty=penalty, **kwargs)


# --- The Redis mirror ----------------------------------------------------------


def mirror_members(user_ids, now=None, chunk=500):
    """Write the Redis mirror of these members' penalties in force (or remove it).

    Per member and scope (an action, or "*" for all actions) the penalty in
    force that ends last is mirrored; the hash expires with the longest one.
    """
    from .models import Penalty

    now = now or timezone.now()
    user_ids = list(dict.fromkeys(user_ids))
    for start in range(0, len(user_ids), chunk):
        ids = user_ids[start : start + chunk]
        by_user = {uid: {} for uid in ids}
        for p in Penalty.objects.active(now).filter(user_id__in=ids).order_by("ends_at"):
            by_user[p.user_id][p.action or "*"] = p  # ordered by end: the last one wins
        mirrors = []
        for uid, scopes in by_user.items():
            fields = {
                scope: PenaltyInfo.of(p).encode()
                for scope, p in scopes.items()
            }
            expire_at = max((int(p.ends_at.timestamp() * 1000) + 1 for p in scopes.values()), default=0)
            mirrors.append((member_penalty_key(uid), expire_at, fields))
        get_backend().mirror_penalties(mirrors)


def record_expiries(now=None):
    """Mark penalties that have ended as expired, with an event and a signal. Returns how many."""
    from .models import RESTRICTING, Penalty, PenaltyEvent

    now = now or timezone.now()
    ended = Penalty.objects.filter(RESTRICTING, ends_at__lte=now, lifted_at__isnull=True, expired_at__isnull=True)
    count = 0
    for penalty in ended.iterator():
        with transaction.atomic():
            # The conditional update makes concurrent resyncs record each expiry once.
            if not Penalty.objects.filter(pk=penalty.pk, expired_at__isnull=True, lifted_at__isnull=True).update(
                expired_at=now
            ):
                continue
            penalty.expired_at = now
            PenaltyEvent.objects.create(
                penalty=penalty,
                kind=PenaltyEvent.Kind.EXPIRED,
                at=now,
                details=gettext("Ended at %(end)s; the strike still counts.") % {"end": penalty.ends_at.isoformat()},
            )
            transaction.on_commit(partial(_announce, signals.penalty_expired, penalty), robust=True)
        count += 1
    return count


def resync(now=None):
    """Re-mirror every member whose penalties could be in Redis; record expiries.

    After a Redis flush or failover the penalties in force hold again; a lift
    that could not reach Redis takes effect. Returns {"mirrored": n, "expired": m}.
    """
    from .models import Penalty

    now = now or timezone.now()
    expired = record_expiries(now)
    # Members with a penalty ending in the future, lifted or not: a lifted one
    # may still be in Redis if the lift could not reach it.
    user_ids = list(Penalty.objects.filter(ends_at__gt=now).values_list("user_id", flat=True).distinct())
    mirror_members(user_ids, now)
    resent = 0
    if settings.PENALTIES:
        try:
            resent = resend_unsent()
        except Exception as exc:  # the broker is still down: they wait for the next resync
            logger.error("throttling: unsent escalations not sent again yet: %s", exc)
    return {"mirrored": len(user_ids), "expired": expired, "resent": resent}


RESYNC_TASK = "throttling.tasks.resync_penalties"
# How long one process's resync request keeps the others from sending theirs.
_RESYNC_LOCK_SECONDS = 10


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
