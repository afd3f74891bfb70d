"""Action policies, their extra windows, trust tiers and member overrides: the rows moderators edit."""

from decimal import Decimal

from django.conf import settings as django_settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from ..common.choices import Algorithm, Mode, OnBackendFailure, Scope
from ..common.words import describe_window
from ..conf import MAX_LOG_ENTRIES
from . import content, held
from .fields import (
    ACTION_RE,
    LOG_CAP_MESSAGE,
    MULTIPLIER_MESSAGE,
    OFFENCE_THRESHOLD_HELP,
    OFFENCE_WINDOW_HELP,
    action_validator,
    max_count_field,
    moderator_field,
    multiplier_field,
    period_field,
    window_constraints,
)


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
    BackendFailure = OnBackendFailure

    action = models.CharField(
        _("action"),
        max_length=64,
        unique=True,
        validators=[action_validator],
        help_text=_("The name views use, e.g. “reply”: lowercase letters, digits, “-” and “_”."),
    )
    period = period_field(help_text=_("Length of the window in seconds, e.g. 60 for a minute."))
    max_count = max_count_field(help_text=_("How many times a member may perform the action within any such period."))
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
    same_content_max = content.max_field()
    same_content_members = content.members_field()
    same_content_period = content.period_field()
    # Held for review (see Guide › Held for review): what a repeat or a wave gets, and how many of a
    # member's held posts must be approved before their posts are no longer held.
    same_content_answer = held.answer_field()
    hold_until_approved = held.hold_until_field()
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
                # The sliding log's memory grows with max_count (see Architecture › Bounded memory).
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
                condition=Q(mode__in=Mode.values),
                name="throttling_policy_mode",
                violation_error_message=_("Choose enforce or shadow."),
            ),
            models.CheckConstraint(
                condition=Q(scope__in=Scope.values),
                name="throttling_policy_scope",
                violation_error_message=_("Choose per member or site-wide."),
            ),
            *content.constraints(),
            held.answer_constraint(),
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
        content.clean(self)
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

    policy = models.ForeignKey(ActionPolicy, on_delete=models.CASCADE, related_name="windows", verbose_name=_("policy"))
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
            raise ValidationError({"period": _("The policy’s main limit already uses this period; choose another.")})
        self._check_log_cap(policy)

    def _check_log_cap(self, policy):
        if policy.algorithm == Algorithm.SLIDING_LOG and (self.max_count or 0) > MAX_LOG_ENTRIES:
            raise ValidationError({"max_count": LOG_CAP_MESSAGE})

    def save(self, *args, **kwargs):
        # A window row has no algorithm of its own, so no table constraint can
        # see its policy's; every save through the ORM checks it here instead.
        self._check_log_cap(self.policy)
        super().save(*args, **kwargs)


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


REASON_MESSAGE = _("Say why, for the record.")


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
    expires_at = models.DateTimeField(
        _("expires"), null=True, blank=True, help_text=_("Leave empty to keep it until revoked.")
    )
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
                condition=(Q(exempt=True) & Q(multiplier__isnull=True))
                | (Q(exempt=False) & Q(multiplier__isnull=False)),
                name="throttling_override_exempt_or_multiplier",
                violation_error_message=_("Either exempt the member or give a multiplier, not both."),
            ),
            models.CheckConstraint(
                # A character that is not white space, so "" and "   " are refused
                # however the row is written (create, update, loaddata).
                condition=Q(reason__regex=r"\S"),
                name="throttling_override_reason",
                violation_error_message=REASON_MESSAGE,
            ),
        ]

    def __str__(self):
        what = _("exempt") if self.exempt else _("limits × %(m)s") % {"m": (self.multiplier or 0).normalize()}
        return _("%(member)s, %(action)s: %(what)s") % {
            "member": self.user,
            "action": self.action or _("all actions"),
            "what": what,
        }

    def clean(self):
        super().clean()
        if self.exempt and self.multiplier is not None:
            raise ValidationError(_("Either exempt the member or give a multiplier, not both."))
        if not self.exempt and self.multiplier is None:
            raise ValidationError({"multiplier": _("Give a multiplier, or tick “exempt”.")})
        if not (self.reason or "").strip():
            raise ValidationError({"reason": REASON_MESSAGE})

    @property
    def in_force(self):
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > timezone.now())
