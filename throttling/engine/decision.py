"""The answer to one check or peek: `Decision` and the reasons it can give."""

from dataclasses import dataclass, field

from ..common.choices import Reason, Repeated
from ..common.words import refusal_message

# Why a decision came out as it did, as plain strings: a Decision is made per request.
ADMITTED = Reason.ADMITTED.value
THROTTLED = Reason.THROTTLED.value
UNKNOWN_ACTION = Reason.UNKNOWN_ACTION.value
DISABLED = Reason.DISABLED.value
EXEMPT = Reason.EXEMPT.value
BACKEND_FAILURE = Reason.BACKEND_FAILURE.value
PENALISED = Reason.PENALISED.value
SHADOW = Reason.SHADOW.value
TOO_COSTLY = Reason.TOO_COSTLY.value
DUPLICATE = Reason.DUPLICATE.value
BLOCKED = Reason.BLOCKED.value
NEW_MEMBER = Reason.NEW_MEMBER.value
# What a refusal for repeated content found (Decision.duplicate): the member's own repeat, or a wave.
REPEATED, WAVE = Repeated.MEMBER.value, Repeated.WAVE.value


# slots and no frozen: a frozen dataclass pays object.__setattr__ per field,
# which is measurable on a path that is otherwise one Redis round trip.
@dataclass(slots=True)
class Decision:
    allowed: bool
    action: str
    limit: int | None = None
    remaining: int | None = None
    retry_after: float = 0.0
    reset_after: float = 0.0
    reason: str = ADMITTED
    identity: str = ""
    offences: int = 0
    verb: str = field(default="", repr=False)
    # The penalty that refused this decision (reason PENALISED), else None.
    penalty: "PenaltyInfo | None" = None  # noqa: F821 (engine.mirror.PenaltyInfo)
    # True when this refusal made the member a repeat offender (an escalation was queued).
    escalated: bool = False
    # What this decision took, so refund() can give it back: log members, or ("bucket", cost).
    entries: tuple = field(default=(), repr=False, compare=False)
    # The windows ((period, max_count), ...) that applied, a trust tier's or an override's
    # multiplier included: what the RateLimit headers describe and a refund gives back to.
    windows: tuple = field(default=(), repr=False, compare=False)
    # The decision script's keys: state (the log or the bucket), offences, penalties, pending mark.
    keys: tuple = field(default=(), repr=False, compare=False)
    # What was counted against when a target was given (e.g. a thread), else None.
    target: "str | None" = field(default=None, compare=False)
    # A refusal for repeated content: REPEATED (the member's own) or WAVE (several members'), else "".
    duplicate: str = ""
    # What an admitted decision with content wrote, so refund() can forget it (engine.duplicates).
    content: tuple = field(default=(), repr=False, compare=False)
    # Admitted, but what it saves is to be hidden and queued for a moderator (see Guide › Held for
    # review); `reason` then says why: DUPLICATE, BLOCKED or NEW_MEMBER.
    held: bool = False

    def __bool__(self):
        return self.allowed

    @property
    def log_key(self):
        """Where this decision's state lives (the log or the bucket)."""
        return self.keys[0] if self.keys else ""

    @property
    def message(self):
        return refusal_message(self)
