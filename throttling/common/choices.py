"""One definition of each set of choices: algorithms, modes, scopes, and why a decision came out as it did."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class Algorithm(models.TextChoices):
    SLIDING_LOG = "sliding_log", _("Sliding log (exact: never more than N in any period)")
    TOKEN_BUCKET = "token_bucket", _("Token bucket (constant memory, smooth refill, bursts up to N)")


class Mode(models.TextChoices):
    ENFORCE = "enforce", _("Enforce: refuse what goes over the limit")
    SHADOW = "shadow", _("Shadow: allow everything, record what would have been refused")


class Scope(models.TextChoices):
    MEMBER = "member", _("Per member (or visitor): each has their own count")
    SITE = "site", _("Site-wide: one count shared by everyone")


class OnBackendFailure(models.TextChoices):
    DEFAULT = "default", _("Use the site setting (THROTTLING_FAIL_OPEN)")
    OPEN = "open", _("Allow the action (fail open)")
    CLOSED = "closed", _("Refuse the action (fail closed)")


class Reason(models.TextChoices):
    """Why a decision came out as it did (Decision.reason); also the result label of metrics."""

    ADMITTED = "admitted"
    THROTTLED = "throttled"
    PENALISED = "penalised"
    # Admitted although enforcing would have refused: by a policy in shadow mode, or under a block
    # in shadow mode.
    SHADOW = "shadow"
    EXEMPT = "exempt"
    DISABLED = "disabled"
    UNKNOWN_ACTION = "unknown_action"
    BACKEND_FAILURE = "backend_failure"
    # Refused because the cost is more than a window of this member's limits can ever admit.
    TOO_COSTLY = "too_costly"
    # Refused by a block of the member or of their address range (decided in process, no Redis call).
    BLOCKED = "blocked"
    # Refused because the same content was posted again: by the member, or by a wave of members.
    DUPLICATE = "duplicate"
    # Held for review (Decision.held) because the member has not yet had enough held posts approved
    # (ActionPolicy.hold_until_approved), or is a visitor under such a policy.
    NEW_MEMBER = "new_member"


class Repeated(models.TextChoices):
    """What a refusal for repeated content (Reason.DUPLICATE) found: the member's own repeat, or a wave."""

    MEMBER = "member"
    WAVE = "wave"


class Severity(models.TextChoices):
    """What a block does to the requests it matches."""

    REFUSE = "refuse", _("Refuse: every request is refused")
    SHADOW = "shadow", _("Shadow: nothing is refused, what would have been is recorded")
    TIGHTEN = "tighten", _("Tighten: every limit multiplied by a number below 1")
    LOOSEN = "loosen", _("Loosen: every limit multiplied by a number above 1")
    HOLD = "hold", _("Hold: every request is admitted, what it saves hidden until a moderator approves it")


class ContentAnswer(models.TextChoices):
    """What a repeat or a wave gets (ActionPolicy.same_content_answer)."""

    REFUSE = "refuse", _("Refuse it")
    HOLD = "hold", _("Hold it for review: saved, hidden, and queued for a moderator")


class HeldStatus(models.TextChoices):
    """Where a post held for review stands (Held.status)."""

    PENDING = "pending", _("pending")
    APPROVED = "approved", _("approved")
    REJECTED = "rejected", _("rejected")


class AlertKind(models.TextChoices):
    """What moderators are told about, once per event."""

    SURGE_STARTED = "surge_started", _("surge started")
    SURGE_ENDED = "surge_ended", _("surge ended")
    RUNG_REACHED = "rung_reached", _("member reached a high rung")
    BLOCK_REFUSED = "block_refused", _("block refused its first request")
    HELD_QUEUE = "held_queue", _("review queue grew past its size")
