"""The penalty ladder, penalties and their append-only audit events."""

from datetime import timedelta

from django.conf import settings as django_settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from ..common.words import render_reason
from ..conf import settings
from .fields import ACTION_RE, action_validator, moderator_field


class PenaltyStep(models.Model):
    """One rung of the penalty ladder: the nth strike inside the forgiveness period gets rung n."""

    level = models.PositiveSmallIntegerField(
        _("level"),
        unique=True,
        validators=[MinValueValidator(1, _("Levels start at 1."))],
        help_text=_("1 is the first strike, 2 the second, and so on. Past the last level, the last one repeats."),
    )
    name = models.CharField(_("name"), max_length=64, help_text=_("Shown to moderators, e.g. “Warning” or “1 day”."))
    duration = models.DurationField(
        _("duration"),
        help_text=_(
            "How long the restriction lasts, e.g. “00:15:00” for 15 minutes or “7 00:00:00” for 7 days. 0 is a warning: nothing is blocked."
        ),
    )
    all_actions = models.BooleanField(
        _("restricts all actions"),
        default=False,
        help_text=_("Ticked: the member may do nothing that is limited. Unticked: only the action they abused."),
    )

    class Meta:
        verbose_name = _("penalty ladder rung")
        verbose_name_plural = _("penalty ladder rungs")
        ordering = ["level"]
        constraints = [
            models.CheckConstraint(
                condition=Q(level__gte=1),
                name="throttling_step_level_positive",
                violation_error_message=_("Levels start at 1."),
            ),
            models.CheckConstraint(
                condition=Q(duration__gte=timedelta(0)),
                name="throttling_step_duration_not_negative",
                violation_error_message=_("A duration cannot be negative."),
            ),
        ]

    def __str__(self):
        return f"{self.level}. {self.name}"

    @property
    def is_warning(self):
        return not self.duration

    def clean(self):
        if self.duration is None or self.level is None:
            return
        if self.duration < timedelta(0):
            raise ValidationError({"duration": _("A duration cannot be negative.")})
        others = PenaltyStep.objects.exclude(pk=self.pk)
        lower = others.filter(level__lt=self.level).order_by("-level").first()
        higher = others.filter(level__gt=self.level).order_by("level").first()
        if lower and self.duration < lower.duration:
            raise ValidationError(
                {
                    "duration": _(
                        "Level %(level)d cannot be shorter than level %(lower)d (%(lower_name)s): "
                        "penalties must not get milder as strikes add up."
                    )
                    % {"level": self.level, "lower": lower.level, "lower_name": lower.name}
                }
            )
        if higher and self.duration > higher.duration:
            raise ValidationError(
                {
                    "duration": _(
                        "Level %(level)d cannot be longer than level %(higher)d (%(higher_name)s): "
                        "penalties must not get milder as strikes add up."
                    )
                    % {"level": self.level, "higher": higher.level, "higher_name": higher.name}
                }
            )


# A warning is recorded with no length; every other penalty restricts.
WARNING = Q(ends_at=models.F("starts_at"))
RESTRICTING = Q(ends_at__gt=models.F("starts_at"))


def active_q(now):
    """Penalties in force at `now`: started, not ended, not lifted. Warnings are never in force."""
    return Q(starts_at__lte=now, ends_at__gt=now, lifted_at__isnull=True)


class PenaltyQuerySet(models.QuerySet):
    def active(self, now=None):
        """Penalties in force now (active_q)."""
        return self.filter(active_q(now or timezone.now()))

    def strikes(self, user, now=None, forgiveness_days=None):
        """Penalties that count toward the next rung: not lifted, started inside the forgiveness period."""
        now = now or timezone.now()
        days = settings.FORGIVENESS_DAYS if forgiveness_days is None else forgiveness_days
        return self.filter(user=user, lifted_at__isnull=True, starts_at__gt=now - timedelta(days=days))


