"""Action policies and their extra windows: the rows moderators edit in the admin."""

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models, transaction
from django.db.models import Q
from django.utils.functional import lazy
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from .conf import MAX_LOG_ENTRIES, MAX_PERIOD

ACTION_RE = r"^[a-z0-9_-]+\Z"

action_validator = RegexValidator(
    ACTION_RE,
    _("Use only lowercase letters, digits, hyphens and underscores, e.g. “reply” or “send-message”."),
)
PERIOD_MESSAGE = _("The period must be between 1 second and 366 days (31,622,400 seconds).")
MAX_COUNT_MESSAGE = lazy(
    lambda: _(
        "The maximum must be between 1 and %(cap)s. Each allowed action is remembered "
        "individually for the whole period, so larger numbers would use too much memory; "
        "use a shorter period with a smaller number instead (for example 100 per minute "
        "rather than 6,000 per hour)."
    )
    % {"cap": f"{MAX_LOG_ENTRIES:,}"},
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
            MaxValueValidator(MAX_LOG_ENTRIES, MAX_COUNT_MESSAGE),
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
            condition=Q(max_count__gte=1, max_count__lte=MAX_LOG_ENTRIES),
            name=f"{prefix}_max_count_range",
            violation_error_message=MAX_COUNT_MESSAGE,
        ),
    ]


class ActionPolicyManager(models.Manager):
    def create(self, **kwargs):
        # The migration's starting policies for reply/post/like are placeholders:
        # until someone edits one, a project that creates its own policy for
        # that action in code (or its own migration) replaces it.
        with transaction.atomic(using=self.db):
            if kwargs.get("action"):
                self.filter(action=kwargs["action"], stock_default=True).delete()
            return super().create(**kwargs)


class ActionPolicy(models.Model):
    class BackendFailure(models.TextChoices):
        DEFAULT = "default", _("Use the site setting (THROTTLING_FAIL_OPEN)")
        OPEN = "open", _("Allow the action (fail open)")
        CLOSED = "closed", _("Refuse the action (fail closed)")

    action = models.CharField(
        _("action"),
        max_length=64,
        unique=True,
        validators=[action_validator],
        help_text=_("The name views use, e.g. “reply”: lowercase letters, digits, “-” and “_”."),
    )
    period = period_field(help_text=_("Length of the sliding window in seconds, e.g. 60 for a minute."))
    max_count = max_count_field(
        help_text=_("How many times a member may perform the action within any such period.")
    )
    enabled = models.BooleanField(
        _("enabled"), default=True, help_text=_("Untick to stop limiting this action without deleting it.")
    )
    description = models.TextField(_("description"), blank=True)
    verb = models.CharField(
        _("verb for messages"),
        max_length=64,
        blank=True,
        help_text=_(
            "Past tense shown to members: “You have <em>replied</em> too often.” "
            "Leave blank to name the action instead."
        ),
    )
    exempt_staff = models.BooleanField(
        _("exempt staff"),
        default=True,
        help_text=_("Staff members and superusers are not limited by this policy."),
    )
    on_backend_failure = models.CharField(
        _("when Redis is unavailable"),
        max_length=8,
        choices=BackendFailure.choices,
        default=BackendFailure.DEFAULT,
    )
    updated_at = models.DateTimeField(_("updated"), auto_now=True)
    stock_default = models.BooleanField(
        _("unedited default"),
        default=False,
        editable=False,
        help_text=_("Created by the app’s migration and not edited since."),
    )

    objects = ActionPolicyManager()

    class Meta:
        verbose_name = _("action policy")
        verbose_name_plural = _("action policies")
        ordering = ["action"]
        constraints = [
            *window_constraints("throttling_policy"),
            models.CheckConstraint(
                condition=Q(action__regex=ACTION_RE),
                name="throttling_policy_action_slug",
                violation_error_message=action_validator.message,
            ),
        ]

    def __str__(self):
        return self.action

    def save(self, *args, **kwargs):
        self.stock_default = False  # any save is an edit; only the migration writes True
        if kwargs.get("update_fields") is not None:
            kwargs["update_fields"] = {*kwargs["update_fields"], "stock_default"}
        super().save(*args, **kwargs)

    def windows_display(self):
        parts = [(self.period, self.max_count)]
        parts += [(w.period, w.max_count) for w in self.windows.all()]
        return ", ".join(describe_window(p, m) for p, m in sorted(parts))

    windows_display.short_description = _("limits")


class ActionWindow(models.Model):
    """An extra window of a policy: all windows must admit a request (all-or-nothing)."""

    policy = models.ForeignKey(
        ActionPolicy, on_delete=models.CASCADE, related_name="windows", verbose_name=_("policy")
    )
    period = period_field()
    max_count = max_count_field()

    class Meta:
        verbose_name = _("extra window")
        verbose_name_plural = _("extra windows")
        ordering = ["period"]
        constraints = [
            *window_constraints("throttling_window"),
            models.UniqueConstraint(
                fields=["policy", "period"],
                name="throttling_window_unique_period",
                violation_error_message=_("This policy already has a window of that period."),
            ),
        ]

    def __str__(self):
        return describe_window(self.period, self.max_count)

    def clean(self):
        try:
            policy = self.policy
        except ActionPolicy.DoesNotExist:
            return
        if self.period == policy.period:
            raise ValidationError(
                {"period": _("The policy’s main limit already uses this period; choose another.")}
            )


_UNITS = (
    (86400, "%(max)d per day", "%(max)d per %(n)d days"),
    (3600, "%(max)d per hour", "%(max)d per %(n)d hours"),
    (60, "%(max)d per minute", "%(max)d per %(n)d minutes"),
    (1, "%(max)d per second", "%(max)d per %(n)d seconds"),
)


def describe_window(period, max_count):
    """ "6 per minute", "3 per 10 minutes": a window as a moderator reads it."""
    for seconds, one, many in _UNITS:
        if period % seconds == 0:
            n = period // seconds
            return ngettext(one, many, n) % {"max": max_count, "n": n}
