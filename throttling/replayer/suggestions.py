"""throttling.suggest(): limits read from each member's peak per window, in one pass over the history.

A member whose busiest period of P seconds held k actions is refused by a sliding log of P alone
exactly when its maximum is below k (the first action over it finds all earlier ones logged), so
the smallest maximum that refuses at most a share of the members is an order statistic of the
peaks: no replay per candidate. A token bucket's peak is the smallest bucket that admits all of a
member's actions. Members penalised in the period are counted apart, so a spammer's burst does not
set everyone's limit; members the policy exempts are left out.
"""

import math
from collections import Counter
from dataclasses import replace
from decimal import Decimal

from django.utils.translation import gettext

from ..common.words import describe_window
from ..conf import MAX_BUCKET_SIZE, MAX_LOG_ENTRIES
from ..engine.keys import TOKEN_BUCKET
from ..engine.policies.cache import SITE
from .algorithms import bucket_need, sliding_peak
from .members import EXEMPT, Standing, penalised
from .replays import by_target, current_spec, period_of, plan_spec
from .sources import source_for
from .stream import Consumer, stream

# What a suggestion covers besides the policy's own periods, when it has fewer windows than these.
COMMON_PERIODS = (60, 3600, 86400)
# Peaks of penalised members shown, per period.
PENALISED_SHOWN = 5


class Suggestion(list):
    """[(period, max_count), …], the main window first, each the smallest maximum with which that
    window alone would have refused at most `share` of the members counted."""

    def __init__(self, windows=(), **details):
        super().__init__(windows)
        self.algorithm = details.get("algorithm")
        self.share = details.get("share")
        self.members = details.get("members", 0)  # members counted: acted, not penalised, not exempt
        self.penalised = details.get("penalised", 0)  # members penalised in the period, counted apart
        self.exempt = details.get("exempt", 0)
        self.refused = details.get("refused", {})  # {period: members that window alone refuses}
        self.penalised_peaks = details.get("penalised_peaks", {})  # {period: highest peaks of penalised}
        self.capped = details.get("capped", ())  # periods whose maximum is the algorithm's cap

    def as_dict(self):
        return {
            "windows": [list(w) for w in self],
            "algorithm": self.algorithm,
            "share": str(self.share),
            "members": self.members,
            "penalised": self.penalised,
            "exempt": self.exempt,
            "refused": [[p, n] for p, n in self.refused.items()],
            "penalised_peaks": [[p, peaks] for p, peaks in self.penalised_peaks.items()],
            "capped": list(self.capped),
        }

    @classmethod
    def from_dict(cls, data):
        return cls(
            [tuple(w) for w in data["windows"]],
            algorithm=data["algorithm"],
            share=Decimal(data["share"]),
            members=data["members"],
            penalised=data["penalised"],
            exempt=data["exempt"],
            refused=dict((p, n) for p, n in data["refused"]),
            penalised_peaks=dict((p, peaks) for p, peaks in data["penalised_peaks"]),
            capped=tuple(data["capped"]),
        )

    def describe(self):
        return ", ".join(describe_window(p, m) for p, m in self)


def suggestion_periods(windows):
    """The periods to suggest for: the windows' own (main first), and a minute, an hour and a day
    when there are fewer than three."""
    periods = [p for p, _ in windows]
    if len(periods) < len(COMMON_PERIODS):
        periods += sorted(p for p in COMMON_PERIODS if p not in periods)
    return periods


class Peaks(Consumer):
    """Each member's peak per period (their busiest window; per target, the busiest target's), kept
    as counts of (multiplier, peak): memory grows with the distinct peaks, not the members."""

    def __init__(self, spec, standing, periods, penalised_ids):
        self.spec = spec
        self.standing = standing
        self.periods = periods
        self.penalised_ids = penalised_ids
        self.bucket = spec.algorithm == TOKEN_BUCKET
        self.counts = {p: Counter() for p in periods}
        self.penalised_peaks = {p: [] for p in periods}
        self.members = self.penalised = self.exempt = 0

    def member(self, pk, times, targets, rows):
        multiplier = self.standing.of(pk)
        if multiplier is EXEMPT:
            self.exempt += 1
            return
        if targets is None:
            series = [times]
        else:
            series = [[times[i] for i in indexes] for indexes in by_target(targets).values()]
        apart = pk in self.penalised_ids
        for period in self.periods:
            peak = 0
            for mine in series:
                found = sliding_peak(mine, period)
                if self.bucket and found > 1:
                    found = bucket_need(mine, period, found)
                if found > peak:
                    peak = found
            if apart:
                self.penalised_peaks[period].append(peak)
            else:
                self.counts[period][multiplier, peak] += 1
        if apart:
            self.penalised += 1
        else:
            self.members += 1


