"""The penalty ladder as pure functions: which rung a new strike gets, and what is wrong with a ladder."""

import itertools
from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone
from django.utils.translation import gettext

from ..conf import settings
from ..models import Penalty, PenaltyStep


@dataclass(frozen=True)
class Rung:
    level: int
    name: str
    duration: timedelta
    all_actions: bool

    @property
    def is_warning(self):
        return not self.duration


def rung_for(strike_starts, ladder, now, forgiveness_days):
    """The rung a new strike gets: one past the strikes still remembered.

    `strike_starts` are the start times of the member's strikes (penalties not
    lifted); those older than `forgiveness_days` are forgiven. Past the top of
    the ladder the top rung repeats. Returns None for an empty ladder.
    """
    if not ladder:
        return None
    ladder = sorted(ladder, key=lambda r: r.level)
    horizon = now - timedelta(days=forgiveness_days)
    remembered = sum(1 for start in strike_starts if start > horizon)
    return ladder[min(remembered, len(ladder) - 1)]


def current_ladder():
    return [Rung(s.level, s.name, s.duration, s.all_actions) for s in PenaltyStep.objects.order_by("level")]


def standing(user, now=None):
    """(strikes still counted, the rung the next strike would get) for a member."""
    now = now or timezone.now()
    strikes = list(Penalty.objects.strikes(user, now).values_list("starts_at", flat=True))
    return len(strikes), rung_for(strikes, current_ladder(), now, settings.FORGIVENESS_DAYS)


def ladder_problems(ladder):
    """What is wrong with a ladder as a whole, in words a moderator understands (empty if fine)."""
    problems = []
    ladder = sorted(ladder, key=lambda r: r.level)
    if not ladder:
        return [gettext("The penalty ladder is empty: repeat offenders are only throttled, never penalised.")]
    if [r.level for r in ladder] != list(range(1, len(ladder) + 1)):
        problems.append(
            gettext("Levels should be numbered 1, 2, 3 … without gaps; they are %(levels)s.")
            % {"levels": ", ".join(str(r.level) for r in ladder)}
        )
    for lower, higher in itertools.pairwise(ladder):
        if higher.duration < lower.duration:
            problems.append(
                gettext("Level %(higher)d (%(h)s) is shorter than level %(lower)d (%(l)s).")
                % {"higher": higher.level, "h": higher.name, "lower": lower.level, "l": lower.name}
            )
    return problems
