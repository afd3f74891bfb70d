"""The words people read: waits and durations, windows, verbs, refusals, penalties and their reasons.

Everything here renders in the active language (and time zone); whole
sentences per case, so a translation can order and punctuate them its own way.
"""

import math
from functools import lru_cache

from django.utils import formats, timezone, translation
from django.utils.translation import gettext, ngettext, pgettext, pgettext_lazy

from .choices import Reason, Repeated

# Seconds in each unit people count in, largest first, with its words.
_UNITS = (
    (86400, lambda n: ngettext("%(n)d day", "%(n)d days", n)),
    (3600, lambda n: ngettext("%(n)d hour", "%(n)d hours", n)),
    (60, lambda n: ngettext("%(n)d minute", "%(n)d minutes", n)),
    (1, lambda n: ngettext("%(n)d second", "%(n)d seconds", n)),
)


def _unit_words(size, n):
    return dict(_UNITS)[size](n) % {"n": n}


def wait_in_words(seconds):
    """A wait, in one unit and rounded up, never "0": "12 seconds", "3 minutes", "5 hours", "2 days"."""
    seconds = max(1, math.ceil(seconds))
    if seconds < 120:
        return _unit_words(1, seconds)
    if seconds < 2 * 3600:
        return _unit_words(60, math.ceil(seconds / 60))
    if seconds < 2 * 86400:
        return _unit_words(3600, math.ceil(seconds / 3600))
    return _unit_words(86400, math.ceil(seconds / 86400))


def duration_in_words(value):
    """A length exactly, in as many units as it takes ("1 day 12 hours"); "warning only" for 0."""
    seconds = int(value.total_seconds())
    if seconds <= 0:
        return gettext("warning only")
    parts = []
    for size, _words in _UNITS:
        amount, seconds = divmod(seconds, size)
        if amount:
            parts.append(_unit_words(size, amount))
    return " ".join(parts)


def describe_window(period, max_count):
    """ "6 per minute", "3 per 10 minutes": a window as a moderator reads it."""
    values = {"max": max_count}
    if period % 86400 == 0:
        values["n"] = n = period // 86400
        if n == 1:
            return gettext("%(max)d per day") % values
        return ngettext("%(max)d per %(n)d day", "%(max)d per %(n)d days", n) % values
    if period % 3600 == 0:
        values["n"] = n = period // 3600
        if n == 1:
            return gettext("%(max)d per hour") % values
        return ngettext("%(max)d per %(n)d hour", "%(max)d per %(n)d hours", n) % values
    if period % 60 == 0:
        values["n"] = n = period // 60
        if n == 1:
            return gettext("%(max)d per minute") % values
        return ngettext("%(max)d per %(n)d minute", "%(max)d per %(n)d minutes", n) % values
    values["n"] = period
    if period == 1:
        return gettext("%(max)d per second") % values
    return ngettext("%(max)d per %(n)d second", "%(max)d per %(n)d seconds", period) % values


# The verbs of the default policies, so translators see them; a verb a moderator
# typed is shown as typed (pgettext returns it unchanged).
DEFAULT_VERBS = (
    pgettext_lazy("policy verb", "replied"),
    pgettext_lazy("policy verb", "posted"),
    pgettext_lazy("policy verb", "liked"),
    pgettext_lazy("policy verb", "replied in this thread"),
)


def verb_in_words(verb):
    """A policy's verb in the active language."""
    return pgettext("policy verb", verb) if verb else verb


def refusal_message(decision):
    """What a refused member reads: the action and the wait, in words."""
    if decision.penalty is not None:
        return penalty_message(decision.penalty, decision.action)
    if decision.reason == Reason.TOO_COSTLY:
        return gettext(
            "This action takes more at once than your limit allows (at most %(limit)d), so it cannot be done."
        ) % {"limit": decision.limit}
    if decision.reason == Reason.BLOCKED:
        return blocked_message(decision)
    if decision.duplicate == Repeated.WAVE:
        return gettext("This was just posted by several members; it looks like spam.")
    if decision.duplicate:
        return gettext("You have already posted this.")
    wait = wait_in_words(decision.retry_after)
    if decision.reason in (Reason.BACKEND_FAILURE, Reason.UNKNOWN_ACTION):
        return gettext("This action is temporarily unavailable. Try again in %(wait)s.") % {"wait": wait}
    if decision.verb:
        return gettext("You have %(verb)s too often. Try again in %(wait)s.") % {
            "verb": verb_in_words(decision.verb),
            "wait": wait,
        }
    return gettext("You have used “%(action)s” too often. Try again in %(wait)s.") % {
        "action": decision.action,
        "wait": wait,
    }


def refusal_heading(decision):
    """The heading of the refusal page: which kind of refusal it is, in a few words."""
    if decision.penalty is not None:
        return gettext("Your account is restricted")
    if decision.duplicate == Repeated.WAVE:
        return gettext("Already posted by several members")
    if decision.duplicate:
        return gettext("Already posted")
    if decision.reason == Reason.BLOCKED:
        return gettext("Not available")
    return gettext("Slow down")


