"""Offence and penalty rows as the report and its charts are tested with."""

from datetime import datetime, timedelta
from datetime import time as clock

from django.utils import timezone

from throttling.models import Penalty


def day_start(days_ago, hour=0):
    """An hour of a day counted back from today, in the site's time zone (midnight is never in the future)."""
    day = timezone.localdate() - timedelta(days=days_ago)
    return timezone.make_aware(datetime.combine(day, clock(hour)))


def penalty(user, starts_at, length, *, level=2, **fields):
    """A penalty row as the ladder or a moderator leaves it; a length of 0 is a warning."""
    return Penalty.objects.create(user=user, level=level, starts_at=starts_at, ends_at=starts_at + length, **fields)
