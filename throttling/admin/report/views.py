"""The "Throttling report" admin page and its CSV exports."""

import csv
from urllib.parse import urlencode

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import Q, Sum
from django.http import HttpResponse, HttpResponseBadRequest
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, path, reverse
from django.utils import timezone
from django.utils.translation import gettext

from ...engine.offences.escalations import send_failures
from ...models import OffenceRecord, Penalty, PenaltyStep
from ..moderation import may
from .charts import offence_charts, penalty_chart
from .queries import (
    PERIODS,
    Period,
    describe_identity,
    offence_rows,
    offences_by_day,
    parse_days,
    penalties_by_day,
    penalty_totals,
    top_offenders,
)

# The page lists this many penalties in force and links to the changelist for the rest.
ACTIVE_LISTED = 50
# Spreadsheets run a cell that starts with one of these as a formula.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _reverse(site, name, *args, query=None):
    """The URL of an admin page, or None when this admin site has no such page."""
    try:
        url = reverse(f"{site.name}:{name}", args=args, current_app=site.name)
    except NoReverseMatch:
        return None
    return f"{url}?{urlencode(query)}" if query else url


def _check_permission(request):
    # admin_view has already sent anyone who is not active staff to the login page.
    if not may(request.user, "view_penalty"):
        raise PermissionDenied


def report_view(model_admin, request):
    _check_permission(request)
    site = model_admin.admin_site
    days, error = parse_days(request.GET.get("days"))
    now = timezone.now()
    period = Period.last(days, now)
    rows = offence_rows(period)
    offences = [(day, action, n) for day, action, n, apart in rows if not apart]
    set_apart_rows = [(day, action, n) for day, action, n, apart in rows if apart]
    # Aliases unlike the fields' names: a later filter's blocked= must name the field, not a sum.
    set_apart = OffenceRecord.objects.filter(hour__gte=period.start, hour__lt=period.end).aggregate(
        n_shadowed=Sum("count", filter=Q(shadow=True, blocked=False)),
        n_blocked=Sum("count", filter=Q(blocked=True)),
        n_duplicates=Sum("count", filter=Q(shadow=False, blocked=False, duplicate=True)),
    )
    shadowed, blocked = set_apart["n_shadowed"] or 0, set_apart["n_blocked"] or 0
    duplicates = set_apart["n_duplicates"] or 0
    # The offences' charts draw what the Offences total counts; refusals by blocks and would-be
    # refusals of shadow policies have a chart of their own.
    by_day, by_action = offence_charts(period, offences)
    apart_by_day, _ = offence_charts(period, set_apart_rows, set_apart=True)
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
    can_lift = model_admin.has_lift_permission(request)
    for penalty in active_listed:
        penalty.rung_name = ladder.get(penalty.level, "")
        penalty.change_url = _reverse(site, "throttling_penalty_change", penalty.pk)
        penalty.member_url = _reverse(site, "throttling_penalty_member", penalty.user_id)
        penalty.lift_url = _reverse(site, "throttling_penalty_lift", penalty.pk) if can_lift else None
    totals = {
        "offences": sum(n for _d, _a, n in offences),
        "shadowed": shadowed,
        "blocked": blocked,
        "duplicates": duplicates,
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
        "set_apart_by_day": apart_by_day,
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
    failed, waiting = send_failures()
    return {"failed": failed, "waiting": waiting} if failed else None
