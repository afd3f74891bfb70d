"""Surge mode: started by a moderator, by code or by a policy's trigger, ended early or on time, told once."""

from datetime import timedelta
from decimal import Decimal, InvalidOperation

from django.conf import settings as django_settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone, translation
from django.utils.translation import gettext

from ..common.choices import AlertKind
from ..engine.countermeasures.in_force import measures
from ..models import Surge, SurgeTrigger
from ..models.surges import SURGE_MINUTES_MESSAGE, SURGE_MOST_MINUTES, SURGE_MULTIPLIER_MESSAGE
from .alerts import tell


def start_surge(multiplier, minutes, reason, actions=None, *, by=None, trigger=None, now=None):
    """Tighten every limit (or those of `actions`) by `multiplier` for `minutes`, recorded with who and why.

    `multiplier` is from 0.01 to 0.99 (0.5 halves every window's maximum); `actions` is None for
    every action, or a list (or comma-separated text) of action names; `by` is the moderator, None
    for code. Live in every process within a second. Raises ValidationError with a moderator-readable
    message for anything out of range. Returns the Surge.
    """
    now = now or timezone.now()
    surge = Surge(
        multiplier=_multiplier(multiplier),
        actions=",".join(actions) if isinstance(actions, (list, tuple, set, frozenset)) else (actions or ""),
        reason=(reason or "").strip(),
        started_at=now,
        ends_at=now + timedelta(minutes=_minutes(minutes)),
        started_by=by,
        trigger=trigger,
    )
    surge.full_clean()
    return begin(surge)


def begin(surge):
    """Save a new, validated Surge and tell the moderators (the admin's form and start_surge())."""
    with transaction.atomic():
        surge.save()
        by = surge.started_by
        tell(
            AlertKind.SURGE_STARTED,
            multiplier=str(surge.multiplier.normalize()),
            actions=surge.actions,
            minutes=round((surge.ends_at - surge.started_at).total_seconds() / 60),
            until=surge.ends_at.isoformat(),
            reason=surge.reason,
            by=by.get_username() if by is not None else "",
            automatic=surge.trigger_id is not None,
            surge=surge.pk,
        )
    return surge


def end_surge(surge=None, *, by=None, reason="", now=None):
    """End a surge now (the given one, or every surge in force), recorded with who and why.

    Returns the surges ended: none when none was in force.
    """
    now = now or timezone.now()
    in_force = Surge.objects.in_force(now)
    if surge is not None:
        in_force = in_force.filter(pk=surge.pk)
    ended = []
    with transaction.atomic():
        for current in in_force.select_for_update().order_by("pk"):
            # The conditional update ends each surge once, whoever else ends it at the same time.
            if Surge.objects.filter(pk=current.pk, ended_at__isnull=True, end_told=False).update(
                ended_at=now, ended_by=by, end_reason=(reason or "").strip(), end_told=True
            ):
                current.refresh_from_db()
                ended.append(current)
                tell(
                    AlertKind.SURGE_ENDED,
                    multiplier=str(current.multiplier.normalize()),
                    actions=current.actions,
                    early=True,
                    by=by.get_username() if by is not None else "",
                    reason=current.end_reason,
                    surge=current.pk,
                )
    if ended:
        # update() sends no post_save: the receiver's job, done here (this process at once, the
        # others once the end is committed).
        measures.changed(broadcast=False)
        transaction.on_commit(measures.changed, robust=True)
    if surge is not None and ended:
        surge.refresh_from_db()
    return ended


def notice_ended_surges(now=None):
    """Tell moderators about surges that ended on time and were not told yet (the resync, and the
    background thread when a surge's end passes). Returns how many."""
    now = now or timezone.now()
    told = 0
    for surge in Surge.objects.filter(ended_at__isnull=True, ends_at__lte=now, end_told=False).order_by("pk"):
        with transaction.atomic():
            if Surge.objects.filter(pk=surge.pk, end_told=False).update(end_told=True):
                tell(
                    AlertKind.SURGE_ENDED,
                    multiplier=str(surge.multiplier.normalize()),
                    actions=surge.actions,
                    early=False,
                    surge=surge.pk,
                )
                told += 1
    return told


def start_triggered_surge(trigger_id, count, now=None):
    """The surge a policy's trigger starts when its action passed the threshold: None when the trigger
    is gone or off, or a surge it started is still in force (the task may come twice)."""
    now = now or timezone.now()
    trigger = SurgeTrigger.objects.select_related("policy").filter(pk=trigger_id, enabled=True).first()
    if trigger is None or Surge.objects.in_force(now).filter(trigger=trigger).exists():
        return None
    with translation.override(django_settings.LANGUAGE_CODE):
        reason = gettext(
            "“%(action)s” passed %(threshold)s in %(period)s seconds across the site (about %(count)s)."
        ) % {
            "action": trigger.policy.action,
            "threshold": trigger.threshold,
            "period": trigger.period,
            "count": count,
        }
    return start_surge(
        trigger.multiplier,
        trigger.minutes,
        reason,
        [trigger.policy.action] if trigger.this_action_only else None,
        trigger=trigger,
        now=now,
    )


def _multiplier(value):
    try:
        found = Decimal(str(value)).quantize(Decimal("0.01"))
    except (InvalidOperation, ValueError, TypeError):
        raise ValidationError({"multiplier": SURGE_MULTIPLIER_MESSAGE})
    if not Decimal("0.01") <= found <= Decimal("0.99"):
        raise ValidationError({"multiplier": SURGE_MULTIPLIER_MESSAGE})
    return found


def _minutes(value):
    if type(value) is not int or not 1 <= value <= SURGE_MOST_MINUTES:
        raise ValidationError({"minutes": SURGE_MINUTES_MESSAGE})
    return value
