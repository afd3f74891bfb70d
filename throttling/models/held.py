"""Posts held for review: saved, hidden, and queued until a moderator approves or rejects them."""

from django.conf import settings as django_settings
from django.contrib.contenttypes.fields import GenericForeignKey
from django.contrib.contenttypes.models import ContentType
from django.core.serializers.json import DjangoJSONEncoder
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from ..common.choices import ContentAnswer, HeldStatus, Reason

# How much of the text a member sent the queue shows.
EXCERPT_MAX = 200
# Why a decision holds (Decision.reason of a held decision), as the queue says it.
HELD_REASONS = (
    (Reason.DUPLICATE.value, _("repeated content")),
    (Reason.BLOCKED.value, _("a block that holds")),
    (Reason.NEW_MEMBER.value, _("new member")),
)

HOLD_UNTIL_MESSAGE = _("Hold a member’s posts until between 1 and 100 of them were approved, or leave it blank.")


def answer_field():
    """ActionPolicy.same_content_answer: what a repeat or a wave gets."""
    return models.CharField(
        _("answer to repeated content"),
        max_length=8,
        choices=ContentAnswer.choices,
        default=ContentAnswer.REFUSE,
        help_text=_("Hold: the post is saved but hidden until a moderator approves it (Throttling › Held for review)."),
    )


def answer_constraint():
    return models.CheckConstraint(
        condition=Q(same_content_answer__in=ContentAnswer.values),
        name="throttling_policy_same_content_answer",
        violation_error_message=_("Choose refuse or hold."),
    )


def hold_until_field():
    """ActionPolicy.hold_until_approved: a member's posts are held until this many were approved."""
    return models.PositiveSmallIntegerField(
        _("hold until approved"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1, HOLD_UNTIL_MESSAGE), MaxValueValidator(100, HOLD_UNTIL_MESSAGE)],
        help_text=_(
            "A member’s posts are held for review until this many of their held posts were approved; "
            "visitors who are not signed in are always held. Blank: never."
        ),
    )


class HeldQuerySet(models.QuerySet):
    def pending(self):
        return self.filter(status=HeldStatus.PENDING)


class Held(models.Model):
    """One post held for review (see Guide › Held for review); `hidden` remembers what hiding changed."""

    user = models.ForeignKey(
        django_settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("member"),
    )
    identity = models.CharField(_("identity"), max_length=200, help_text=_("Who posted, as the limits count them."))
    action = models.CharField(_("action"), max_length=64, db_index=True)
    reason = models.CharField(_("held because"), max_length=16, choices=HELD_REASONS, db_index=True)
    status = models.CharField(
        _("status"), max_length=8, choices=HeldStatus.choices, default=HeldStatus.PENDING, db_index=True
    )
    content_type = models.ForeignKey(ContentType, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    object_id = models.CharField(_("object id"), max_length=64, blank=True)
    content_object = GenericForeignKey("content_type", "object_id")
    excerpt = models.CharField(_("excerpt"), max_length=EXCERPT_MAX, blank=True)
    # {field: value before hiding}: what approve() puts back.
    hidden = models.JSONField(_("hidden fields"), default=dict, blank=True, encoder=DjangoJSONEncoder)
    created_at = models.DateTimeField(_("held at"), auto_now_add=True, db_index=True)
    decided_by = models.ForeignKey(
        django_settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("decided by"),
    )
    decided_at = models.DateTimeField(_("decided at"), null=True, blank=True)
    note = models.TextField(_("why rejected"), blank=True)

    objects = HeldQuerySet.as_manager()

    class Meta:
        verbose_name = _("post held for review")
        verbose_name_plural = _("held for review")
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["user", "action", "status"], name="throttling_held_member")]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=HeldStatus.values), name="throttling_held_status"),
        ]

    def __str__(self):
        return f"{self.action} · {self.get_status_display()}"

    @property
    def is_pending(self):
        return self.status == HeldStatus.PENDING
