"""throttling.replay(): a policy, or a draft of one, replayed over an action's history as the engine decides."""

from dataclasses import asdict, dataclass, field, replace
from datetime import date, datetime, time, timedelta

from django.utils import timezone
from django.utils.translation import gettext

from ..engine.keys import SLIDING_LOG
from ..engine.policies.cache import SITE, PolicySpec, load_policies
from .algorithms import ALGORITHMS
from .members import EXEMPT, Standing, penalised
from .sources import source_for
from .stream import Consumer, Days, Tally, stream
from .windows import algorithm_of, draft_windows

BUSIEST = 10
UNCHANGED = object()  # a draft that leaves the policy's hold_until_approved as it is


@dataclass
class Replay:
    """What a policy would have done to an action's history: counts, by member and by day.

    Counts start empty at `since`; members a policy exempts (moderators, exempt overrides) are in
    `actions` and `members` but never refused, and counted apart in `exempt_members`.
    """

    action: str
    windows: tuple
    algorithm: str
    since: datetime | None = None
    until: datetime | None = None
    actions: int = 0  # rows replayed
    refused: int = 0  # actions the policy would have refused
    members: int = 0  # members who acted
    members_refused: int = 0
    members_refused_penalised: int = 0  # of members_refused, those penalised in the period
    exempt_members: int = 0
    by_member: dict = field(default_factory=dict)  # {member id: refused}, members refused at least once
    by_day: dict = field(default_factory=dict)  # {date: refused}, in the site's time zone
    busiest: list = field(default_factory=list)  # [(member id, actions, refused)], most actions first
    # Held for review (see Guide › Held for review): admitted actions the policy's hold_until_approved
    # would have held, each held post taken as approved (the history shows it was kept), and their members.
    held: int = 0
    members_held: int = 0

    def as_dict(self):
        """The result as JSON can carry it (a background replay hands it over this way)."""
        out = asdict(self)
        out["windows"] = [list(w) for w in self.windows]
        out["since"] = self.since.isoformat() if self.since else None
        out["until"] = self.until.isoformat() if self.until else None
        out["by_member"] = [[member, n] for member, n in self.by_member.items()]
        out["by_day"] = {day.isoformat(): n for day, n in sorted(self.by_day.items())}
        out["busiest"] = [list(row) for row in self.busiest]
        return out

    @classmethod
    def from_dict(cls, data):
        data = dict(data)
        data["windows"] = tuple(tuple(w) for w in data["windows"])
        for key in ("since", "until"):
            data[key] = datetime.fromisoformat(data[key]) if data[key] else None
        data["by_member"] = {member: n for member, n in data["by_member"]}
        data["by_day"] = {date.fromisoformat(day): n for day, n in data["by_day"].items()}
        data["busiest"] = [tuple(row) for row in data["busiest"]]
        return cls(**data)


def by_target(targets):
    """{target: [indexes of its actions]}, in the order they came."""
    found = {}
    for i, target in enumerate(targets):
        indexes = found.get(target)
        if indexes is None:
            found[target] = [i]
        else:
            indexes.append(i)
    return found


