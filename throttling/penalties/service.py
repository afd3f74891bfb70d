"""Applying, escalating and lifting penalties: one transaction each, audited, then mirrored to Redis."""

import logging

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext

from .. import signals
from ..common import observe
from ..common.choices import AlertKind
from ..common.words import automatic_reason, duration_in_words
from ..conf import settings
from ..engine.offences.escalations import clear_run, escalation_done
from ..engine.offences.rejections import REJECTED_RUN
from ..exceptions import BackendError
from ..models import Penalty, PenaltyEvent
from ..raids.alerts import tell
from .ladder import standing
from .redis_mirror import announce_on_commit, mirror_members

logger = logging.getLogger("throttling")


def escalate(user_id, action, run, offences=0, window=0, now=None):
    """Apply the next rung to a member for one offence run; safe to call twice.

    The same run delivered again finds its penalty (a unique constraint on the
    run, not only a lookup, keeps it to one row) and only completes the Redis
    side. Returns the penalty, or None when there is nothing to apply (no such
    member, empty ladder). A Redis failure raises BackendError after the
    database commit; calling again finishes the job.
    """
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
                _strikes, rung = standing(user, now)
                if rung is None:
                    logger.warning("throttling: the penalty ladder is empty; member %s is only throttled", user_id)
                else:
                    penalty, created = _create_automatic(user, action, run, rung, offences, window, now)
    if penalty is None:
        clear_run(user_id, action, run, quiet=True)
        escalation_done(user_id, action, run, offences, window)
        return None
    if created:
        observe.escalation(observe.APPLIED)
        # As the ladder reads: "member alice (id 2) given ladder rung 2, 15 minutes, for “reply”".
        logger.info(
            "throttling: member %s (id %s) given ladder rung %d, %s, for %s",
            user.get_username(),
            user_id,
            penalty.level,
            duration_in_words(penalty.ends_at - penalty.starts_at),
            f"“{penalty.action}”" if penalty.action else "all actions",
        )
    mirror_members([user_id])
    clear_run(user_id, action, run)
    # Last: until here a lost task is still one that resync sends again.
    escalation_done(user_id, action, run, offences, window)
    return penalty


def _create_automatic(user, action, run, rung, offences, window, now):
    code, params = automatic_reason(action, offences, window, rejected=run.startswith(REJECTED_RUN))
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
            if settings.ALERT_RUNG is not None and rung.level >= settings.ALERT_RUNG:
                tell(
                    AlertKind.RUNG_REACHED,
                    member=user.get_username(),
                    user_id=user.pk,
                    level=rung.level,
                    rung=rung.name,
                    action=action,
                    all_actions=rung.all_actions,
                    warning=not rung.duration,
                    until=penalty.ends_at.isoformat(),
                    penalty=penalty.pk,
                )
    except IntegrityError:
        # The same run, delivered twice at once: the other delivery made the row.
        # (A run is named by the decision that crossed, so it belongs to one
        # member; a run already used for somebody else applies nothing.)
        existing = Penalty.objects.filter(crossing=run, user=user).first()
        if existing is None:
            logger.error("throttling: offence run %r belongs to another member; nothing applied to %s", run, user.pk)
        return existing, False
    announce_on_commit(signals.penalty_applied, penalty)
    return penalty, True


def apply_penalty(user, *, level, duration, action="", reason="", by=None, now=None):
    """A moderator's penalty: written, audited and mirrored at once. Counts as a strike."""
    now = now or timezone.now()
    with transaction.atomic():
        penalty = Penalty(user=user, action=action, level=level, starts_at=now, ends_at=now + duration, reason=reason)
        penalty.full_clean()
        penalty.save()
        PenaltyEvent.objects.create(penalty=penalty, kind=PenaltyEvent.Kind.APPLIED, at=now, actor=by, details=reason)
        announce_on_commit(signals.penalty_applied, penalty)
    penalty.mirror_error = _mirror_quietly(penalty.user_id)
    return penalty


def lift(penalty, by=None, reason=""):
    """Lift a penalty now: the row, an audit event and the Redis mirror, in this call.

    A lifted penalty no longer counts as a strike. Lifting twice is harmless
    (the second call changes nothing). If Redis cannot be reached the database
    still records the lift and `penalty.mirror_error` says why; the member is
    freed in Redis by the next `throttling_resync` (or when the penalty ends).
    """
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
            announce_on_commit(signals.penalty_lifted, current, by=by, reason=reason)
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
