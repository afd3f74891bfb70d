"""Alerts: each event recorded once, sent as the `alert` signal, and mailed to the moderators in digests.

A digest goes out at most once per THROTTLING_ALERT_DIGEST seconds: the first alert after a quiet
spell is mailed at once, those that follow within the interval wait and go together in the next
mail (see Raids › Alerts). Mail is sent by a Celery task, never by the request or task that raised
the alert.
"""

import logging
import uuid
from datetime import timedelta

from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Exists, Q
from django.utils import timezone, translation
from django.utils.formats import time_format
from django.utils.translation import gettext, ngettext

from .. import signals
from ..common.alert_words import alert_subject
from ..conf import settings
from ..engine.background.task_sender import sender as task_sender
from ..engine.moderators import custom, is_moderator
from ..models import Alert

logger = logging.getLogger("throttling")

MAIL_TASK = "throttling.tasks.mail_alerts"
# The permission that makes a staff member one of the moderators mailed, when neither
# THROTTLING_ALERT_EMAILS nor THROTTLING_MODERATORS names them.
ALERT_PERMISSION = "throttling.view_alert"


def tell(kind, **params):
    """Record an event moderators must hear about; the signal goes once the transaction commits."""
    alert = Alert.objects.create(kind=kind, params=params)

    # A function, never a partial: Django names a robust on-commit callback that raised by its
    # __qualname__, which a partial lacks (the AttributeError would escape from the commit, and
    # the callbacks after it, the surges' change among them, would never run).
    def announce_alert():
        announce(alert)

    transaction.on_commit(announce_alert, robust=True)
    return alert


def announce(alert):
    """Send the `alert` signal about `alert` (on commit); the sentence is in the site's language.

    Every receiver hears it: one that raises is logged (by Django) and stops neither the others
    (the digest mail among them) nor what raised the alert."""
    with translation.override(django_settings.LANGUAGE_CODE):
        sentence = alert.sentence
    signals.alert.send_robust(sender=Alert, kind=str(alert.kind), sentence=sentence, params=alert.params, alert=alert)


def mail_soon(sender=None, **kwargs):
    """Receiver of the `alert` signal: have the digest task look at what waits (off this thread)."""
    if settings.ALERT_EMAILS == []:
        return
    task_sender.send(MAIL_TASK, ())


def moderator_emails():
    """Who is mailed: THROTTLING_ALERT_EMAILS when set; else the active staff with an email address who
    moderate (THROTTLING_MODERATORS when set, else those with the permission throttling.view_alert,
    superusers included)."""
    if settings.ALERT_EMAILS is not None:
        return list(dict.fromkeys(settings.ALERT_EMAILS))
    model = get_user_model()
    field = model.get_email_field_name()
    staff = model._default_manager.filter(Q(is_staff=True) | Q(is_superuser=True), is_active=True).exclude(
        **{field: ""}
    )
    found = []
    for user in staff.exclude(**{f"{field}__isnull": True}).order_by("pk"):
        if is_moderator(user) if custom() else user.has_perm(ALERT_PERMISSION):
            found.append(getattr(user, field))
    return list(dict.fromkeys(found))


def mail_due(now=None):
    """Mail the alerts that wait, in one digest, unless a digest went out less than
    THROTTLING_ALERT_DIGEST seconds before `now`. Returns (alerts mailed, seconds until the next
    digest may go when some still wait, else None)."""
    now = now or timezone.now()
    interval = timedelta(seconds=settings.ALERT_DIGEST)
    waiting = Alert.objects.filter(mailed_at__isnull=True, created_at__lte=now)
    recent = Alert.objects.filter(mailed_at__gt=now - interval, mailed_at__lte=now)
    token = uuid.uuid4().hex
    # One UPDATE claims what waits, only when no digest went out within the interval: two workers
    # at once cannot both claim an alert, and the later finds the earlier's digest.
    claimed = waiting.filter(~Exists(recent))
    count = claimed.update(mailed_at=now, digest=token)
    if not count:
        if not waiting.exists():
            return 0, None
        last = recent.order_by("-mailed_at").values_list("mailed_at", flat=True).first()
        wait = (last + interval - now).total_seconds() if last else 0.0
        return 0, max(1.0, wait)
    alerts = list(Alert.objects.filter(digest=token).order_by("created_at", "pk"))
    try:
        _send_digest(alerts)
    except Exception:
        # Not lost: unclaimed, they go with the next digest (the task is retried).
        Alert.objects.filter(digest=token).update(mailed_at=None, digest="")
        raise
    return len(alerts), None


def _send_digest(alerts):
    recipients = moderator_emails()
    if not recipients:
        logger.warning(
            "throttling: %d alert(s) not mailed: no moderator has an email address (THROTTLING_ALERT_EMAILS)",
            len(alerts),
        )
        return
    with translation.override(django_settings.LANGUAGE_CODE):
        subject, body = digest_text(alerts)
    send_mail(subject, body, None, recipients)


def digest_text(alerts):
    """(subject, body) of a digest, in the active language and time zone."""
    lines = [
        ngettext(
            "%(n)d event since the last mail:",
            "%(n)d events since the last mail:",
            len(alerts),
        )
        % {"n": len(alerts)},
        "",
    ]
    for alert in alerts:
        moment = timezone.localtime(alert.created_at)
        lines.append(
            gettext("- %(time)s: %(sentence)s")
            % {"time": time_format(moment, "H:i") + " " + moment.tzname(), "sentence": alert.sentence}
        )
    minutes = max(1, round(settings.ALERT_DIGEST / 60))
    lines += [
        "",
        ngettext(
            "Moderators get at most one such mail every %(minutes)d minute; events that happen meanwhile "
            "wait for the next one. The alerts are listed in the admin under Throttling › Alerts.",
            "Moderators get at most one such mail every %(minutes)d minutes; events that happen meanwhile "
            "wait for the next one. The alerts are listed in the admin under Throttling › Alerts.",
            minutes,
        )
        % {"minutes": minutes},
    ]
    return alert_subject(len(alerts)), "\n".join(lines) + "\n"
