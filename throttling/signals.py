"""Signals the app sends, and the receivers that keep the policy cache honest."""

from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import Signal

# Sent for each decision Redis could not make; kwargs: action, identity, error, fail_open.
backend_failure = Signal()

# The signals below mark changes of state, never single refused requests.

# An identity's first refusal for an action in an offence window (it went from
# admitted to throttled); kwargs: action, identity, user (None if anonymous), decision.
action_throttled = Signal()
# A penalty was created (by the ladder or a moderator) and committed; kwargs: penalty.
penalty_applied = Signal()
# A penalty was lifted by staff or code; kwargs: penalty, by (a user or None), reason.
penalty_lifted = Signal()
# The end of a penalty was recorded (throttling_resync); kwargs: penalty.
penalty_expired = Signal()
# Redis lost keys on its own: it evicted some (kwargs: reason="evicted", count). Sent by
# at most one look per THROTTLING_EVICTION_CHECK seconds in each process.
redis_keys_lost = Signal()


def _policy_changed(sender, **kwargs):
    from .policies import invalidate_policies

    # This process forgets at once (even inside the transaction that edits);
    # the others are told only once the change is committed and readable.
    invalidate_policies(broadcast=False)
    transaction.on_commit(invalidate_policies, robust=True)


def connect():
    from . import penalties
    from .models import ActionPolicy, ActionWindow, MemberOverride, PolicyTier

    redis_keys_lost.connect(penalties.resync_soon, dispatch_uid="throttling-resync-after-loss")
    for model in (ActionPolicy, ActionWindow, PolicyTier, MemberOverride):
        post_save.connect(_policy_changed, sender=model, dispatch_uid=f"throttling-save-{model.__name__}")
        post_delete.connect(_policy_changed, sender=model, dispatch_uid=f"throttling-del-{model.__name__}")
