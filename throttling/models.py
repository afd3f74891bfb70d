"""Action policies, the penalty ladder, penalties, their audit events and offence history."""

from datetime import timedelta
from decimal import Decimal

from django.conf import settings as django_settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.functional import lazy
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext, ngettext

from .conf import MAX_BUCKET_SIZE, MAX_LOG_ENTRIES, MAX_PERIOD

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
    lambda: _(
        "A sliding log allows at most %(cap)s in a period. It remembers each allowed action "
        "individually for the whole period, so larger numbers would use too much memory: "
        "choose the token bucket for this limit, or a shorter period with a smaller number "
        "(for example 100 per minute rather than 6,000 per hour)."
    )
    % {"cap": f"{MAX_LOG_ENTRIES:,}"},
    str,
)()


class Algorithm(models.TextChoices):
    SLIDING_LOG = "sliding_log", _("Sliding log (exact: never more than N in any period)")
    TOKEN_BUCKET = "token_bucket", _("Token bucket (constant memory, smooth refill, bursts up to N)")


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


class Mode(models.TextChoices):
    ENFORCE = "enforce", _("Enforce: refuse what goes over the limit")
    SHADOW = "shadow", _("Shadow: allow everything, record what would have been refused")


class Scope(models.TextChoices):
    MEMBER = "member", _("Per member (or visitor): each has their own count")
    SITE = "site", _("Site-wide: one count shared by everyone")


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
    period = period_field(help_text=_("Length of the window in seconds, e.g. 60 for a minute."))
    max_count = max_count_field(
        help_text=_("How many times a member may perform the action within any such period.")
    )
    algorithm = models.CharField(
        _("algorithm"),
        max_length=16,
        choices=Algorithm.choices,
        default=Algorithm.SLIDING_LOG,
        help_text=_(
            "Sliding log: never more than the maximum in any period, memory grows with the maximum "
            "(at most 1,000). Token bucket: the maximum at once, then one more every period ÷ maximum; "
            "a few bytes per member whatever the maximum (up to 1,000,000)."
        ),
    )
    enabled = models.BooleanField(
        _("enabled"), default=True, help_text=_("Untick to stop limiting this action without deleting it.")
    )
    mode = models.CharField(
        _("mode"),
        max_length=8,
        choices=Mode.choices,
        default=Mode.ENFORCE,
        help_text=_(
            "Shadow mode tries a limit on real traffic: nothing is refused and nobody is penalised, "
            "but every attempt the limit would have refused is counted and shown in the report as "
            "“would have refused”."
        ),
    )
    scope = models.CharField(
        _("scope"),
        max_length=8,
        choices=Scope.choices,
        default=Scope.MEMBER,
        help_text=_(
            "Site-wide limits count everyone together, e.g. at most 200 new threads a minute across the "
            "site against a raid. Members are not penalised for site-wide refusals."
        ),
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
    offence_threshold = models.PositiveIntegerField(
        _("refused attempts before a penalty"),
        null=True,
        blank=True,
        validators=[MaxValueValidator(100000)],
        help_text=OFFENCE_THRESHOLD_HELP,
    )
    offence_window = models.PositiveIntegerField(
        _("offence window (seconds)"),
        null=True,
        blank=True,
        validators=[
            MinValueValidator(1, _("The offence window must be between 1 second and 30 days.")),
            MaxValueValidator(30 * 86400, _("The offence window must be between 1 second and 30 days.")),
        ],
        help_text=OFFENCE_WINDOW_HELP,
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
                condition=Q(algorithm__in=Algorithm.values),
                name="throttling_policy_algorithm",
                violation_error_message=_("Choose the sliding log or the token bucket."),
            ),
            models.CheckConstraint(
                # The sliding log's memory grows with max_count (DESIGN trap 7).
                condition=~Q(algorithm=Algorithm.SLIDING_LOG) | Q(max_count__lte=MAX_LOG_ENTRIES),
                name="throttling_policy_log_cap",
                violation_error_message=LOG_CAP_MESSAGE,
            ),
            models.CheckConstraint(
                condition=Q(action__regex=ACTION_RE),
                name="throttling_policy_action_slug",
                violation_error_message=action_validator.message,
            ),
            models.CheckConstraint(
                condition=Q(mode__in=Mode.values), name="throttling_policy_mode",
                violation_error_message=_("Choose enforce or shadow."),
            ),
            models.CheckConstraint(
                condition=Q(scope__in=Scope.values), name="throttling_policy_scope",
                violation_error_message=_("Choose per member or site-wide."),
            ),
        ]

    def __str__(self):
        return self.action

    def save(self, *args, **kwargs):
        self.stock_default = False  # any save is an edit; only the migration writes True
        if kwargs.get("update_fields") is not None:
            kwargs["update_fields"] = {*kwargs["update_fields"], "stock_default"}
        super().save(*args, **kwargs)

    def clean(self):
        super().clean()
        if self.algorithm != Algorithm.SLIDING_LOG:
            return
        if self.max_count is not None and self.max_count > MAX_LOG_ENTRIES:
            raise ValidationError({"max_count": LOG_CAP_MESSAGE})
        if self.pk and self.windows.filter(max_count__gt=MAX_LOG_ENTRIES).exists():
            raise ValidationError({"algorithm": LOG_CAP_MESSAGE})

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
        self._check_log_cap(policy)

    def _check_log_cap(self, policy):
        if policy.algorithm == Algorithm.SLIDING_LOG and (self.max_count or 0) > MAX_LOG_ENTRIES:
            raise ValidationError({"max_count": LOG_CAP_MESSAGE})

    def save(self, *args, **kwargs):
        # A window row has no algorithm of its own, so no table constraint can
        # see its policy's; every save through the ORM checks it here instead.
        self._check_log_cap(self.policy)
        super().save(*args, **kwargs)