class Plan(Consumer):
    """One policy replayed: each member's state as the engine keeps it (per target when the history
    names one), their limits scaled or left out as plan() would, refusals counted by member and day."""

    def __init__(self, spec, standing, *, days, each=None):
        self.spec = spec
        self.standing = standing
        self.state_class = ALGORITHMS[spec.algorithm]
        self.days = days
        self.each = each
        self.refused = 0
        self.held, self.members_held = 0, 0
        self._admitted = {}  # a site-wide count: each member's admissions so far, while they would be held
        self.by_member, self.by_day = {}, {}
        self.exempt = set()
        self._shared = {}  # a site-wide count: one state per target, for everyone
        self._of = {}  # a site-wide count meets members again and again: their standing, remembered

    def member(self, pk, times, targets, rows):
        multiplier = self.standing.of(pk)
        if multiplier is EXEMPT:
            self.exempt.add(pk)
            refused = ()
        else:
            windows = self.spec.scaled(multiplier).windows
            if targets is None:
                refused = self.state_class(windows).refused(times)
            else:
                refused = []
                for indexes in by_target(targets).values():
                    state = self.state_class(windows)
                    refused += [indexes[j] for j in state.refused([times[i] for i in indexes])]
                refused.sort()
        if refused:
            self._count(pk, refused, times, rows)
        if multiplier is not EXEMPT:
            self._hold(len(times) - len(refused))
        if self.each is not None:
            self._tell(rows, refused)

    def _hold(self, admitted):
        """A member's first hold_until_approved admissions are held (each then approved: the history kept it)."""
        needed = self.spec.hold_until_approved
        if needed and admitted:
            self.held += min(needed, admitted)
            self.members_held += 1

    def site(self, pks, times, targets, rows):
        refused = []
        of, shared, windows = self._of, self._shared, self.spec.windows
        for i, pk in enumerate(pks):
            standing = of.get(pk)
            if standing is None:
                standing = of[pk] = self.standing.of(pk)
            if standing is EXEMPT:
                self.exempt.add(pk)
                continue
            target = targets[i] if targets is not None else None
            state = shared.get(target)
            if state is None:
                state = shared[target] = self.state_class(windows)
            if not state.admit(times[i]):
                refused.append(i)
                self._count(pk, (i,), times, rows)
            elif self.spec.hold_until_approved:
                so_far = self._admitted.get(pk, 0)
                if so_far < self.spec.hold_until_approved:
                    self._admitted[pk] = so_far + 1
                    self.held += 1
                    self.members_held += so_far == 0
        if self.each is not None:
            self._tell(rows, refused)

    def _count(self, pk, refused, times, rows):
        self.refused += len(refused)
        self.by_member[pk] = self.by_member.get(pk, 0) + len(refused)
        by_day, days = self.by_day, self.days
        for i in refused:
            day = days(times[i], rows[i][1])
            by_day[day] = by_day.get(day, 0) + 1

    def _tell(self, rows, refused):
        refused = set(refused)
        for i, row in enumerate(rows):
            self.each(row[0], row[2] if len(row) > 2 else None, row[1], i not in refused)


def moment(value, *, end=False):
    """A datetime for since/until: a date is the start of that day in the site's time zone (for
    `until`, `end`, of the day after, so the day is included)."""
    if value is None or isinstance(value, datetime):
        return value
    if isinstance(value, date):
        day = value.toordinal() + (1 if end else 0)
        start = datetime.combine(date.fromordinal(day), time.min)
        return timezone.make_aware(start) if timezone.is_aware(timezone.now()) else start
    raise TypeError(gettext("since and until are dates or datetimes, not %(value)r.") % {"value": value})


# The most days "the last N days" may reach back: a hundred years of history.
MOST_DAYS = 36_600


def last_days(days, until=None):
    """(since, until) of "the last `days` days", the one meaning the admin, manage.py throttling_replay
    and days= in the API give it: the day of `until` (default now) and the days − 1 days before it,
    from midnight in the site's time zone, up to `until`. ValueError in words for a number of days
    that is not a whole number from 1 to MOST_DAYS."""
    if type(days) is not int or not 1 <= days <= MOST_DAYS:
        raise ValueError(
            gettext("The last %(days)r days: give a whole number of days from 1 to %(most)s.")
            % {"days": days, "most": f"{MOST_DAYS:,}"}
        )
    until = until or timezone.now()
    aware = timezone.is_aware(until)
    # The day `until` ends: an end at midnight (a date's end, as --until gives it) ends the day before.
    last = until - timedelta(microseconds=1)
    first = (timezone.localdate(last) if aware else last.date()) - timedelta(days=days - 1)
    since = datetime.combine(first, time.min)
    return (timezone.make_aware(since) if aware else since), until


