"""What a draft would do: the draft and the policy as it stands replayed, and the suggestion, in one pass."""

from dataclasses import dataclass
from datetime import datetime

from django.utils.translation import gettext

from ..engine.policies.cache import SITE
from .members import Standing, penalised
from .replays import BUSIEST, UNCHANGED, Plan, Replay, current_spec, finish, period_of, plan_spec
from .sources import source_for
from .stream import Days, Tally, stream
from .suggestions import Peaks, Suggestion, check_suggestible, conclude, share_of, suggestion_periods


@dataclass
class WhatIf:
    action: str
    source: str  # the history, in words: "demo_site.Reply (author, created, per post)"
    since: datetime | None
    until: datetime | None
    rows: int
    draft: Replay
    current: Replay | None  # None: the action has no policy yet
    suggestion: Suggestion | None
    suggestion_error: str = ""  # why there is no suggestion
    tiers: int = 0
    overrides: int = 0
    exempt_staff: bool = True
    site: bool = False

    def as_dict(self):
        return {
            "action": self.action,
            "source": self.source,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "rows": self.rows,
            "draft": self.draft.as_dict(),
            "current": self.current.as_dict() if self.current else None,
            "suggestion": self.suggestion.as_dict() if self.suggestion is not None else None,
            "suggestion_error": self.suggestion_error,
            "tiers": self.tiers,
            "overrides": self.overrides,
            "exempt_staff": self.exempt_staff,
            "site": self.site,
        }

    @classmethod
    def from_dict(cls, data):
        data = dict(data)
        for key in ("since", "until"):
            data[key] = datetime.fromisoformat(data[key]) if data[key] else None
        data["draft"] = Replay.from_dict(data["draft"])
        data["current"] = Replay.from_dict(data["current"]) if data["current"] else None
        data["suggestion"] = Suggestion.from_dict(data["suggestion"]) if data["suggestion"] else None
        return cls(**data)


def describe(source):
    fields = [source.member, source.time]
    if source.target:
        return gettext("%(model)s (%(fields)s, per %(target)s)") % {
            "model": source.label,
            "fields": ", ".join(fields),
            "target": source.target,
        }
    return gettext("%(model)s (%(fields)s)") % {"model": source.label, "fields": ", ".join(fields)}


def what_if(
    action,
    windows=None,
    *,
    algorithm=None,
    since=None,
    until=None,
    days=None,
    members=0.01,
    suggest=True,
    progress=None,
    hold_until_approved=UNCHANGED,
):
    """Replay the draft (`windows`, `algorithm`; None: the policy's own) and the policy as it stands
    (when there is a draft) over [since, until) or the last `days` days (see replays.last_days), and suggest limits for the draft's periods and
    algorithm: one pass over the history. Raises what replay() raises for a history or draft that
    cannot be replayed. `hold_until_approved`: the draft's (see replay()); each result says how many
    actions would have been held beside refused."""
    share = share_of(members)
    source = source_for(action)
    current = current_spec(action)
    draft = plan_spec(action, current, windows, algorithm, hold_until_approved)
    since, until = period_of(since, until, days)
    standing = Standing(draft)  # the draft differs from the policy only in windows and algorithm
    penalised_ids = penalised(action, since, until)
    site = draft.scope == SITE
    days = Days()
    tally = Tally(BUSIEST)
    plans = [Plan(draft, standing, days=days)]
    if windows is None and algorithm is None and hold_until_approved is UNCHANGED:
        current = None  # no draft: the policy as it stands is what is replayed
    if current is not None:
        plans.append(Plan(current, standing, days=days))
    consumers = [tally, *plans]
    peaks, error = None, ""
    try:
        check_suggestible(draft)
    except ValueError as exc:
        error = str(exc)
    else:
        if suggest:
            peaks = Peaks(draft, standing, suggestion_periods(draft.windows), penalised_ids)
            consumers.append(peaks)
    rows = stream(source, since, until, consumers, site=site, progress=progress)
    results = [
        finish(Replay(action, plan.spec.windows, plan.spec.algorithm, since, until), plan, tally, penalised_ids)
        for plan in plans
    ]
    return WhatIf(
        action=action,
        source=describe(source),
        since=since,
        until=until,
        rows=rows,
        draft=results[0],
        current=results[1] if current is not None else None,
        suggestion=conclude(peaks, draft, share) if peaks is not None else None,
        suggestion_error=error,
        tiers=len(draft.tiers),
        overrides=sum(1 for specs in standing.overrides.values() for o in specs if o.action in ("", action)),
        exempt_staff=draft.exempt_staff,
        site=site,
    )