def describe_window(period, max_count):
    """ "6 per minute", "3 per 10 minutes": a window as a moderator reads it."""
    values = {"max": max_count}
    if period % 86400 == 0:
        values["n"] = n = period // 86400
        if n == 1:
            return gettext("%(max)d per day") % values
        return ngettext("%(max)d per %(n)d day", "%(max)d per %(n)d days", n) % values
    if period % 3600 == 0:
        values["n"] = n = period // 3600
        if n == 1:
            return gettext("%(max)d per hour") % values
        return ngettext("%(max)d per %(n)d hour", "%(max)d per %(n)d hours", n) % values
    if period % 60 == 0:
        values["n"] = n = period // 60
        if n == 1:
            return gettext("%(max)d per minute") % values
        return ngettext("%(max)d per %(n)d minute", "%(max)d per %(n)d minutes", n) % values
    values["n"] = period
    if period == 1:
        return gettext("%(max)d per second") % values
    return ngettext("%(max)d per %(n)d second", "%(max)d per %(n)d seconds", period) % values


# --- Penalties --------------------------------------------------------------

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


def multiplier_field(**kwargs):
    return models.DecimalField(
        _("multiplier"),
        max_digits=6,
        decimal_places=2,
        validators=[
            MinValueValidator(Decimal("0.01"), MULTIPLIER_MESSAGE),
            MaxValueValidator(Decimal("100"), MULTIPLIER_MESSAGE),
        ],
        **kwargs,
    )


class PolicyTier(models.Model):
    """Trust tiers: members in a group, or new members, get the policy's limits scaled."""

    policy = models.ForeignKey(ActionPolicy, on_delete=models.CASCADE, related_name="tiers")
    position = models.PositiveSmallIntegerField(
        _("position"), default=0, help_text=_("Tiers are tried in this order; the first that matches applies.")
    )
    group = models.ForeignKey(
        "auth.Group",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        verbose_name=_("group"),
        help_text=_("Members of this group. Leave empty to match any member."),
    )
    new_member_days = models.PositiveIntegerField(
        _("joined within (days)"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(3650)],
        help_text=_("Only members who joined within this many days. Leave empty for any member."),
    )
    multiplier = multiplier_field(
        help_text=_(
            "Every window’s maximum is multiplied by this (at least 1 remains): 0.5 halves it for "
            "newcomers, 3 triples it for trusted members."
        )
    )

    class Meta:
        verbose_name = _("trust tier")
        verbose_name_plural = _("trust tiers")
        ordering = ["position", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(multiplier__gte=Decimal("0.01"), multiplier__lte=Decimal("100")),
                name="throttling_tier_multiplier_range",
                violation_error_message=MULTIPLIER_MESSAGE,
            ),
        ]

    def __str__(self):
        who = []
        if self.group_id:
            who.append(_("members of %(group)s") % {"group": self.group})
        if self.new_member_days:
            who.append(_("members who joined within %(days)s days") % {"days": self.new_member_days})
        return _("%(who)s: limits × %(multiplier)s") % {
            "who": _(" and ").join(map(str, who)) if who else _("every member"),
            "multiplier": self.multiplier.normalize(),
        }


class MemberOverrideQuerySet(models.QuerySet):
    def active(self, now=None):
        now = now or timezone.now()
        return self.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now), revoked_at__isnull=True)


