"""The policy page's "What would this do?": the form's unsaved windows and algorithm replayed over the
action's history, answered inline for a short history and by a Celery task for a long one."""

from django.core.exceptions import ImproperlyConfigured, PermissionDenied, ValidationError
from django.db import DatabaseError
from django.http import Http404, HttpResponseNotAllowed
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.translation import gettext

from ...exceptions import BackendError
from ...models import ActionPolicy
from ...replayer import jobs
from ...replayer.replays import last_days
from ...replayer.sources import source_for
from ...replayer.whatif import WhatIf, what_if
from ...replayer.windows import algorithm_of, draft_windows
from ..fields import PeriodField
from ..moderation import may
from ..report.queries import Period
from .figures import figures

# Histories with fewer rows in the period are replayed within the request; longer ones by Celery.
INLINE_ROWS = 100_000
DAYS = (7, 30)
RESULT = "admin/throttling/actionpolicy/whatif_result.html"


def read_draft(data):
    """(windows, algorithm) of the policy form as posted, unsaved: its main window, then the extra
    windows not marked for deletion. ValueError, in the moderator's words, for what cannot be read."""
    period_field = PeriodField()

    def window(prefix, name):
        period, most = data.get(f"{prefix}period", "").strip(), data.get(f"{prefix}max_count", "").strip()
        if not period and not most:
            return None
        try:
            seconds = period_field.clean(period)
        except ValidationError as exc:
            raise ValueError(f"{name}: {' '.join(exc.messages)}")
        if not most.isdigit():
            raise ValueError(gettext("%(window)s: the maximum is not a whole number.") % {"window": name})
        return seconds, int(most)

    algorithm = algorithm_of(data.get("algorithm") or "sliding_log")
    main = window("", gettext("The main limit"))
    if main is None:
        raise ValueError(gettext("Fill in the main limit’s period and maximum first."))
    windows = [main]
    try:
        total = int(data.get("windows-TOTAL_FORMS") or 0)
    except ValueError:
        total = 0
    for i in range(min(total, 100)):
        prefix = f"windows-{i}-"
        if data.get(f"{prefix}DELETE"):
            continue
        extra = window(prefix, gettext("Extra window %(n)d") % {"n": i + 1})
        if extra is not None:
            windows.append(extra)
    return draft_windows(windows, algorithm), algorithm


class WhatIfMixin:
    """URLs, permission and views of "What would this do?" on the policy admin."""

    def get_urls(self):
        name = f"{self.opts.app_label}_{self.opts.model_name}_whatif"
        # Before the default URLs: their "<path:object_id>/" would swallow "whatif/".
        return [
            path("whatif/", self.admin_site.admin_view(self.whatif_view), name=name),
            path("whatif/<slug:job>/", self.admin_site.admin_view(self.whatif_job_view), name=f"{name}_job"),
            *super().get_urls(),
        ]

    def may_replay(self, request):
        """Moderators only: whoever may see this policy and the moderation pages (who acted, who was refused)."""
        return self.has_view_or_change_permission(request) and may(request.user, "view_penalty")

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if self.may_replay(request):
            url = reverse(f"{self.admin_site.name}:{self.opts.app_label}_{self.opts.model_name}_whatif")
            context["whatif"] = {"url": f"{url}?policy={obj.pk}" if obj is not None else url, "days": DAYS}
        return super().render_change_form(request, context, add, change, form_url, obj)

    def whatif_view(self, request):
        if not self.may_replay(request):
            raise PermissionDenied
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        saved = None
        if request.GET.get("policy"):
            saved = (
                ActionPolicy.objects.filter(pk=request.GET["policy"]).first()
                if request.GET["policy"].isdigit()
                else None
            )
            if saved is None:
                raise Http404(gettext("No such policy."))
        action = saved.action if saved is not None else request.POST.get("action", "").strip()
        try:
            days = int(request.POST.get("days", DAYS[0]))
        except ValueError:
            days = DAYS[0]
        days = days if days in DAYS else DAYS[0]
        return self._whatif_answer(request, action, days)

    def _whatif_answer(self, request, action, days):
        context = {"days": days, "action": action}
        try:
            windows, algorithm = read_draft(request.POST)
            source = source_for(action) if action else None
            if source is None:
                raise ValueError(gettext("Type the action’s name first: its history is found by it."))
            period = Period.last(days)
            since, until = last_days(days)  # as the command and the API read "the last N days"
            rows = source.count(since, until)
            if rows < INLINE_ROWS:
                result = what_if(action, windows, algorithm=algorithm, since=since, until=until)
                context.update(figures(self.admin_site, result, period))
            else:
                arguments = {
                    "action": action,
                    "windows": [list(w) for w in windows],
                    "algorithm": algorithm,
                    "since": since.isoformat(),
                    "until": until.isoformat(),
                }
                job = jobs.start(arguments, rows)
                context["job"] = self._job_context(job, jobs.load(job), days)
        except (ValueError, ImproperlyConfigured, jobs.NotStarted) as exc:
            context["error"] = str(exc)
        except (DatabaseError, BackendError) as exc:
            context["error"] = gettext("The history could not be read (%(error)s). Try again in a moment.") % {
                "error": exc
            }
        return TemplateResponse(request, RESULT, context)

    def whatif_job_view(self, request, job):
        if not self.may_replay(request):
            raise PermissionDenied
        try:
            days = int(request.GET.get("days", DAYS[0]))
        except ValueError:
            days = DAYS[0]
        context = {"days": days}
        try:
            record = jobs.load(job)
        except BackendError as exc:
            record, context["error"] = None, gettext("Redis could not be read (%(error)s).") % {"error": exc}
        if record is None and "error" not in context:
            context["error"] = gettext("This replay is over an hour old or unknown; replay again.")
        elif record is not None and record["state"] == jobs.DONE:
            result = WhatIf.from_dict(record["result"])
            context.update(action=result.action, **figures(self.admin_site, result, Period.last(days)))
        elif record is not None and record["state"] == jobs.FAILED:
            context["error"] = record.get("error") or gettext("The replay failed.")
        elif record is not None:
            context["job"] = self._job_context(job, record, days)
        return TemplateResponse(request, RESULT, context)

    def _job_context(self, job, record, days):
        url = reverse(f"{self.admin_site.name}:{self.opts.app_label}_{self.opts.model_name}_whatif_job", args=[job])
        total = max(1, record.get("total") or 1)
        waiting = record["state"] == jobs.QUEUED
        return {
            "url": f"{url}?days={days}",
            "done": record.get("done", 0),
            "total": record.get("total", 0),
            "percent": min(100, round(100 * record.get("done", 0) / total)),
            "waiting": waiting,
            # A job nobody has taken for a minute: no worker may be running.
            "stalled": waiting and timezone.now().timestamp() - record.get("queued_at", 0) > 60,
        }
