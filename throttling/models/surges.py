"""Surges: every limit tightened for a while, started by a moderator or by a policy's trigger."""

from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from .blocks import ACTIONS_MAX, canonical_actions
from .fields import moderator_field, multiplier_field
from .policies import ActionPolicy

SURGE_MULTIPLIER_MESSAGE = _("A surge tightens: give a multiplier from 0.01 to 0.99, e.g. 0.5 halves every limit.")
SURGE_REASON_MESSAGE = _("Say why, for the record, e.g. “raid on the announcements board”.")
# A surge lasts at most a week: a longer tightening is a policy edit.
SURGE_MOST_MINUTES = 7 * 24 * 60
SURGE_MINUTES_MESSAGE = _("A surge lasts from 1 minute to 7 days (10,080 minutes).")


def surge_multiplier_field(**kwargs):
    return multiplier_field(most=Decimal("0.99"), max_digits=3, message=SURGE_MULTIPLIER_MESSAGE, **kwargs)


def minutes_field(**kwargs):
    return models.PositiveIntegerField(
        _("minutes"),
        validators=[
            MinValueValidator(1, SURGE_MINUTES_MESSAGE),
            MaxValueValidator(SURGE_MOST_MINUTES, SURGE_MINUTES_MESSAGE),
        ],
        **kwargs,
    )


class SurgeTrigger(models.Model):
    """A policy's own surge: when the site-wide count of its action passes `threshold` within
    `period` seconds, surge mode starts for `minutes`."""

    policy = models.OneToOneField(
        ActionPolicy, on_delete=models.CASCADE, related_name="surge_trigger", verbose_name=_("policy")
    )
    enabled = models.BooleanField(_("enabled"), default=True)
    threshold = models.PositiveIntegerField(
        _("site-wide count"),
        validators=[MinValueValidator(1)],
        help_text=_("Start a surge when the whole site does this action more than this many times…"),
    )
    period = models.PositiveIntegerField(
        _("within (seconds)"),
        validators=[MinValueValidator(10), MaxValueValidator(86400)],
        help_text=_("…within this many seconds (10 to 86,400)."),
    )
    multiplier = surge_multiplier_field(help_text=_("Every limit is multiplied by this during the surge."))
    minutes = minutes_field(help_text=_("How long the surge lasts."))
    this_action_only = models.BooleanField(
        _("this action only"), default=False, help_text=_("Tighten only this action’s limits, not every action’s.")
    )

    class Meta:
        verbose_name = _("surge trigger")
        verbose_name_plural = _("surge triggers")
        constraints = [
            models.CheckConstraint(
                condition=Q(multiplier__gte=Decimal("0.01"), multiplier__lte=Decimal("0.99")),
                name="throttling_trigger_multiplier",
                violation_error_message=SURGE_MULTIPLIER_MESSAGE,
            ),
            models.CheckConstraint(
                condition=Q(minutes__gte=1, minutes__lte=SURGE_MOST_MINUTES),
                name="throttling_trigger_minutes",
                violation_error_message=SURGE_MINUTES_MESSAGE,
            ),
        ]

    def __str__(self):
        return gettext("%(action)s: more than %(n)s in %(s)s s") % {
            "action": self.policy.action,
            "n": self.threshold,
            "s": self.period,
        }


class SurgeQuerySet(models.QuerySet):
    def in_force(self, now=None):
        now = now or timezone.now()
        return self.filter(ended_at__isnull=True, ends_at__gt=now)


class Surge(models.Model):
    """Surge mode: every limit (or those of some actions) multiplied by a number below 1 until it ends.

    Never deleted: each says who started it and why, and an early end says who ended it and why.
    """

    multiplier = surge_multiplier_field(help_text=_("Every limit is multiplied by this, e.g. 0.5 halves it."))
    actions = models.CharField(
        _("actions"),
        max_length=ACTIONS_MAX,
        blank=True,
        help_text=_("Leave empty for every action, or name actions separated by commas."),
    )
    reason = models.TextField(_("reason"), help_text=SURGE_REASON_MESSAGE)
    started_at = models.DateTimeField(_("started"), default=timezone.now, editable=False)
    ends_at = models.DateTimeField(_("ends"))
    started_by = moderator_field(_("started by"), editable=False)
    trigger = models.ForeignKey(
        SurgeTrigger,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        editable=False,
        related_name="surges",
        verbose_name=_("started by the trigger"),
    )
    ended_at = models.DateTimeField(_("ended early"), null=True, blank=True, editable=False)
    ended_by = moderator_field(_("ended by"), editable=False)
    end_reason = models.TextField(_("reason for ending"), blank=True, editable=False)
    # True once moderators were told it ended (early, or on time by the resync).
    end_told = models.BooleanField(default=False, editable=False)

    objects = SurgeQuerySet.as_manager()

    class Meta:
        verbose_name = _("surge")
        verbose_name_plural = _("surges")
        ordering = ["-started_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(multiplier__gte=Decimal("0.01"), multiplier__lte=Decimal("0.99")),
                name="throttling_surge_multiplier",
                violation_error_message=SURGE_MULTIPLIER_MESSAGE,
            ),
            models.CheckConstraint(
                condition=Q(reason__regex=r"\S"),
                name="throttling_surge_reason",
                violation_error_message=SURGE_REASON_MESSAGE,
            ),
        ]
        indexes = [models.Index(fields=["ended_at", "ends_at"], name="throttling_surge_in_force")]

    def __str__(self):
        return gettext("limits × %(m)s for %(actions)s") % {
            "m": self.multiplier.normalize(),
            "actions": self.actions or gettext("every action"),
        }

    @property
    def in_force(self):
        return self.ended_at is None and self.ends_at > timezone.now()

    @property
    def finished_at(self):
        """When it stopped applying: its early end, or its end."""
        return self.ended_at or self.ends_at

    def save(self, *args, **kwargs):
        try:
            self.actions = canonical_actions(self.actions)
        except ValidationError:
            pass  # left as written: a name no policy has never matches
        super().save(*args, **kwargs)

    def clean(self):
        super().clean()
        errors = {}
        try:
            self.actions = canonical_actions(self.actions)
        except ValidationError as exc:
            errors["actions"] = exc.messages
        if not (self.reason or "").strip():
            errors["reason"] = SURGE_REASON_MESSAGE
        if errors:
            raise ValidationError(errors)
