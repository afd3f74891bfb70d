"""What the browser tests share: the system Chromium, and a month of a community's offences and penalties."""

import shutil
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.support.report import day_start, penalty
from throttling.engine.identity import member_identity
from throttling.models import OffenceRecord

CHARTS = ("offences-per-day", "offences-per-action", "penalties-per-day")
ACTIONS = ("reply", "post", "like", "flag", "message")


def chromium():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail(
            "The browser test needs Chromium on PATH: install Debian's package with "
            "`apt-get update && apt-get install -y chromium` (`make test` does this when run as root)."
        )
    return path


def community(django_user_model, moderator):
    """A month of offences by members and anonymous visitors, and penalties of every kind."""
    names = ("alice", "bob", "carol", "dave", "erin", "frank")
    members = [django_user_model.objects.create_user(name) for name in names]
    rows = []

    def offence(identity, action, hour, count, user=None):
        return OffenceRecord(identity=identity, action=action, hour=hour, count=count, user=user)

    for day in range(30):
        for m, user in enumerate(members):
            for a, action in enumerate(ACTIONS):
                n = (day * 7 + m * 5 + a * 3) % 11 - m - a
                if n > 0:
                    n += 4 if day % 9 == 2 else 0  # a bad day now and then
                    rows.append(offence(member_identity(user.pk), action, day_start(day, 9 + a), n, user))
        for v in range(3):
            rows.append(offence(f"ip:198.51.100.{v + 10}", "post", day_start(day, 20), (day + v) % 5 + 1))
    OffenceRecord.objects.bulk_create(rows)
    now, hour = timezone.now(), timedelta(hours=1)
    for day in range(0, 30, 2):
        user = members[day % 3]
        start = day_start(day, 10)
        penalty(user, start, timedelta(0), level=1, action="reply", automatic=True)
        if day % 4 == 0:
            penalty(user, start + hour, timedelta(minutes=15), action="reply", automatic=True)
        if day % 6 == 0:
            penalty(members[3], start + 3 * hour, hour, level=3, action="post")
    penalty(members[0], now - 2 * hour, 24 * hour, level=4, action="reply", automatic=True)
    penalty(members[1], now - 24 * hour, 7 * 24 * hour, level=5, automatic=True)
    penalty(members[3], now - timedelta(minutes=20), hour, level=3, action="post", reason="Spam links.")
    start = day_start(5, 14)
    penalty(
        members[4],
        start,
        hour,
        level=3,
        action="like",
        automatic=True,
        lifted_at=start + timedelta(minutes=10),
        lifted_by=moderator,
        lift_reason="The shared link was fine.",
    )