def blocked_message(decision):
    """What a member refused by a block reads: never which block, range or reason; the wait only when
    the block ends (its reset_after; 0 for a block without an end)."""
    if decision.reset_after > 0:
        return gettext("This action is not available to you at the moment. Try again in %(wait)s.") % {
            "wait": wait_in_words(decision.reset_after)
        }
    return gettext("This action is not available to you at the moment.")


def local_time(moment):
    """A moment in the active time zone, as members read it: "Nov. 21, 2026, 2:32 p.m. (UTC)"."""
    local = timezone.localtime(moment)
    # Translators: a date and time, then its time zone's abbreviation.
    return gettext("%(time)s (%(zone)s)") % {
        "time": formats.date_format(local, "DATETIME_FORMAT"),
        "zone": local.tzname(),
    }


def penalty_message(penalty, action):
    """What a penalised member reads: for what, until when, why, and that staff can lift it."""
    # A blocked spammer keeps asking: format each penalty once per language and zone.
    return _penalty_message(penalty, action, translation.get_language(), timezone.get_current_timezone_name())


@lru_cache(maxsize=1024)
def _penalty_message(penalty, action, language, zone):
    params = {"action": action, "until": local_time(penalty.ends_at), "reason": penalty.reason_text}
    if penalty.all_actions and params["reason"]:
        text = gettext(
            "Your account is restricted for all actions until %(until)s. Reason: %(reason)s "
            "A moderator can lift this restriction if you think it is a mistake."
        )
    elif penalty.all_actions:
        text = gettext(
            "Your account is restricted for all actions until %(until)s. "
            "A moderator can lift this restriction if you think it is a mistake."
        )
    elif params["reason"]:
        text = gettext(
            "Your account is restricted for this action (“%(action)s”) until %(until)s. Reason: %(reason)s "
            "A moderator can lift this restriction if you think it is a mistake."
        )
    else:
        text = gettext(
            "Your account is restricted for this action (“%(action)s”) until %(until)s. "
            "A moderator can lift this restriction if you think it is a mistake."
        )
    return text % params


# The code of an automatic penalty's reason: repeated refused attempts.
AUTOMATIC_REASON = "offences"


def automatic_reason(action, offences, window, rejected=False):
    """An automatic penalty's reason as (code, parameters): rendered later in each reader's language.
    `rejected`: a moderator's rejection of a held post made the run cross (see Guide › Held for review)."""
    params = {"action": action, "offences": int(offences or 0), "window": int(window or 0)}
    if rejected:
        params["rejected"] = True
    return AUTOMATIC_REASON, params


def render_reason(code, params):
    """The text of a reason code in the active language ("" for no code)."""
    if code != AUTOMATIC_REASON:
        return ""
    action, offences, window = params.get("action", ""), params.get("offences", 0), params.get("window", 0)
    if offences and window and params.get("rejected"):
        return ngettext(
            "%(n)d refused attempt or rejected post at “%(action)s” within %(window)s.",
            "%(n)d refused attempts and rejected posts at “%(action)s” within %(window)s.",
            offences,
        ) % {"n": offences, "action": action, "window": wait_in_words(window)}
    if offences and window:
        return ngettext(
            "%(n)d refused attempt at “%(action)s” within %(window)s after being throttled.",
            "%(n)d refused attempts at “%(action)s” within %(window)s after being throttled.",
            offences,
        ) % {"n": offences, "action": action, "window": wait_in_words(window)}
    return gettext("Repeated refused attempts at “%(action)s” after being throttled.") % {"action": action}


def notice_message(penalty, now=None):
    """What a member reads once, on their next page, about a penalty they were given: the rung in words
    (a warning, or restricted until when) and what they did (its reason)."""
    now = now or timezone.now()
    params = {"action": penalty.action, "until": local_time(penalty.ends_at)}
    if penalty.ends_at <= penalty.starts_at and penalty.action:
        text = gettext(
            "You received a warning for “%(action)s”: nothing is blocked this time, but doing it again "
            "may restrict your account."
        )
    elif penalty.ends_at <= penalty.starts_at:
        text = gettext(
            "You received a warning: nothing is blocked this time, but doing it again may restrict your account."
        )
    elif penalty.ends_at <= now and penalty.action:
        text = gettext("Your account was restricted for “%(action)s” until %(until)s.")
    elif penalty.ends_at <= now:
        text = gettext("Your account was restricted for all actions until %(until)s.")
    elif penalty.action:
        text = gettext("Your account is restricted for “%(action)s” until %(until)s.")
    else:
        text = gettext("Your account is restricted for all actions until %(until)s.")
    text %= params
    reason = penalty.reason_text
    if reason:
        text = gettext("%(notice)s Reason: %(reason)s") % {"notice": text, "reason": reason}
    return text


def held_message():
    """What a member reads once, on their next page, after a post of theirs was held for review."""
    return gettext("Thanks! Your post was received and will appear once a moderator has looked at it.")
