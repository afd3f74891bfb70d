"""The report's chart geometry (inline SVG drawn by templates/admin/throttling/report/*.html, no JavaScript)."""

import math
from dataclasses import dataclass, field

from django.utils.formats import date_format, number_format
from django.utils.translation import gettext, ngettext

from .queries import PENALTY_SERIES

# Actions beyond these share one "other actions" colour in the daily chart.
SERIES_COLOURS = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00")
OTHER_COLOUR = "#8c8c8c"
ACTION_BARS = 15
OTHER = "\x00other"  # cannot clash with an action name


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


def column_chart(label, dates, series, values, describe, height=270, layout=WIDE, side_by_side=False):
    """Stacked daily columns, or with `side_by_side` one column per series in each day's slot (two
    figures of the same thing, which stacked would add up).

    series: [(key, name, colour)], bottom to top (left to right); values: {(day, key): n};
    describe(day, name, n) -> the tooltip of one bar segment.
    """
    width = layout["width"]
    left, right, top, bottom = layout["left"], layout["right"], 14, 40
    if layout is NARROW:
        height = height * 5 // 6
    plot_w, plot_h = width - left - right, height - top - bottom
    totals = [sum(values.get((day, key), 0) for key, _n, _c in series) for day in dates]
    if side_by_side:
        tallest = max((values.get((day, key), 0) for day in dates for key, _n, _c in series), default=0)
    else:
        tallest = max(totals, default=0)
    step, top_value = nice_scale(tallest)
    scale = plot_h / top_value
    slot = plot_w / len(dates)
    bar_w = max(1.0, slot * 0.72)
    chart = Chart(label, width, height, left, top, width - right, height - bottom, font_size=layout["font"])
    for i, day in enumerate(dates):
        base = top + plot_h
        for j, (key, name, colour) in enumerate(series):
            n = values.get((day, key), 0)
            if not n:
                continue
            h = n * scale
            x = left + i * slot + (slot - bar_w) / 2
            if side_by_side:
                w = bar_w / len(series)
                chart.bars.append(
                    Bar(_r(x + j * w), _r(top + plot_h - h), _r(w), _r(h), colour, describe(day, name, n))
                )
                continue
            base -= h
            chart.bars.append(Bar(_r(x), _r(base), _r(bar_w), _r(h), colour, describe(day, name, n)))
    for v in range(0, top_value + 1, step):
        chart.y_ticks.append(Tick(_r(top + plot_h - v * scale), _count(v), "end"))
    # About 7 day labels whatever the period: every day for a week, weekly for a month.
    every = next((k for k in (1, 2, 7, 14, 30) if len(dates) / k <= layout["day_labels"]), 30)
    for i in range(len(dates) - 1, -1, -every):  # counted back from today, which is always labelled
        chart.x_ticks.append(Tick(_r(left + (i + 0.5) * slot), date_format(dates[i], "M j")))
    chart.legend = [(name, colour, sum(values.get((day, key), 0) for day in dates)) for key, name, colour in series]
    chart.table = {
        "columns": [name for _k, name, _c in series],
        "rows": [
            (day, [values.get((day, key), 0) for key, _n, _c in series], total)
            for day, total in zip(dates, totals)
            if total
        ],
    }
    if layout is WIDE:
        chart.narrow = column_chart(label, dates, series, values, describe, height, NARROW, side_by_side)
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
            Bar(
                left,
                _r(top + i * row + (row - bar_h) / 2),
                _r(max(n * scale, 1)),
                bar_h,
                colour,
                describe(name, n),
                label=short,
                value=_count(n),
            )
        )
    for v in range(0, top_value + 1, step):
        chart.x_ticks.append(Tick(_r(left + v * scale), _count(v)))
    chart.table = {"columns": [gettext("offences")], "rows": [(name, [n], n) for name, n, _c in items]}
    if layout is WIDE:
        chart.narrow = bar_chart(label, items, describe, NARROW)
    return chart


def offence_charts(period, rows, set_apart=False):
    """(daily chart, per-action chart), or (None, None) when nothing was refused in the period;
    `set_apart`: of the refusals that are not offences (blocks, shadow policies), titled so."""
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
        if set_apart:
            words = ngettext("%(day)s, %(action)s: %(count)s request", "%(day)s, %(action)s: %(count)s requests", n)
        else:
            words = ngettext("%(day)s, %(action)s: %(count)s offence", "%(day)s, %(action)s: %(count)s offences", n)
        return words % {"day": date_format(day, "D j M Y"), "action": name, "count": _count(n)}

    def total(name, n):
        return ngettext(
            "%(action)s: %(count)s offence in the period", "%(action)s: %(count)s offences in the period", n
        ) % {"action": name, "count": _count(n)}

    days = ngettext("%(days)d day", "%(days)d days", period.days) % {"days": period.days}
    if set_apart:
        title = gettext(
            "Refused by blocks, and what shadow policies would have refused, per day over the last %(days)s"
        ) % {"days": days}
    else:
        title = gettext("Offences per day over the last %(days)s, stacked by action") % {"days": days}
    by_day = column_chart(
        title,
        period.dates,
        series,
        values,
        daily,
    )
    items = [(action, n, colour_of.get(action, OTHER_COLOUR)) for action, n in ranked[:ACTION_BARS]]
    if len(ranked) > ACTION_BARS:
        items.append((gettext("other actions"), sum(n for _a, n in ranked[ACTION_BARS:]), OTHER_COLOUR))
    by_action = bar_chart(gettext("Offences per action over the last %(days)s") % {"days": days}, items, total)
    return by_day, by_action


def penalty_chart(period, rows):
    if not rows:
        return None
    values = {(day, kind): n for day, kind, n in rows}

    def daily(day, name, n):
        return gettext("%(day)s, %(kind)s: %(count)s") % {
            "day": date_format(day, "D j M Y"),
            "kind": name,
            "count": _count(n),
        }

    days = ngettext("%(days)d day", "%(days)d days", period.days) % {"days": period.days}
    series = [(key, str(name), colour) for key, name, colour in PENALTY_SERIES]
    return column_chart(
        gettext("Penalties applied per day over the last %(days)s: warnings, automatic and by moderators")
        % {"days": days},
        period.dates,
        series,
        values,
        daily,
        height=210,
    )
