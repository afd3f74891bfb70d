"""Alerts: what moderators were told about, once per event, and when it went out by mail."""

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from ..common.alert_words import alert_sentence
from ..common.choices import AlertKind


class Alert(models.Model):
    """One event moderators hear about (a surge started or ended, a member reaching a high rung, a
    block's first refusal): sent as the `alert` signal when it happens, and mailed in a digest."""

    kind = models.CharField(_("kind"), max_length=16, choices=AlertKind.choices)
    params = models.JSONField(_("details"), default=dict, blank=True)
    created_at = models.DateTimeField(_("when"), default=timezone.now, editable=False)
    mailed_at = models.DateTimeField(_("mailed"), null=True, blank=True, editable=False)
    # The digest that claimed it: the mail that carries it is sent by whoever claimed it.
    digest = models.CharField(max_length=32, blank=True, editable=False)

    class Meta:
        verbose_name = _("alert")
        verbose_name_plural = _("alerts")
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["mailed_at", "created_at"], name="throttling_alert_mail")]

    def __str__(self):
        return self.sentence

    @property
    def sentence(self):
        """What it says, in the active language and time zone."""
        return alert_sentence(self.kind, self.params)