class MemberOverride(models.Model):
    """One member's exemption or scaled limits, for one action or all, until it expires or is revoked.

    Like penalties, overrides are never edited or deleted: each says who granted it and why, and
    ending one early records who revoked it and why.
    """

    user = models.ForeignKey(
        django_settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="throttling_overrides",
        verbose_name=_("member"),
    )
    action = models.CharField(
        _("action"),
        max_length=64,
        blank=True,
        validators=[action_validator],
        help_text=_("Leave empty for every action."),
    )
    exempt = models.BooleanField(_("exempt"), default=False, help_text=_("Not limited at all."))
    multiplier = multiplier_field(
        null=True, blank=True, help_text=_("Or: this member’s limits multiplied by this, e.g. 2.")
    )
    reason = models.TextField(_("reason"), help_text=_("Why this member is treated differently (kept for the record)."))
    created_at = models.DateTimeField(_("granted"), default=timezone.now, editable=False)
    created_by = moderator_field(_("granted by"), editable=False)
    expires_at = models.DateTimeField(_("expires"), null=True, blank=True, help_text=_("Leave empty to keep it until revoked."))
    revoked_at = models.DateTimeField(_("revoked"), null=True, blank=True, editable=False)
    revoked_by = moderator_field(_("revoked by"), editable=False)
    revoke_reason = models.TextField(_("reason for revoking"), blank=True, editable=False)

    objects = MemberOverrideQuerySet.as_manager()

    class Meta:
        verbose_name = _("member override")
        verbose_name_plural = _("member overrides")
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(exempt=True) & Q(multiplier__isnull=True)) | (Q(exempt=False) & Q(multiplier__isnull=False)),
                name="throttling_override_exempt_or_multiplier",
                violation_error_message=_("Either exempt the member or give a multiplier, not both."),
            ),
        ]

    def __str__(self):
        what = _("exempt") if self.exempt else _("limits × %(m)s") % {"m": (self.multiplier or 0).normalize()}
        return _("%(member)s, %(action)s: %(what)s") % {
            "member": self.user, "action": self.action or _("all actions"), "what": what,
        }

    def clean(self):
        super().clean()
        if self.exempt and self.multiplier is not None:
            raise ValidationError(_("Either exempt the member or give a multiplier, not both."))
        if not self.exempt and self.multiplier is None:
            raise ValidationError({"multiplier": _("Give a multiplier, or tick “exempt”.")})
        if not (self.reason or "").strip():
            raise ValidationError({"reason": _("Say why, for the record.")})

    @property
    def in_force(self):
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > timezone.now())


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
        help_text=_("How long the restriction lasts, e.g. “00:15:00” for 15 minutes or “7 00:00:00” for 7 days. 0 is a warning: nothing is blocked."),
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
        from .conf import settings

        now = now or timezone.now()
        days = settings.FORGIVENESS_DAYS if forgiveness_days is None else forgiveness_days
        return self.filter(user=user, lifted_at__isnull=True, starts_at__gt=now - timedelta(days=days))


class Penalty(models.Model):
    """A restriction of one member: one action, or all actions when `action` is blank.

    The database row is the truth; Redis holds a mirror (with a TTL ending with
    the penalty) so the decision script refuses the member in its single call.
    """

    user = models.ForeignKey(
        django_settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="throttling_penalties", verbose_name=_("member")
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
    automatic = models.BooleanField(_("automatic"), default=False, help_text=_("Applied by the penalty ladder, not by a moderator."))
    lifted_at = models.DateTimeField(_("lifted"), null=True, blank=True)
    lifted_by = moderator_field(_("lifted by"))
    lift_reason = models.TextField(_("reason for lifting"), blank=True)
    expired_at = models.DateTimeField(
        _("expiry recorded"), null=True, blank=True, editable=False,
        help_text=_("When the end of this penalty was recorded (the member was free from its end time on)."),
    )
    # The offence run that caused an automatic penalty: the same run delivered
    # twice can only ever make one row (the task's idempotency, issue 3).
    crossing = models.CharField(_("offence run"), max_length=64, blank=True, editable=False)

    objects = PenaltyQuerySet.as_manager()

    class Meta:
        verbose_name = _("penalty")
        verbose_name_plural = _("penalties")
        ordering = ["-starts_at", "-pk"]
        permissions = [("lift_penalty", _("Can lift penalties"))]
        indexes = [models.Index(fields=["user", "starts_at"], name="throttling_penalty_user_start")]
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
        from .penalties import render_reason

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


class OffenceRecord(models.Model):
    """Refused attempts per identity, action and hour, for the report.

    Written by a Celery task in batches (throttling.tasks.record_offences),
    never once per refused request.
    """

    identity = models.CharField(_("identity"), max_length=128)
    user = models.ForeignKey(
        django_settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("member"),
        db_constraint=False,
    )
    action = models.CharField(_("action"), max_length=64)
    hour = models.DateTimeField(_("hour"))
    count = models.PositiveIntegerField(_("refused attempts"), default=0)
    shadow = models.BooleanField(
        _("shadow"), default=False, help_text=_("Attempts a policy in shadow mode would have refused (and let through).")
    )

    class Meta:
        verbose_name = _("offence record")
        verbose_name_plural = _("offence records")
        ordering = ["-hour"]
        # Covers the report's queries (per hour and action, top identities):
        # they read the index alone, without visiting the table.
        indexes = [
            models.Index(fields=["hour", "action", "identity", "count", "user"], name="throttling_offence_report")
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["identity", "action", "hour", "shadow"], name="throttling_offence_unique_hour_mode"
            ),
        ]

    def __str__(self):
        return f"{self.identity} {self.action} {self.hour:%Y-%m-%d %H:00}: {self.count}"