def period_of(since, until, days):
    """[since, until) of a replay given `since`/`until` or `days` (see last_days), never both."""
    if days is None:
        return moment(since), moment(until, end=True)
    if since is not None or until is not None:
        raise ValueError(gettext("Give the last days or a start and an end, not both."))
    return last_days(days)


def current_spec(action):
    """The action's policy as the engine decides it (windows above the cap decided at the cap), or None."""
    return load_policies().get(action)


def plan_spec(action, current, windows=None, algorithm=None, hold_until_approved=UNCHANGED):
    """The policy to replay: `current` when no draft is given, else `current` (or a new policy's defaults)
    with the draft's windows, algorithm and hold_until_approved. Raises ValueError for a draft a policy
    could not hold."""
    if hold_until_approved is not UNCHANGED:
        if hold_until_approved is not None and (type(hold_until_approved) is not int or hold_until_approved < 1):
            raise ValueError(
                gettext("hold_until_approved is a whole number of at least 1, or None, not %(value)r.")
                % {"value": hold_until_approved}
            )
        spec = plan_spec(action, current, windows, algorithm)
        return replace(spec, hold_until_approved=hold_until_approved)
    if windows is None and algorithm is None:
        if current is None:
            raise ValueError(
                gettext("The action “%(action)s” has no policy: give the windows to replay, e.g. [“3/min”].")
                % {"action": action}
            )
        return current
    algorithm = algorithm_of(algorithm) if algorithm is not None else (current.algorithm if current else SLIDING_LOG)
    if windows is None:
        windows = current.windows if current is not None else None
    windows = draft_windows(windows, algorithm)
    if current is None:
        current = PolicySpec(action=action, windows=windows, enabled=True, exempt_staff=True, fail_open=None, verb="")
    return replace(current, windows=windows, algorithm=algorithm, capped=False)


def finish(result, plan, tally, penalised_ids):
    """Fill `result` from a pass's plan and tally."""
    result.actions, result.members = tally.actions, tally.members
    result.refused = plan.refused
    result.by_member = plan.by_member
    result.by_day = plan.by_day
    result.members_refused = len(plan.by_member)
    result.members_refused_penalised = sum(1 for member in plan.by_member if member in penalised_ids)
    result.exempt_members = len(plan.exempt)
    result.held, result.members_held = plan.held, plan.members_held
    result.busiest = [(member, n, plan.by_member.get(member, 0)) for member, n in tally.busiest()]
    return result


def replay(
    action, windows=None, *, algorithm=None, since=None, until=None, days=None, each=None, hold_until_approved=UNCHANGED
):
    """Replay `action`'s history (THROTTLING_HISTORY) under its policy, or under the draft `windows`
    (a list of (period seconds, max) or rates such as "3/min") and `algorithm`, over [since, until),
    or over the last `days` days (today and the days − 1 before it, from midnight; see last_days).

    Decided exactly as the engine decides: in a sliding log an action at t is admitted when, in every
    window, fewer than max admitted actions lie in (t − period, t]; a refused action is not logged;
    windows are all-or-nothing; per target when the history names one; the token bucket is the
    engine's GCRA. Trust tiers and member overrides apply as they stand today; moderators are left
    out when the policy exempts staff. The policy is replayed as if enabled and enforced. `each`,
    when given, is called with (member id, target, time, admitted) for every action, in the order
    replayed (an exempt member's actions are all admitted). `hold_until_approved` (a draft's, or the
    policy's when not given) says how many admitted actions would have been held (Replay.held): each
    member's first ones, every held post taken as approved. Returns a Replay.
    """
    source = source_for(action)
    spec = plan_spec(action, current_spec(action), windows, algorithm, hold_until_approved)
    since, until = period_of(since, until, days)
    standing = Standing(spec)
    site = spec.scope == SITE
    tally = Tally(BUSIEST)
    plan = Plan(spec, standing, days=Days(), each=each)
    stream(source, since, until, [tally, plan], site=site)
    result = Replay(action, spec.windows, spec.algorithm, since, until)
    return finish(result, plan, tally, penalised(action, since, until))
