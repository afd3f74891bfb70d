"""Offence history: refused attempts per identity, action and hour, for the report."""

from django.conf import settings as django_settings
from django.db import models
from django.utils.translation import gettext_lazy as _


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
        _("shadow"),
        default=False,
        help_text=_("Attempts a policy in shadow mode would have refused (and let through)."),
    )
    blocked = models.BooleanField(
        _("blocked"),
        default=False,
        help_text=_("Requests a block refused (decided without Redis; they never count towards a penalty)."),
    )
    duplicate = models.BooleanField(
        _("repeated content"),
        default=False,
        help_text=_("Attempts refused because the same content was posted again, by the member or by a wave."),
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
                fields=["identity", "action", "hour", "shadow", "blocked", "duplicate"],
                name="throttling_offence_unique_hour_reason",
            ),
        ]

    def __str__(self):
        return f"{self.identity} {self.action} {self.hour:%Y-%m-%d %H:00}: {self.count}"