def smallest_max(spec, period, counts, allowed):
    """(the smallest maximum with which a window of `period` alone refuses at most `allowed` of the
    members counted, and how many it refuses). Each member's maximum is scaled by their multiplier
    exactly as the engine scales it (PolicySpec.scaled)."""
    cap = MAX_BUCKET_SIZE if spec.algorithm == TOKEN_BUCKET else MAX_LOG_ENTRIES
    multipliers = {m for m, _ in counts}

    def refused(n):
        one = replace(spec, windows=((period, n),))
        scaled = {m: one.scaled(m).windows[0][1] for m in multipliers}
        return sum(k for (m, peak), k in counts.items() if peak > scaled[m])

    if not counts:
        return 1, 0
    high = max(1, max(peak for _, peak in counts))
    while refused(high) > allowed and high < cap:  # a multiplier under 1 needs more than the peak
        high = min(cap, high * 2)
    if refused(high) > allowed:
        return cap, refused(cap)
    low = 0  # refuses more than allowed, or is no maximum at all
    while high - low > 1:
        mid = (low + high) // 2
        if refused(mid) > allowed:
            low = mid
        else:
            high = mid
    return high, refused(high)


def share_of(members):
    """`members` as an exact Decimal share in [0, 1); ValueError otherwise."""
    try:
        share = Decimal(str(members))
    except ArithmeticError:
        share = None
    if share is None or not share.is_finite() or not 0 <= share < 1:
        raise ValueError(
            gettext(
                "The share of members a limit may refuse is a number from 0 to less than 1, such as 0.01, "
                "not %(value)r (1 would let a limit refuse every member)."
            )
            % {"value": members}
        )
    return share


def conclude(peaks, spec, share):
    """The Suggestion a finished Peaks pass gives."""
    allowed = math.floor(share * peaks.members)
    windows, refused, capped = [], {}, []
    cap = MAX_BUCKET_SIZE if spec.algorithm == TOKEN_BUCKET else MAX_LOG_ENTRIES
    for period in peaks.periods:
        n, refused[period] = smallest_max(spec, period, peaks.counts[period], allowed)
        windows.append((period, n))
        if n == cap:
            capped.append(period)
    return Suggestion(
        windows,
        algorithm=spec.algorithm,
        share=share,
        members=peaks.members,
        penalised=peaks.penalised,
        exempt=peaks.exempt,
        refused=refused,
        penalised_peaks={p: sorted(v, reverse=True)[:PENALISED_SHOWN] for p, v in peaks.penalised_peaks.items()},
        capped=tuple(capped),
    )


def check_suggestible(spec):
    if spec.scope == SITE:
        raise ValueError(
            gettext(
                "The policy of “%(action)s” counts everyone together (site-wide): limits are suggested from "
                "each member’s own peaks, so only for per-member policies."
            )
            % {"action": spec.action}
        )


def suggest(action, *, members=0.01, since=None, until=None, days=None, periods=None, algorithm=None):
    """Windows [(period, max), …] for `action` from its history in [since, until) (or the last `days`
    days, as replay() reads them): for each period of
    the policy's windows (or `periods`; and a minute, an hour and a day when there are fewer than
    three), the smallest maximum with which that window alone would have refused at most the share
    `members` of the members who acted. Members penalised in the period are counted apart (and their
    peaks shown); members the policy exempts are left out. `algorithm` defaults to the policy's.
    Returns a Suggestion (a list of the windows, with those figures as attributes)."""
    share = share_of(members)
    source = source_for(action)
    current = current_spec(action)
    if not periods:
        periods = [p for p, _ in current.windows] if current is not None else [COMMON_PERIODS[0]]
    # Only the periods matter here: each window's maximum is what is being looked for.
    spec = plan_spec(action, current, [(p, 1) for p in periods], algorithm)
    check_suggestible(spec)
    since, until = period_of(since, until, days)
    peaks = Peaks(
        spec,
        Standing(spec),
        suggestion_periods(spec.windows),
        penalised(action, since, until),
    )
    stream(source, since, until, [peaks])
    return conclude(peaks, spec, share)
