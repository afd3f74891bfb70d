"""The "Throttling report" admin page: offences and penalties of a period as inline SVG charts, tables and CSV.

Everything is aggregated in the database (one GROUP BY per figure), so the page
costs the same handful of queries whether OffenceRecord holds a hundred rows or
millions; the chart geometry is computed here and drawn by the template, so the
page needs no JavaScript.
"""

import csv
import math
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from urllib.parse import unquote, urlencode

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Max, Q, Sum, Window
from django.db.models.functions import TruncDate
from django.http import HttpResponse, HttpResponseBadRequest
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, path, reverse
from django.utils import timezone
from django.utils.formats import date_format, number_format
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from .models import RESTRICTING, WARNING, OffenceRecord, Penalty, PenaltyStep

PERIODS = (7, 30, 90)
DEFAULT_DAYS = 30
TOP_OFFENDERS = 20
# The page lists this many penalties in force and links to the changelist for the rest.
ACTIVE_LISTED = 50
# Actions beyond these share one "other actions" colour in the daily chart.
SERIES_COLOURS = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00")
OTHER_COLOUR = "#8c8c8c"
ACTION_BARS = 15
PENALTY_SERIES = (
    ("warning", _("warnings"), "#f2c14e"),
    ("automatic", _("automatic penalties"), "#c0392b"),
    ("moderator", _("penalties by moderators"), "#6a3d9a"),
)
# Spreadsheets run a cell that starts with one of these as a formula.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
OTHER = "\x00other"  # cannot clash with an action name


# The period


@dataclass(frozen=True)
class Period:
    days: int
    start: datetime  # midnight, in the current time zone, of the first day
    end: datetime  # midnight after today
    dates: tuple

    @classmethod
    def last(cls, days, now=None):
        today = timezone.localdate(now)
        first = today - timedelta(days=days - 1)
        tz = timezone.get_current_timezone()
        start = timezone.make_aware(datetime.combine(first, time.min), tz)
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
        return DEFAULT_DAYS, gettext(
            "“%(value)s” is not a period this report offers: choose %(choices)s days."
        ) % {"value": raw, "choices": ", ".join(str(p) for p in PERIODS)}
    return days, None


# Queries: each one aggregates in the database and returns a bounded number of rows.


def shadow_label(action):
    return gettext("%(action)s, would have refused (shadow)") % {"action": action}


def offences_by_day(period):
    """[(day, action, offences)] of the period, ordered by day then action.

    The database sums per hour and action (rows are already hourly, and the
    (hour, action) index serves the GROUP BY); hours become days of the site's
    time zone here, over at most 24 × days × actions sums. Truncating every row
    to a date in SQL instead costs a function call per row: on SQLite a Python
    one, ten times slower at 100,000 rows.
    """
    hourly = (
        OffenceRecord.objects.filter(hour__gte=period.start, hour__lt=period.end)
        .values_list("hour", "action", "shadow")
        .annotate(offences=Sum("count"))
        .order_by()
    )
    daily = {}
    for hour, action, shadow, n in hourly:
        if shadow:
            # A policy in shadow mode refused nobody: shown apart, as what it would have refused.
            action = shadow_label(action)
        key = (timezone.localdate(hour), action)
        daily[key] = daily.get(key, 0) + n
    return [(day, action, n) for (day, action), n in sorted(daily.items())]


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
    return [
        (row["day"], kind, row[f"n_{kind}"]) for row in rows for kind, _l, _c in PENALTY_SERIES if row[f"n_{kind}"]
    ]


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
    in_period = OffenceRecord.objects.filter(hour__gte=period.start, hour__lt=period.end, shadow=False)
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


# Chart geometry, drawn by templates/admin/throttling/report/*.html


@dataclass
class Bar:
    x: float
    y: float
    width: float
    height: float
    fill: str
    title: str
    label: str = ""  # horizontal bars: the category, left of the bar
    value: str = ""  # horizontal bars: the figure, right of the bar

    @property
    def mid_y(self):
        return _r(self.y + self.height / 2)

    @property
    def end_x(self):
        return _r(self.x + self.width + 6)


@dataclass
class Tick:
    pos: float
    label: str
    anchor: str = "middle"


@dataclass
class Chart:
    label: str
    width: int
    height: int
    left: float
    top: float
    right: float
    bottom: float
    bars: list = field(default_factory=list)
    x_ticks: list = field(default_factory=list)
    y_ticks: list = field(default_factory=list)
    legend: list = field(default_factory=list)  # [(name, colour, total)]
    table: dict = field(default_factory=dict)  # the same figures, for people who cannot see the chart
    font_size: float = 11
    narrow: "Chart | None" = None  # the same chart drawn for a phone; the page shows one or the other

    @property
    def y_label_x(self):
        return self.left - 6

    @property
    def x_label_y(self):
        return self.bottom + 17

    @property
    def label_x(self):
        return self.left - 8


