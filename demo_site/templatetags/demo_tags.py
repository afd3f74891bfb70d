import math
from datetime import timedelta

from django import template
from django.utils import timezone
from django.utils.timesince import timesince
from django.utils.translation import gettext

from throttling.models import Penalty
from throttling.penalties import standing
from throttling.text import local_time

register = template.Library()


@register.filter
def ceil(value):
    """Whole seconds, rounded up like the Retry-After header: a wait of 0.2 s reads "1"."""
    try:
        return max(1, math.ceil(float(value)))
    except (TypeError, ValueError):
        return ""


@register.filter
def ago(value):
    """ "just now" rather than timesince's "0 minutes ago" for what happened a moment ago."""
    if (timezone.now() - value).total_seconds() < 60:
        return gettext("just now")
    return gettext("%(time)s ago") % {"time": timesince(value)}


@register.simple_tag(takes_context=True)
def penalty_notices(context):
    """The signed-in member's penalties in force (longest first), then a warning of the last 24 hours.

    A tag rather than a context processor, so only the demo's own pages (not
    the admin) query them.
    """
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return []
    now = timezone.now()
    in_force = list(Penalty.objects.active(now).filter(user=user).order_by("-ends_at")[:3])
    notices = []
    for penalty in in_force:
        scope = f"use “{penalty.action}”" if penalty.action else "do anything that is limited"
        notices.append(
            {
                "kind": "restricted",
                "penalty": penalty,
                "text": f"You cannot {scope} until {local_time(penalty.ends_at)} (level {penalty.level}).",
            }
        )
    # A warning matters while it is the last word: a later penalty supersedes it.
    latest = Penalty.objects.filter(user=user, lifted_at__isnull=True).order_by("-starts_at", "-pk").first()
    if latest is not None and latest.is_warning and latest.starts_at > now - timedelta(hours=24):
        _, rung = standing(user, now)
        after = f" If it happens again, the next step is “{rung.name}”." if rung and not rung.is_warning else ""
        notices.append(
            {
                "kind": "warning",
                "penalty": latest,
                "text": f"You were warned {ago(latest.starts_at)} for hitting the “{latest.action or 'site'}” "
                f"limit again and again.{after}",
            }
        )
    return notices
