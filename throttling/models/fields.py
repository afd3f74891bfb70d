"""Validators, messages and field factories shared by the app's models."""

from decimal import Decimal

from django.conf import settings as django_settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q
from django.utils.functional import lazy
from django.utils.translation import gettext_lazy as _

from ..conf import MAX_BUCKET_SIZE, MAX_LOG_ENTRIES, MAX_PERIOD

ACTION_RE = r"^[a-z0-9_-]+\Z"

action_validator = RegexValidator(
    ACTION_RE,
    _("Use only lowercase letters, digits, hyphens and underscores, e.g. “reply” or “send-message”."),
)
PERIOD_MESSAGE = _("The period must be between 1 second and 366 days (31,622,400 seconds).")
MAX_COUNT_MESSAGE = lazy(
    lambda: _("The maximum must be between 1 and %(cap)s.") % {"cap": f"{MAX_BUCKET_SIZE:,}"},
    str,
)()
LOG_CAP_MESSAGE = lazy(
    lambda: (
        _(
            "A sliding log allows at most %(cap)s in a period. It remembers each allowed action "
            "individually for the whole period, so larger numbers would use too much memory: "
            "choose the token bucket for this limit, or a shorter period with a smaller number "
            "(for example 100 per minute rather than 6,000 per hour)."
        )
        % {"cap": f"{MAX_LOG_ENTRIES:,}"}
    ),
    str,
)()


def period_field(**kwargs):
    return models.PositiveIntegerField(
        _("period (seconds)"),
        validators=[
            MinValueValidator(1, PERIOD_MESSAGE),
            MaxValueValidator(MAX_PERIOD, PERIOD_MESSAGE),
        ],
        **kwargs,
    )


def max_count_field(**kwargs):
    return models.PositiveIntegerField(
        _("maximum in the period"),
        validators=[
            MinValueValidator(1, MAX_COUNT_MESSAGE),
            MaxValueValidator(MAX_BUCKET_SIZE, MAX_COUNT_MESSAGE),
        ],
        **kwargs,
    )


def window_constraints(prefix):
    return [
        models.CheckConstraint(
            condition=Q(period__gte=1, period__lte=MAX_PERIOD),
            name=f"{prefix}_period_range",
            violation_error_message=PERIOD_MESSAGE,
        ),
        models.CheckConstraint(
            condition=Q(max_count__gte=1, max_count__lte=MAX_BUCKET_SIZE),
            name=f"{prefix}_max_count_range",
            violation_error_message=MAX_COUNT_MESSAGE,
        ),
    ]


OFFENCE_THRESHOLD_HELP = _(
    "Refused attempts within the offence window that make a member a repeat offender "
    "and start the penalty ladder. Blank: the site setting (THROTTLING_OFFENCE_THRESHOLD, "
    "5 by default). 0: never penalise for this action."
)
OFFENCE_WINDOW_HELP = _(
    "Seconds in which those refused attempts must happen. Blank: the site setting "
    "(THROTTLING_OFFENCE_WINDOW, 600 by default)."
)


def moderator_field(verbose_name, **kwargs):
    """Who did something on the record (granted, revoked, lifted): kept if that account goes."""
    return models.ForeignKey(
        django_settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=verbose_name,
        **kwargs,
    )


MULTIPLIER_MESSAGE = _("The multiplier must be between 0.01 and 100 (1 leaves the limit as it is).")


def multiplier_field(*, most=Decimal("100"), max_digits=6, message=MULTIPLIER_MESSAGE, **kwargs):
    """A multiplier of limits, from 0.01 to `most`, two decimals; `message` says the range when it is left."""
    return models.DecimalField(
        _("multiplier"),
        max_digits=max_digits,
        decimal_places=2,
        validators=[MinValueValidator(Decimal("0.01"), message), MaxValueValidator(most, message)],
        **kwargs,
    )
