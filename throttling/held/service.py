"""hold(), approve() and reject(): a held post hidden and queued, shown again, or kept hidden as an offence.

See Guide › Held for review. Hiding remembers what each field was, so approving puts it back; rejecting
keeps the post hidden (or deletes it, THROTTLING_HELD_REJECTED = "delete") and counts an offence of
the member for the action, so repeated rejections climb the penalty ladder as refusals do.
"""

import logging
from urllib.parse import unquote

from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from django.utils import timezone

from .. import signals
from ..common.choices import AlertKind, HeldStatus
from ..conf import settings
from ..engine.content.normalise import without_invisible
from ..engine.identity import MEMBER_PREFIX
from ..engine.offences.rejections import count_rejection
from ..engine.policies.approvals import approvals
from ..models import Held
from ..models.held import EXCERPT_MAX
from ..raids.alerts import tell
from . import notice

logger = logging.getLogger("throttling")


def member_of(identity):
    """The primary key of the member behind a decision's identity (as text), or None for a visitor."""
    if identity and identity.startswith(MEMBER_PREFIX):
        return unquote(identity[len(MEMBER_PREFIX) :])
    return None


def excerpt_of(text):
    """The start of the text a member sent, as the queue shows it: as a reader sees it (invisible
    characters left out, so a padding of them cannot leave the excerpt empty)."""
    text = " ".join(without_invisible(str(text or "")).split())
    return text if len(text) <= EXCERPT_MAX else text[: EXCERPT_MAX - 1] + "…"


def hide_fields(obj, hide):
    """Set `hide` ({field: value}) on `obj`; {field: what it was} to put back."""
    remembered = {}
    for name, value in hide.items():
        remembered[name] = getattr(obj, name)
        setattr(obj, name, value)
    return remembered


def hold(decision, obj, hide=None, *, request=None, text=None):
    """Hide `obj`, which a held `decision` let the member save, and queue it for a moderator.

    `hide` ({"is_public": False}) is set on the saved object, its fields' values remembered for
    approve(). `text` (what the member sent) gives the queue its excerpt; `request` tells the member
    once that their post awaits a moderator. Returns the Held row, or None when `decision` is not held.
    """
    if not getattr(decision, "held", False):
        return None
    remembered = {}
    if hide:
        remembered = hide_fields(obj, hide)
        if obj._state.adding:
            obj.save()  # not written yet: written hidden, so no reader ever sees it
        else:
            obj.save(update_fields=list(hide))
    return record(decision, obj, remembered, request=request, text=text)


def record(decision, obj, remembered, *, request=None, text=None):
    """The Held row of `obj`, already hidden (`remembered`: its fields' values before), and the signal."""
    user_id = member_of(decision.identity)
    held = Held.objects.create(
        user_id=user_id,
        identity=decision.identity[:200],
        action=decision.action,
        reason=decision.reason,
        content_type=ContentType.objects.get_for_model(obj) if obj is not None else None,
        object_id="" if obj is None or obj.pk is None else str(obj.pk),
        excerpt=excerpt_of(text if text is not None else ""),
        hidden=remembered,
    )
    transaction.on_commit(lambda: signals.held.send(sender=Held, held=held), robust=True)
    _alert_if_past_size()
    if request is not None:
        notice.tell(request)
    return held


def _alert_if_past_size():
    """Moderators are told once the queue grows past THROTTLING_HELD_ALERT_SIZE: by the post that
    passes it (one count per held post; the queue must shrink below it to be told again)."""
    size = settings.HELD_ALERT_SIZE
    if size is None:
        return
    pending = Held.objects.pending().count()
    if pending == size + 1:
        tell(AlertKind.HELD_QUEUE, count=pending, size=size)


def _locked(held):
    """`held` read again under a row lock, or None when it is not pending any more."""
    row = Held.objects.select_for_update().filter(pk=held.pk, status=HeldStatus.PENDING).first()
    return row


def approve(held, *, by=None):
    """Show a held post again (its remembered fields put back), and count it towards the member's
    earned trust. True when approved now; False when it was decided already."""
    with transaction.atomic():
        row = _locked(held)
        if row is None:
            return False
        obj = row.content_object
        if obj is not None and row.hidden:
            for name, value in row.hidden.items():
                # As JSON keeps it (a date as text): the field's own type again.
                setattr(obj, name, obj._meta.get_field(name).to_python(value))
            obj.save(update_fields=list(row.hidden))
        _decided(row, held, HeldStatus.APPROVED, by)
        transaction.on_commit(lambda: signals.held_approved.send(sender=Held, held=held), robust=True)
    if held.user_id is not None:
        approvals.forget(held.user_id, held.action)
    return True


def reject(held, *, by=None, reason=""):
    """Keep a held post hidden (or delete it, THROTTLING_HELD_REJECTED = "delete"), and count an offence
    of its member for the action. True when rejected now; False when it was decided already."""
    with transaction.atomic():
        row = _locked(held)
        if row is None:
            return False
        if settings.HELD_REJECTED == "delete":
            obj = row.content_object
            if obj is not None:
                obj.delete()
        row.note = held.note = str(reason or "")
        _decided(row, held, HeldStatus.REJECTED, by)
        transaction.on_commit(lambda: signals.held_rejected.send(sender=Held, held=held), robust=True)
    count_rejection(held.user_id, held.identity, held.action)
    return True


def _decided(row, held, status, by):
    now = timezone.now()
    for one in (row, held):
        one.status, one.decided_at = status, now
        one.decided_by = by if by is not None and by.is_authenticated else None
    # An update, not save(): the post may be deleted, and the row still names it for the record.
    Held.objects.filter(pk=row.pk).update(status=status, decided_at=now, decided_by=held.decided_by, note=held.note)