def _r(value):
    return round(value, 2)


def nice_scale(maximum, target=5):
    """(step, top) of an axis from 0 showing `maximum` in about `target` whole-number steps of 1, 2 or 5 × 10ⁿ."""
    raw = maximum / target
    if raw <= 1:
        step = 1
    else:
        magnitude = 10 ** math.floor(math.log10(raw))
        step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return step, max(step, math.ceil(maximum / step) * step)


def _count(value):
    return number_format(value)


# Each chart is drawn twice: wide for a desktop, and narrow, with larger type and fewer labels, for a
# phone, where the wide one would be scaled down to unreadable 5 px labels. The page shows the wide
# one where it is drawn at least at its own size (labels of 11 px or more), the narrow one elsewhere.
# Columns: margins left and right, at most day_labels dates. Bars: names cut at label_chars, at most
# label_max wide, bar_right for the figures, about `ticks` steps on the scale.
WIDE = dict(width=760, font=11, left=52, right=12, day_labels=10, label_chars=24, label_max=190, bar_right=60, ticks=5)
NARROW = dict(
    width=340, font=12.5, left=44, right=24, day_labels=5, label_chars=16, label_max=140, bar_right=52, ticks=3
)


def column_chart(label, dates, series, values, describe, height=270, layout=WIDE):
    """Stacked daily columns.

    series: [(key, name, colour)], bottom to top; values: {(day, key): n};
    describe(day, name, n) -> the tooltip of one bar segment.
    """
    width = layout["width"]
    left, right, top, bottom = layout["left"], layout["right"], 14, 40
    if layout is NARROW:
        height = height * 5 // 6
    plot_w, plot_h = width - left - right, height - top - bottom
    totals = [sum(values.get((day, key), 0) for key, _n, _c in series) for day in dates]
    step, top_value = nice_scale(max(totals, default=0))
    scale = plot_h / top_value
    slot = plot_w / len(dates)
    bar_w = max(1.0, slot * 0.72)
    chart = Chart(label, width, height, left, top, width - right, height - bottom, font_size=layout["font"])
    for i, day in enumerate(dates):
        base = top + plot_h
        for key, name, colour in series:
            n = values.get((day, key), 0)
            if not n:
                continue
            h = n * scale
            base -= h
            x = left + i * slot + (slot - bar_w) / 2
            chart.bars.append(Bar(_r(x), _r(base), _r(bar_w), _r(h), colour, describe(day, name, n)))
    for v in range(0, top_value + 1, step):
        chart.y_ticks.append(Tick(_r(top + plot_h - v * scale), _count(v), "end"))
    # About 7 day labels whatever the period: every day for a week, weekly for a month.
    every = next((k for k in (1, 2, 7, 14, 30) if len(dates) / k <= layout["day_labels"]), 30)
    for i in range(len(dates) - 1, -1, -every):  # counted back from today, which is always labelled
        chart.x_ticks.append(Tick(_r(left + (i + 0.5) * slot), date_format(dates[i], "M j")))
    chart.legend = [
        (name, colour, sum(values.get((day, key), 0) for day in dates)) for key, name, colour in series
    ]
    chart.table = {
        "columns": [name for _k, name, _c in series],
        "rows": [
            (day, [values.get((day, key), 0) for key, _n, _c in series], total)
            for day, total in zip(dates, totals)
            if total
        ],
    }
    if layout is WIDE:
        chart.narrow = column_chart(label, dates, series, values, describe, height, NARROW)
    return chart


def bar_chart(label, items, describe, layout=WIDE):
    """Horizontal bars, one row per item. items: [(name, n, colour)], largest first."""
    width, row, bar_h, chars = layout["width"], 26, 16, layout["label_chars"]
    longest = max((len(name) for name, _n, _c in items), default=0)
    char_w = 7 * layout["font"] / 11
    left = round(min(layout["label_max"], max(70, char_w * min(longest, chars) + 16)))
    right, top, bottom = layout["bar_right"], 6, 30
    height = top + row * len(items) + bottom
    plot_w = width - left - right
    step, top_value = nice_scale(max((n for _name, n, _c in items), default=0), layout["ticks"])
    scale = plot_w / top_value
    chart = Chart(label, width, height, left, top, width - right, height - bottom, font_size=layout["font"])
    for i, (name, n, colour) in enumerate(items):
        short = name if len(name) <= chars else name[: chars - 1] + "…"
        chart.bars.append(
            Bar(left, _r(top + i * row + (row - bar_h) / 2), _r(max(n * scale, 1)), bar_h, colour, describe(name, n),
                label=short, value=_count(n))
        )
    for v in range(0, top_value + 1, step):
        chart.x_ticks.append(Tick(_r(left + v * scale), _count(v)))
    chart.table = {"columns": [gettext("offences")], "rows": [(name, [n], n) for name, n, _c in items]}
    if layout is WIDE:
        chart.narrow = bar_chart(label, items, describe, NARROW)
    return chart


