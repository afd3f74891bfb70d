"""What "What would this do?" shows: the figures of the draft beside the policy as it stands, the busiest
members, the chart of refusals per day and the suggestion, from a replay's result."""

import json
import math
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.urls import NoReverseMatch, reverse
from django.utils.formats import date_format, number_format
from django.utils.translation import gettext, ngettext

from ...common.choices import Algorithm
from ...common.durations import duration_input
from ...common.words import describe_window
from ..report.charts import SERIES_COLOURS, column_chart

REFUSED = "refused"
CURRENT = "current"


def _count(n):
    return number_format(n, force_grouping=True)


def _share(part, whole):
    if not whole:
        return ""
    return f"{100 * part / whole:.1f} %"


def _algorithm(value):
    return gettext("sliding log") if value == Algorithm.SLIDING_LOG else gettext("token bucket")


def _limits(replay):
    words = ", ".join(describe_window(p, m) for p, m in replay.windows)
    return gettext("%(windows)s (%(algorithm)s)") % {"windows": words, "algorithm": _algorithm(replay.algorithm)}


def _figures(replay):
    return {
        "limits": _limits(replay),
        "refused": _count(replay.refused),
        "refused_share": _share(replay.refused, replay.actions),
        "members_refused": _count(replay.members_refused),
        "members_refused_share": _share(replay.members_refused, replay.members),
        "penalised": _count(replay.members_refused_penalised),
        # Held for review beside refused (the policy's hold_until_approved; see Guide › Held for review).
        "held": _count(replay.held) if replay.held else "",
        "held_share": _share(replay.held, replay.actions),
    }


def _member_url(site, pk):
    try:
        return reverse(f"{site.name}:throttling_penalty_member", args=[pk], current_app=site.name)
    except NoReverseMatch:
        return None


def _chart(result, period):
    """Refusals per day: the draft's, and beside each day's the policy's as it stands (when there is one)."""
    values = {(day, REFUSED): n for day, n in result.draft.by_day.items() if day in period.dates}
    series = [(REFUSED, gettext("refused by the draft"), SERIES_COLOURS[5])]
    if result.current is not None:
        values.update({(day, CURRENT): n for day, n in result.current.by_day.items() if day in period.dates})
        series.append((CURRENT, gettext("refused by the policy as it stands"), SERIES_COLOURS[1]))
    if not values:
        return None

    def describe(day, name, n):
        return ngettext("%(day)s, %(series)s: %(count)s action", "%(day)s, %(series)s: %(count)s actions", n) % {
            "day": date_format(day, "D j M Y"),
            "series": name,
            "count": _count(n),
        }

    days = ngettext("%(days)d day", "%(days)d days", period.days) % {"days": period.days}
    if result.current is not None:
        label = gettext("Actions refused per day over the last %(days)s: the draft beside the policy as it stands")
    else:
        label = gettext("Actions the draft refuses per day over the last %(days)s")
    return column_chart(label % {"days": days}, period.dates, series, values, describe, height=200, side_by_side=True)


# Members a draft lets through that the policy as it stands refuses, listed by name.
LET_THROUGH = 10


def _let_through(site, result):
    """Whom the draft lets through that the policy as it stands refuses: {"members", "actions", "listed":
    [{label, url, actions}]} (the most first), or None when the draft lets nobody more through."""
    current, draft = result.current, result.draft
    if current is None:
        return None
    freed = {
        member: n - draft.by_member.get(member, 0)
        for member, n in current.by_member.items()
        if n > draft.by_member.get(member, 0)
    }
    if not freed:
        return None
    top = sorted(freed.items(), key=lambda item: (-item[1], str(item[0])))[:LET_THROUGH]
    users = get_user_model()._default_manager.in_bulk([member for member, _ in top])
    listed = []
    for member, n in top:
        user = users.get(member)
        listed.append(
            {
                "label": user.get_username() if user is not None else str(member),
                "url": _member_url(site, member),
                "actions": _count(n),
            }
        )
    return {"members": len(freed), "actions": _count(sum(freed.values())), "listed": listed}


def _suggestion(result):
    suggestion = result.suggestion
    if suggestion is None:
        return None
    windows = [{"period": p, "max": m, "text": duration_input(timedelta(seconds=p))} for p, m in suggestion]
    allowed = math.floor(suggestion.share * suggestion.members)
    rows = []
    for period, most in suggestion:
        peaks = suggestion.penalised_peaks.get(period) or []
        rows.append(
            {
                "window": describe_window(period, most),
                "refused": _count(suggestion.refused.get(period, 0)),
                "refused_count": suggestion.refused.get(period, 0),
                "capped": period in suggestion.capped,
                "penalised_peaks": ", ".join(_count(p) for p in peaks),
            }
        )
    return {
        "text": suggestion.describe(),
        "windows": json.dumps(windows),
        "algorithm": suggestion.algorithm,
        "algorithm_words": _algorithm(suggestion.algorithm),
        "share": f"{float(100 * suggestion.share):g} %",
        "allowed": _count(allowed),
        "members": _count(suggestion.members),
        "penalised": suggestion.penalised,
        "exempt": suggestion.exempt,
        "rows": rows,
    }


def figures(site, result, period):
    """The template context of a finished replay (a WhatIf)."""
    draft, current = result.draft, result.current
    wanted = [member for member, _, _ in draft.busiest]
    users = get_user_model()._default_manager.in_bulk(wanted) if wanted else {}
    now_refused = current.by_member if current is not None else {}
    busiest = []
    for member, actions, refused in draft.busiest:
        user = users.get(member)
        busiest.append(
            {
                "label": user.get_username() if user is not None else str(member),
                "url": _member_url(site, member),
                "actions": _count(actions),
                "draft": _count(refused),
                "current": _count(now_refused.get(member, 0)) if current is not None else "",
            }
        )
    return {
        "result": result,
        "source": result.source,
        "since": result.since,
        "until": result.until,
        "actions": _count(draft.actions),
        "members": _count(draft.members),
        "exempt": draft.exempt_members,
        "draft": _figures(draft),
        "current": _figures(current) if current is not None else None,
        "busiest": busiest,
        "chart": _chart(result, period),
        "let_through": _let_through(site, result),
        "suggestion": _suggestion(result),
        "suggestion_error": result.suggestion_error,
    }
