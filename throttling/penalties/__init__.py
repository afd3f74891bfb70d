"""Penalties for repeat offenders: the ladder, the service that applies and lifts them, the Redis mirror."""

from ..engine.offences.escalations import resync_soon, send_failures, unsent_key
from .ladder import Rung, current_ladder, ladder_problems, rung_for, standing
from .redis_mirror import mirror_members, record_expiries, resync
from .service import apply_penalty, escalate, lift

__all__ = [
    "Rung",
    "apply_penalty",
    "current_ladder",
    "escalate",
    "ladder_problems",
    "lift",
    "mirror_members",
    "record_expiries",
    "resync",
    "resync_soon",
    "rung_for",
    "send_failures",
    "standing",
    "unsent_key",
]
