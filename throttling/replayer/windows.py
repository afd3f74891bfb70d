"""A draft's windows: (period, max) pairs or rates in words ("3/min"), checked as the policy form checks them."""

from datetime import timedelta

from django.utils.translation import gettext

from ..common.choices import Algorithm
from ..common.durations import Rate, parse_rate
from ..common.words import describe_window, duration_in_words
from ..conf import MAX_BUCKET_SIZE, MAX_LOG_ENTRIES, MAX_PERIOD

ALGORITHMS = tuple(Algorithm.values)


def algorithm_of(value):
    """`value` when it names an algorithm ("sliding_log", "token_bucket"); ValueError otherwise."""
    if value not in ALGORITHMS:
        raise ValueError(
            gettext("“%(value)s” is not an algorithm; choose %(choices)s.")
            % {"value": value, "choices": " or ".join(ALGORITHMS)}
        )
    return value


def draft_windows(windows, algorithm):
    """((period, max_count), ...) of `windows`, in the order given (the first is the main window).

    `windows` is one rate ("3/min"), or a list of rates and (period seconds, max_count) pairs.
    Raises ValueError, in words a moderator reads, for anything a policy could not hold: a period
    outside 1 second to 366 days, a maximum under 1 or over the algorithm's cap, two windows of one
    period.
    """
    if isinstance(windows, str) or (isinstance(windows, tuple) and len(windows) == 2 and all(map(_whole, windows))):
        windows = [windows]  # one window: "3/min" or (60, 3)
    if not isinstance(windows, (list, tuple)) or not windows:
        raise ValueError(gettext("Give at least one window, as a rate such as “3/min” or a pair (60, 3)."))
    out, seen = [], set()
    cap = MAX_LOG_ENTRIES if algorithm == Algorithm.SLIDING_LOG else MAX_BUCKET_SIZE
    for item in windows:
        rate = _rate(item)
        if not 1 <= rate.period <= MAX_PERIOD:
            raise ValueError(
                gettext("A window’s period must be between 1 second and 366 days, not %(period)s seconds.")
                % {"period": f"{rate.period:,}"}
            )
        if not 1 <= rate.max_count <= cap:
            raise ValueError(
                gettext("%(window)s: the maximum must be between 1 and %(cap)s with this algorithm.")
                % {"window": describe_window(rate.period, rate.max_count), "cap": f"{cap:,}"}
            )
        if rate.period in seen:
            raise ValueError(
                gettext("Two windows have a period of %(period)s; each window needs its own period.")
                % {"period": duration_in_words(timedelta(seconds=rate.period))}
            )
        seen.add(rate.period)
        out.append((rate.period, rate.max_count))
    return tuple(out)


def _rate(item):
    if isinstance(item, str):
        return parse_rate(item)
    if isinstance(item, (list, tuple)) and len(item) == 2 and all(_whole(n) for n in item):
        return Rate(int(item[0]), int(item[1]))
    raise ValueError(
        gettext("%(value)r is not a window: give a rate such as “3/min” or a pair (period in seconds, maximum).")
        % {"value": item}
    )


def _whole(n):
    return isinstance(n, int) and not isinstance(n, bool)


def rate_text(period, max_count):
    """A window as a rate parse_rate() reads back: (60, 3) -> "3/min", (7200, 5) -> "5/2h"."""
    for seconds, unit in ((86400, "d"), (3600, "h"), (60, "min"), (1, "s")):
        if period % seconds == 0:
            count = period // seconds
            if unit == "min" and count != 1:
                unit = "m"
            return f"{max_count}/{'' if count == 1 else count}{unit}"
    return f"{max_count}/{period}s"
