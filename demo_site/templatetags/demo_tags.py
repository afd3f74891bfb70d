import math

from django import template
from django.utils import timezone
from django.utils.timesince import timesince
from django.utils.translation import gettext

from throttling.common.words import local_time
from throttling.models import Penalty

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
    """The signed-in member's penalties in force (longest first), on every page while they last.

    A tag rather than a context processor, so only the demo's own pages (not
    the admin) query them. A new penalty, a warning included, is also told once
    as a message (throttling.notices.PenaltyNoticeMiddleware).
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
    return notices
