import math

from django import template
from django.utils import timezone
from django.utils.timesince import timesince

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
        return "just now"
    return f"{timesince(value)} ago"
