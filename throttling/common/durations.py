"""The typed grammar of lengths and rates: "90s", "1h 30m", "7 days", and DRF-style "5/10s"."""

import re
from datetime import timedelta
from typing import NamedTuple

from django.utils.dateparse import parse_duration

# The units people type: name, seconds, and the short forms a length may use.
_UNIT_TABLE = (
    ("week", 7 * 86400, ("w", "wk", "wks")),
    ("day", 86400, ("d",)),
    ("hour", 3600, ("h", "hr", "hrs")),
    ("minute", 60, ("m", "min", "mins")),
    ("second", 1, ("s", "sec", "secs")),
)
# Every unit name a length may use, to its seconds.
UNITS = {word: seconds for name, seconds, short in _UNIT_TABLE for word in (name, f"{name}s", *short)}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)")


def parse_duration_text(text):
    """ "15 minutes", "1 day", "1h 30m", "0", or Django's "7 00:00:00" -> timedelta; None if unreadable.

    Fractions are kept ("1.5s" is 1.5 seconds); callers that need whole seconds refuse them.
    """
    original = text.strip()
    text = original.lower()
    if re.fullmatch(r"0+", text):
        return timedelta(0)
    if re.fullmatch(r"[\d.]+", text):
        return None  # "15" could mean seconds or minutes: ask for a unit
    seconds, position, found = 0.0, 0, False
    for match in _PART.finditer(text):
        if text[position : match.start()].strip(" ,") not in ("", "and"):
            break
        unit = UNITS.get(match.group(2))
        if unit is None:
            break
        seconds += float(match.group(1)) * unit
        position, found = match.end(), True
    else:
        if found and not text[position:].strip(" ,"):
            return timedelta(seconds=seconds)
    return parse_duration(original)


def duration_input(value):
    """A duration the way people type it, for editing: "7d", "1h 30m", "0"."""
    seconds = int(value.total_seconds())
    if not seconds:
        return "0"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        amount, seconds = divmod(seconds, size)
        if amount:
            parts.append(f"{amount}{unit}")
    return " ".join(parts)


# --- Rates: THROTTLING_DEFAULT_POLICIES ------------------------------------------

# DRF reads a unit by its first letter alone; here a unit is any start of its
# name ("m", "min", "minute") or the plural, so a typo such as "5/mni" is an
# error rather than 5 a minute. Rates have no weeks, like DRF's.
_RATE_UNITS = tuple((name, seconds) for name, seconds, _short in reversed(_UNIT_TABLE) if name != "week")
_RATE_PERIOD = re.compile(r"([0-9]*)\s*([a-z]+)", re.ASCII | re.IGNORECASE)
_COUNT = re.compile(r"[0-9]+", re.ASCII)

EXAMPLES = '"5/10s" (5 per 10 seconds), "3/min" or "20/day"'
UNIT_NAMES = "s, sec, second, m, min, minute, h, hour, d or day"


class Rate(NamedTuple):
    """One window: at most max_count in any period of this many seconds."""

    period: int
    max_count: int


def _rate_unit(word):
    word = word.lower()
    for name, seconds in _RATE_UNITS:
        if name.startswith(word) or word == f"{name}s":
            return seconds
    return None


def _refuse(text, problem):
    return ValueError(
        f"{text!r} is not a rate: {problem}. Write it as in DRF, with an optional count of units: {EXAMPLES}."
    )


def parse_rate(text):
    """ "3/min" -> Rate(60, 3), "5/10s" -> Rate(10, 5), "1/7d" -> Rate(604800, 1).

    Raises ValueError saying what is wrong, with valid examples.
    """
    if not isinstance(text, str):
        raise ValueError(f"a rate is a string such as {EXAMPLES}, not {text!r}.")
    if text.count("/") != 1:
        raise _refuse(text, "it needs exactly one “/” between the number allowed and the period")
    count, period = (part.strip() for part in text.split("/"))
    if not count:
        raise _refuse(text, "the number allowed, before “/”, is missing")
    if not _COUNT.fullmatch(count):
        raise _refuse(text, f"the number allowed, {count!r}, is not a whole number")
    if int(count) < 1:
        raise _refuse(text, "it allows nothing; the number before “/” must be at least 1")
    if not period:
        raise _refuse(text, "the period, after “/”, is missing")
    if _COUNT.fullmatch(period):
        raise _refuse(text, f"the period, {period!r}, has no unit (seconds would be {period + 's'!r})")
    match = _RATE_PERIOD.fullmatch(period)
    if match is None:
        raise _refuse(text, f"the period, {period!r}, is not a unit with an optional count before it")
    multiple, unit = match.groups()
    seconds = _rate_unit(unit)
    if seconds is None:
        raise _refuse(text, f"{unit!r} is not a unit; use {UNIT_NAMES}")
    if multiple and int(multiple) < 1:
        raise _refuse(text, "its period is 0; the count of units must be at least 1")
    return Rate(period=int(multiple or 1) * seconds, max_count=int(count))


def parse_rates(value):
    """One rate or a list of them -> [Rate, ...], the main window first. Raises ValueError."""
    if isinstance(value, str):
        return [parse_rate(value)]
    if not isinstance(value, (list, tuple)):
        raise ValueError(
            f'{value!r} is neither a rate such as "5/10s" nor a list of rates such as ["3/min", "20/day"].'
        )
    if not value:
        raise ValueError('the list of rates is empty; give at least one, e.g. ["3/min", "20/day"].')
    return [parse_rate(rate) for rate in value]