def offence_charts(period, rows):
    """(daily chart, per-action chart), or (None, None) when nothing was refused in the period."""
    per_action = {}
    for _day, action, n in rows:
        per_action[action] = per_action.get(action, 0) + n
    if not per_action:
        return None, None
    ranked = sorted(per_action.items(), key=lambda item: (-item[1], item[0]))
    own = ranked if len(ranked) <= len(SERIES_COLOURS) else ranked[: len(SERIES_COLOURS) - 1]
    colour_of = {action: SERIES_COLOURS[i] for i, (action, _n) in enumerate(own)}
    series = [(action, action, colour_of[action]) for action, _n in own]
    if len(own) < len(ranked):
        series.append((OTHER, gettext("other actions"), OTHER_COLOUR))
    values = {}
    for day, action, n in rows:
        key = (day, action if action in colour_of else OTHER)
        values[key] = values.get(key, 0) + n

    def daily(day, name, n):
        return ngettext(
            "%(day)s, %(action)s: %(count)s offence", "%(day)s, %(action)s: %(count)s offences", n
        ) % {"day": date_format(day, "D j M Y"), "action": name, "count": _count(n)}

    def total(name, n):
        return ngettext(
            "%(action)s: %(count)s offence in the period", "%(action)s: %(count)s offences in the period", n
        ) % {"action": name, "count": _count(n)}

    days = ngettext("%(days)d day", "%(days)d days", period.days) % {"days": period.days}
    by_day = column_chart(
        gettext("Offences per day over the last %(days)s, stacked by action") % {"days": days},
        period.dates, series, values, daily,
    )
    items = [(action, n, colour_of.get(action, OTHER_COLOUR)) for action, n in ranked[:ACTION_BARS]]
    if len(ranked) > ACTION_BARS:
        items.append((gettext("other actions"), sum(n for _a, n in ranked[ACTION_BARS:]), OTHER_COLOUR))
    by_action = bar_chart(
        gettext("Offences per action over the last %(days)s") % {"days": days}, items, total
    )
    return by_day, by_action


def penalty_chart(period, rows):
    if not rows:
        return None
    values = {(day, kind): n for day, kind, n in rows}

    def daily(day, name, n):
        return gettext("%(day)s, %(kind)s: %(count)s") % {
            "day": date_format(day, "D j M Y"), "kind": name, "count": _count(n),
        }

    days = ngettext("%(days)d day", "%(days)d days", period.days) % {"days": period.days}
    series = [(key, str(name), colour) for key, name, colour in PENALTY_SERIES]
    return column_chart(
        gettext("Penalties applied per day over the last %(days)s: warnings, automatic and by moderators")
        % {"days": days},
        period.dates, series, values, daily, height=210,
    )


# Views


def _reverse(site, name, *args, query=None):
    """The URL of an admin page, or None when this admin site has no such page."""
    try:
        url = reverse(f"{site.name}:{name}", args=args, current_app=site.name)
    except NoReverseMatch:
        return None
    return f"{url}?{urlencode(query)}" if query else url


def _check_permission(request):
    # admin_view has already sent anyone who is not active staff to the login page.
    if not request.user.has_perm("throttling.view_penalty"):
        raise PermissionDenied


