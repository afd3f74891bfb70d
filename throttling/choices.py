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
    # Admitted by a policy in shadow mode although enforcing it would have refused.
    SHADOW = "shadow"
    EXEMPT = "exempt"
    DISABLED = "disabled"
    UNKNOWN_ACTION = "unknown_action"
    BACKEND_FAILURE = "backend_failure"
    # Refused because the cost is more than a window of this member's limits can ever admit.
    TOO_COSTLY = "too_costly"
