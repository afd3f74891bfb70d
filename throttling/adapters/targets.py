"""What a limit counts per (a topic, a post): named by a URL argument or a function, and normalised."""

import re

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

# A whole number, as a URL or a form writes it ("7", "007", "+7"). Longer runs of digits are ids of
# no model and stay text (int() of a huge string costs time).
_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]{1,30}")


def normalised(value):
    """The text a target is counted under, or None when there is none (the member's own count).

    A whole number is counted as that number, so "/r/1/", "/r/01/" and "/r/001/" are one target;
    other text is trimmed and its case folded, so "Welcome" and "welcome" are one target too. Two
    targets that differ only in case share a count: a limit errs on the community's side.
    """
    if value is None or value is False:
        return None
    if isinstance(value, int):
        return str(int(value))
    text = str(value).strip()
    if not text:
        return None
    if _WHOLE_NUMBER.fullmatch(text):
        return str(int(text))
    return text.casefold()


def function(spec, what):
    """The function `spec` names (itself, or its dotted path), as `what` (words for an error) takes it."""
    if callable(spec):
        return spec
    try:
        found = import_string(spec)
    except ImportError as exc:
        raise ImproperlyConfigured(f"{what} {spec!r} cannot be imported: {exc}")
    if not callable(found):
        raise ImproperlyConfigured(f"{what} {spec!r} names {found!r}, which cannot be called.")
    return found


def is_dotted_path(spec):
    """True for "forum.targets.topic_of" (a function's path), False for "topic_id" (a URL argument)."""
    return isinstance(spec, str) and "." in spec
