"""A held post a moderator rejected counts as an offence of its member, as a refused attempt does."""

import logging

from ...backends.redis import get_backend
from ...conf import settings
from ...exceptions import BackendError
from ..identity import member_identity
from ..keys import state_keys, tokens
from ..policies.cache import policies
from .escalations import enqueue_escalation
from .record import offence_threshold
from .report_batches import buffer

logger = logging.getLogger("throttling")

# The start of the name of an offence run a rejection crossed: the penalty it brings says that rejected
# posts counted (penalties read it, see Guide › Held for review).
REJECTED_RUN = "rej-"


def count_rejection(user_id, identity, action):
    """One offence of `identity` (a member's, `user_id`, or a visitor's) for `action`: counted in its
    offence window in Redis, recorded in the offence history, and escalated on the ladder when it
    crosses the threshold (see Guide › Held for review). The offences so far, or None when Redis
    could not count it (logged; the rejection stands)."""
    policy = policies.get(action)
    if user_id is not None:
        identity = member_identity(user_id)
    window = (policy.offence_window if policy is not None else None) or settings.OFFENCE_WINDOW
    # offence_threshold() asks only whether a member is behind it (visitors are never escalated).
    threshold = offence_threshold(policy, user_id) if policy is not None else 0
    keys = state_keys(identity, action)
    run = REJECTED_RUN + tokens.next()
    spec = f"{window} {threshold} {settings.ESCALATION_TIMEOUT}"
    try:
        offences, crossing = get_backend().decide("offend", [keys[1], keys[3]], [run, spec])
    except BackendError as exc:
        logger.warning("throttling: could not count the rejection of a held %r as an offence: %s", action, exc)
        return None
    buffer.add(identity, user_id, action)
    if crossing:
        enqueue_escalation(user_id, action, run, offences, window)
    return offences
