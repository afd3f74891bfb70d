"""A policy's limits on repeated content: its fields, the table's checks of them and their messages."""

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.functional import lazy
from django.utils.translation import gettext_lazy as _

from ..common.choices import Scope

# A member's recent posts are remembered 32 at most, so a limit per member must stay below.
MAX_REPEATS = 20
# Each post of a wave keeps its members' entries under every content key: bounded by this.
MAX_WAVE_MEMBERS = 100
# The wave index holds every post of its last two periods: a day keeps it within reach of memory.
MAX_CONTENT_PERIOD = 86400

# Interpolated when rendered, so they are in the reader's language.
REPEATS_MESSAGE = lazy(
    lambda: _("A member may post the same content between 1 and %(max)d times in the period.") % {"max": MAX_REPEATS},
    str,
)()
MEMBERS_MESSAGE = lazy(
    lambda: (
        _("Between 1 and %(max)d different members may post the same content in the period.")
        % {"max": MAX_WAVE_MEMBERS}
    ),
    str,
)()
PERIOD_MESSAGE = _("The period of repeated content must be between 1 second and 1 day (86,400 seconds).")
NEEDS_PERIOD_MESSAGE = _(
    "Give the period in which repeated content counts (for example 10 minutes), or leave both limits blank."
)
NEEDS_LIMIT_MESSAGE = _(
    "A period alone limits nothing: say how many times one member may post the same content, "
    "how many different members may, or both — or leave the period blank."
)
SITE_WIDE_MESSAGE = _(
    "Repeated content is counted per member and per wave of members, and a site-wide policy counts "
    "everyone together: choose “per member”, or leave the repeated-content limits blank."
)


def max_field():
    return models.PositiveSmallIntegerField(
        _("times one member may post the same content"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1, REPEATS_MESSAGE), MaxValueValidator(MAX_REPEATS, REPEATS_MESSAGE)],
        help_text=_(
            "1: a member who posts the same thing again within the period is refused (“You have already "
            "posted this.”). Near-duplicates count too: a word changed, an emoji or a link’s tracking "
            "parameters added. Blank: no limit per member."
        ),
    )


def members_field():
    return models.PositiveSmallIntegerField(
        _("different members who may post the same content"),
        null=True,
        blank=True,
        validators=[
            MinValueValidator(1, MEMBERS_MESSAGE),
            MaxValueValidator(MAX_WAVE_MEMBERS, MEMBERS_MESSAGE),
        ],
        help_text=_(
            "A wave: once this many different members posted the same content within the period, "
            "anyone else posting it is refused as spam. Posts of fewer than 8 words (“Thanks!”, “+1”) "
            "never make a wave. Blank: no limit across members."
        ),
    )


def period_field():
    return models.PositiveIntegerField(
        _("period of repeated content (seconds)"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1, PERIOD_MESSAGE), MaxValueValidator(MAX_CONTENT_PERIOD, PERIOD_MESSAGE)],
        help_text=_("How long a post is remembered: its text is never kept, only hashes of it."),
    )


def constraints():
    """The same ranges as the fields, held by the table against rows written around them."""
    return [
        models.CheckConstraint(
            condition=Q(same_content_max__isnull=True) | Q(same_content_max__gte=1, same_content_max__lte=MAX_REPEATS),
            name="throttling_policy_same_content_max_range",
            violation_error_message=REPEATS_MESSAGE,
        ),
        models.CheckConstraint(
            condition=Q(same_content_members__isnull=True)
            | Q(same_content_members__gte=1, same_content_members__lte=MAX_WAVE_MEMBERS),
            name="throttling_policy_same_content_members_range",
            violation_error_message=MEMBERS_MESSAGE,
        ),
        models.CheckConstraint(
            condition=Q(same_content_period__isnull=True)
            | Q(same_content_period__gte=1, same_content_period__lte=MAX_CONTENT_PERIOD),
            name="throttling_policy_same_content_period_range",
            violation_error_message=PERIOD_MESSAGE,
        ),
    ]


def clean(policy):
    """What the form and declared policies are told about a policy's repeated-content limits."""
    limited = policy.same_content_max is not None or policy.same_content_members is not None
    if limited and policy.same_content_period is None:
        raise ValidationError({"same_content_period": NEEDS_PERIOD_MESSAGE})
    if policy.same_content_period is not None and not limited:
        raise ValidationError({"same_content_period": NEEDS_LIMIT_MESSAGE})
    if limited and policy.scope == Scope.SITE:
        raise ValidationError({"scope": SITE_WIDE_MESSAGE})
