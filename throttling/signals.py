"""The signals the app sends: declarations only (receivers.py wires the app's own receivers)."""

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
# Moderators must hear about an event, once (a surge started or ended, a member reached a rung at
# or above THROTTLING_ALERT_RUNG, a block refused its first request); kwargs: kind (an
# AlertKind value), sentence (what happened, in the site's LANGUAGE_CODE), params (the event's
# details), alert (the throttling.models.Alert row). Sent once the event is committed; the app's
# own receiver has the digest mailed to the moderators.
alert = Signal()
# Held for review (see Guide › Held for review), each once the change is committed; kwargs: held (the
# throttling.models.Held row). A post was held; a moderator approved it; a moderator rejected it.
held = Signal()
held_approved = Signal()
held_rejected = Signal()
