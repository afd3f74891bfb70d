"""The report's queries: each aggregates in the database (one GROUP BY per figure) and returns a
bounded number of rows, so the page costs the same handful of queries whatever the history holds."""

from dataclasses import dataclass
from datetime import datetime, time, timedelta
from urllib.parse import unquote

from django.contrib.auth import get_user_model
from django.db.models import Count, Max, Q, Sum, Window
from django.db.models.functions import TruncDate
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from ...models import RESTRICTING, WARNING, OffenceRecord, Penalty
from ...replayer.replays import last_days

PERIODS = (7, 30, 90)
DEFAULT_DAYS = 30
TOP_OFFENDERS = 20
PENALTY_SERIES = (
    ("warning", _("warnings"), "#f2c14e"),
    ("automatic", _("automatic penalties"), "#c0392b"),
    ("moderator", _("penalties by moderators"), "#6a3d9a"),
)


@dataclass(frozen=True)
class Period:
    days: int
    start: datetime  # midnight, in the current time zone, of the first day
    end: datetime  # midnight after today
    dates: tuple

    @classmethod
    def last(cls, days, now=None):
        # "The last N days" as the replay reads them too (the command, the API): today and the N - 1
        # days before it, from midnight in the site's time zone.
        start, now = last_days(days, now or timezone.now())
        today = timezone.localdate(now)
        first = today - timedelta(days=days - 1)
        tz = timezone.get_current_timezone()
        end = timezone.make_aware(datetime.combine(today + timedelta(days=1), time.min), tz)
        return cls(days, start, end, tuple(first + timedelta(days=i) for i in range(days)))


def parse_days(raw):
    """Return (days, error for the moderator or None) for the ?days= parameter."""
    if raw in (None, ""):
        return DEFAULT_DAYS, None
    try:
        days = int(raw)
    except (TypeError, ValueError):
        days = None
    if days not in PERIODS:
        return DEFAULT_DAYS, gettext("“%(value)s” is not a period this report offers: choose %(choices)s days.") % {
            "value": raw,
            "choices": ", ".join(str(p) for p in PERIODS),
        }
    return days, None


def shadow_label(action):
    return gettext("%(action)s, would have refused (shadow)") % {"action": action}


def blocked_label(action):
    return gettext("%(action)s, refused by blocks") % {"action": action}


def duplicate_label(action):
    return gettext("%(action)s, repeated content") % {"action": action}


def offences_by_day(period):
    """[(day, action, offences)] of the period, ordered by day then action (see offence_rows)."""
    return [(day, action, n) for day, action, n, _apart in offence_rows(period)]


def offence_rows(period):
    """[(day, action, offences, set apart)] of the period, ordered by day then action; set apart: refusals
    by blocks and would-be refusals of shadow policies, which are not offences (they never count towards
    a penalty) and are drawn apart from them.

    The database sums per hour and action (rows are already hourly, and the
    (hour, action) index serves the GROUP BY); hours become days of the site's
    time zone here, over at most 24 × days × actions sums. Truncating every row
    to a date in SQL instead costs a function call per row: on SQLite a Python
    one, ten times slower at 100,000 rows.
    """
    hourly = (
        OffenceRecord.objects.filter(hour__gte=period.start, hour__lt=period.end)
        .values_list("hour", "action", "shadow", "blocked", "duplicate")
        .annotate(offences=Sum("count"))
        .order_by()
    )
    daily = {}
    apart = set()
    for hour, action, shadow, blocked, duplicate, n in hourly:
        if blocked:
            # Refused by a block, not by a limit: shown apart (they never count towards a penalty).
            action = blocked_label(action)
        elif shadow:
            # A policy in shadow mode refused nobody: shown apart, as what it would have refused.
            action = shadow_label(action)
        elif duplicate:
            # Refused for the same content again (a member's repeat or a wave): its own series.
            action = duplicate_label(action)
        key = (timezone.localdate(hour), action)
        daily[key] = daily.get(key, 0) + n
        if blocked or shadow:
            apart.add(action)
    return [(day, action, n, action in apart) for (day, action), n in sorted(daily.items())]


def penalties_by_day(period, now=None):
    """[(day, kind, penalties)] of penalties that started in the period; kind as in PENALTY_SERIES."""
    now = now or timezone.now()
    rows = (
        Penalty.objects.filter(starts_at__gte=period.start, starts_at__lt=min(period.end, now))
        .annotate(day=TruncDate("starts_at"))
        .values("day")
        .annotate(
            # Not named after the series: "automatic" is also a field the filters read.
            n_warning=Count("pk", filter=WARNING),
            n_automatic=Count("pk", filter=RESTRICTING & Q(automatic=True)),
            n_moderator=Count("pk", filter=RESTRICTING & Q(automatic=False)),
        )
        .order_by("day")
    )
    return [(row["day"], kind, row[f"n_{kind}"]) for row in rows for kind, _l, _c in PENALTY_SERIES if row[f"n_{kind}"]]


def penalty_totals(period, now=None):
    now = now or timezone.now()
    started = Q(starts_at__gte=period.start, starts_at__lt=min(period.end, now))
    restricting = started & RESTRICTING
    lifted = Q(lifted_at__gte=period.start, lifted_at__lt=period.end)
    return Penalty.objects.filter(started | lifted).aggregate(
        applied=Count("pk", filter=restricting),
        warnings=Count("pk", filter=started & WARNING),
        members=Count("user", distinct=True, filter=restricting),
        lifted=Count("pk", filter=lifted),
    )


def top_offenders(period, limit=TOP_OFFENDERS, now=None):
    """(identities that offended in the period, [the `limit` with the most offences, with details]).

    Details: their actions, member and penalties in force now.
    """
    in_period = OffenceRecord.objects.filter(hour__gte=period.start, hour__lt=period.end, shadow=False, blocked=False)
    top = list(
        in_period.values("identity")
        # Counted over the grouped rows in the same pass: a COUNT(DISTINCT) would scan them all again.
        .annotate(offences=Sum("count"), member=Max("user"), offenders=Window(Count("*")))
        .order_by("-offences", "identity")[:limit]
    )
    if not top:
        return 0, []
    identities = [row["identity"] for row in top]
    actions = {}
    for row in (
        in_period.filter(identity__in=identities)
        .values("identity", "action")
        .annotate(offences=Sum("count"))
        .order_by("identity", "-offences", "action")
    ):
        actions.setdefault(row["identity"], []).append((row["action"], row["offences"]))
    member_ids = {row["member"] for row in top if row["member"] is not None}
    users = get_user_model()._default_manager.in_bulk(member_ids) if member_ids else {}
    in_force = {}
    if member_ids:
        for penalty in Penalty.objects.active(now).filter(user_id__in=member_ids).order_by("-level", "ends_at"):
            in_force.setdefault(penalty.user_id, []).append(penalty)
    return top[0]["offenders"], [
        {
            "identity": row["identity"],
            "offences": row["offences"],
            "actions": actions.get(row["identity"], []),
            "user_id": row["member"],
            "user": users.get(row["member"]),
            "penalties": in_force.get(row["member"], []),
        }
        for row in top
    ]


def describe_identity(identity):
    """How an identity reads to a moderator when no member goes with it."""
    kind, _sep, value = identity.partition(":")
    value = unquote(value)
    if kind == "ip":
        return gettext("anonymous visitors from %(address)s") % {"address": value}
    if kind == "u":
        return gettext("member #%(pk)s (deleted)") % {"pk": value}
    return value or identity