def report_view(model_admin, request):
    _check_permission(request)
    site = model_admin.admin_site
    days, error = parse_days(request.GET.get("days"))
    now = timezone.now()
    period = Period.last(days, now)
    rows = offences_by_day(period)
    shadowed = (
        OffenceRecord.objects.filter(hour__gte=period.start, hour__lt=period.end, shadow=True).aggregate(
            n=Sum("count")
        )["n"]
        or 0
    )
    by_day, by_action = offence_charts(period, rows)
    offender_count, offenders = top_offenders(period, now=now)
    ladder = dict(PenaltyStep.objects.values_list("level", "name"))
    user_opts = get_user_model()._meta
    user_change = f"{user_opts.app_label}_{user_opts.model_name}_change"
    user_admin = site.is_registered(get_user_model())
    for row in offenders:
        pk = row["user_id"]
        row["label"] = row["user"].get_username() if row["user"] else describe_identity(row["identity"])
        row["user_url"] = _reverse(site, user_change, pk) if user_admin and row["user"] else None
        if pk is not None:
            row["history_url"] = _reverse(site, "throttling_penalty_member", pk) or _reverse(
                site, "throttling_penalty_changelist", query={"user__id__exact": pk}
            )
        for penalty in row["penalties"]:
            penalty.rung_name = ladder.get(penalty.level, "")
    active = Penalty.objects.active(now).select_related("user").order_by("ends_at", "pk")
    active_listed = list(active[:ACTIVE_LISTED])
    active_count = len(active_listed) if len(active_listed) < ACTIVE_LISTED else active.count()
    can_lift = request.user.has_perm("throttling.lift_penalty")
    for penalty in active_listed:
        penalty.rung_name = ladder.get(penalty.level, "")
        penalty.change_url = _reverse(site, "throttling_penalty_change", penalty.pk)
        penalty.member_url = _reverse(site, "throttling_penalty_member", penalty.user_id)
        penalty.lift_url = _reverse(site, "throttling_penalty_lift", penalty.pk) if can_lift else None
    totals = {
        "offences": sum(n for _d, _a, n in rows) - shadowed,
        "shadowed": shadowed,
        "offenders": offender_count,
        **penalty_totals(period, now),
        "in_force": active_count,
    }
    query = {"days": days}
    context = {
        **site.each_context(request),
        "title": gettext("Throttling report"),
        "opts": Penalty._meta,
        "error": error,
        "period": period,
        "periods": [(p, f"?{urlencode({'days': p})}", p == days) for p in PERIODS],
        "by_day": by_day,
        "by_action": by_action,
        "penalty_chart": penalty_chart(period, penalties_by_day(period, now)),
        "offenders": offenders,
        "active": active_listed,
        "active_count": active_count,
        "active_more": active_count - len(active_listed),
        "totals": totals,
        "send_failures": _send_failures(),
        "csv_offences_url": _reverse(site, "throttling_report_csv", query=query),
        "csv_penalties_url": _reverse(site, "throttling_report_csv", query={**query, "kind": "penalties"}),
        "penalties_url": _reverse(site, "throttling_penalty_changelist"),
        "ladder_url": _reverse(site, "throttling_penaltystep_changelist"),
        "policies_url": _reverse(site, "throttling_actionpolicy_changelist"),
        "time_zone": timezone.get_current_timezone_name(),
    }
    return TemplateResponse(request, "admin/throttling/report.html", context)


def _cell(text):
    text = str(text)
    return "'" + text if text.startswith(FORMULA_START) else text


def csv_view(model_admin, request):
    _check_permission(request)
    days, error = parse_days(request.GET.get("days"))
    kind = request.GET.get("kind") or "offences"
    if kind not in ("offences", "penalties"):
        error = gettext("“%(value)s” is not a kind of export: choose offences or penalties.") % {"value": kind}
    if error:
        return HttpResponseBadRequest(error, content_type="text/plain; charset=utf-8")
    period = Period.last(days)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    filename = f"throttling-{kind}-{period.dates[0]:%Y-%m-%d}-to-{period.dates[-1]:%Y-%m-%d}.csv"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = csv.writer(response)
    if kind == "offences":
        writer.writerow(["day", "action", "offences"])
        for day, action, n in offences_by_day(period):
            writer.writerow([day.isoformat(), _cell(action), n])
    else:
        writer.writerow(["day", "kind", "penalties"])
        for day, penalty_kind, n in penalties_by_day(period):
            writer.writerow([day.isoformat(), penalty_kind, n])
    return response


def urls(model_admin):
    """URL patterns the penalty admin includes: admin:throttling_report and admin:throttling_report_csv."""
    site = model_admin.admin_site
    def report(request):
        return report_view(model_admin, request)

    def report_csv(request):
        return csv_view(model_admin, request)

    return [
        path("report/", site.admin_view(report), name="throttling_report"),
        path("report.csv", site.admin_view(report_csv), name="throttling_report_csv"),
    ]


def _send_failures():
    """(failed sends, still waiting) of escalations, for the header; None when there were none."""
    from .penalties import send_failures

    failed, waiting = send_failures()
    return {"failed": failed, "waiting": waiting} if failed else None