class Penalty(models.Model):
    """A restriction of one member: one action, or all actions when `action` is blank.

    The database row is the truth; Redis holds a mirror (with a TTL ending with
    the penalty) so the decision script refuses the member in its single call.
    """

    user = models.ForeignKey(
        django_settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="throttling_penalties",
        verbose_name=_("member"),
    )
    action = models.CharField(
        _("action"), max_length=64, blank=True, validators=[action_validator], help_text=_("Blank: all actions.")
    )
    level = models.PositiveSmallIntegerField(_("level"), validators=[MinValueValidator(1)])
    starts_at = models.DateTimeField(_("starts"), default=timezone.now, db_index=True)
    ends_at = models.DateTimeField(_("ends"), db_index=True)
    reason = models.TextField(_("reason"), blank=True)
    # An automatic penalty's reason as a code and parameters, rendered in the reader's language
    # (reason_text); a moderator's reason is the text they typed, in `reason`.
    reason_code = models.CharField(_("reason code"), max_length=32, blank=True, editable=False)
    reason_params = models.JSONField(_("reason parameters"), default=dict, blank=True, editable=False)
    automatic = models.BooleanField(
        _("automatic"), default=False, help_text=_("Applied by the penalty ladder, not by a moderator.")
    )
    lifted_at = models.DateTimeField(_("lifted"), null=True, blank=True)
    lifted_by = moderator_field(_("lifted by"))
    lift_reason = models.TextField(_("reason for lifting"), blank=True)
    expired_at = models.DateTimeField(
        _("expiry recorded"),
        null=True,
        blank=True,
        editable=False,
        help_text=_("When the end of this penalty was recorded (the member was free from its end time on)."),
    )
    # When the member was shown this penalty (a notice on a page, or the 429 it refused them with);
    # empty until then. Only such rows are in the index the notices read on every page.
    noticed_at = models.DateTimeField(_("shown to the member"), null=True, blank=True, editable=False)
    # The offence run that caused an automatic penalty: the same run delivered
    # twice can only ever make one row (the escalation task is idempotent).
    crossing = models.CharField(_("offence run"), max_length=64, blank=True, editable=False)

    objects = PenaltyQuerySet.as_manager()

    class Meta:
        verbose_name = _("penalty")
        verbose_name_plural = _("penalties")
        ordering = ["-starts_at", "-pk"]
        permissions = [("lift_penalty", _("Can lift penalties"))]
        indexes = [
            models.Index(fields=["user", "starts_at"], name="throttling_penalty_user_start"),
            models.Index(fields=["user"], condition=Q(noticed_at__isnull=True), name="throttling_penalty_unnoticed"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["crossing"],
                condition=~Q(crossing=""),
                name="throttling_penalty_one_per_crossing",
            ),
            models.CheckConstraint(
                condition=Q(ends_at__gte=models.F("starts_at")),
                name="throttling_penalty_ends_after_start",
                violation_error_message=_("A penalty cannot end before it starts."),
            ),
            models.CheckConstraint(
                condition=Q(level__gte=1),
                name="throttling_penalty_level_positive",
                violation_error_message=_("Levels start at 1."),
            ),
            models.CheckConstraint(
                condition=Q(lifted_at__isnull=False) | (Q(lifted_by__isnull=True) & Q(lift_reason="")),
                name="throttling_penalty_lift_fields_together",
                violation_error_message=_("Only a lifted penalty has a lifter and a reason for lifting."),
            ),
            models.CheckConstraint(
                condition=Q(action="") | Q(action__regex=ACTION_RE),
                name="throttling_penalty_action_slug",
                violation_error_message=action_validator.message,
            ),
        ]

    def __str__(self):
        scope = self.action or _("all actions")
        return _("%(user)s: level %(level)d on %(scope)s") % {"user": self.user, "level": self.level, "scope": scope}

    @property
    def is_warning(self):
        return self.ends_at == self.starts_at

    @property
    def status(self):
        now = timezone.now()
        if self.lifted_at:
            return "lifted"
        if self.is_warning:
            return "warning"
        if self.starts_at > now:
            return "scheduled"
        if self.ends_at > now:
            return "active"
        return "expired"

    @property
    def is_active(self):
        return self.status == "active"

    @property
    def reason_text(self):
        """The reason in the active language: an automatic one rendered from its code, else as typed."""
        return render_reason(self.reason_code, self.reason_params) or self.reason

    reason_text.fget.short_description = _("reason")

    def clean(self):
        if self.starts_at and self.ends_at and self.ends_at < self.starts_at:
            raise ValidationError({"ends_at": _("A penalty cannot end before it starts.")})
        if not self.lifted_at and (self.lifted_by_id or self.lift_reason):
            raise ValidationError(_("Only a lifted penalty has a lifter and a reason for lifting."))


class PenaltyEvent(models.Model):
    """Append-only audit of what happened to a penalty and who did it."""

    class Kind(models.TextChoices):
        APPLIED = "applied", _("applied")
        LIFTED = "lifted", _("lifted")
        EXPIRED = "expired", _("expired")

    penalty = models.ForeignKey(Penalty, on_delete=models.CASCADE, related_name="events", verbose_name=_("penalty"))
    kind = models.CharField(_("what happened"), max_length=16, choices=Kind.choices)
    at = models.DateTimeField(_("when"), default=timezone.now, db_index=True)
    actor = moderator_field(_("by"), help_text=_("Empty: done automatically."))
    details = models.TextField(_("details"), blank=True)

    class Meta:
        verbose_name = _("penalty event")
        verbose_name_plural = _("penalty events")
        ordering = ["at", "pk"]

    def __str__(self):
        return f"{self.get_kind_display()} {self.at:%Y-%m-%d %H:%M}"

    @property
    def actor_display(self):
        return str(self.actor) if self.actor_id else _("automatic")

    def save(self, *args, **kwargs):
        if self.pk is not None and not self._state.adding:
            raise ValueError("Penalty events are append-only; create a new one instead.")
        super().save(*args, **kwargs)
