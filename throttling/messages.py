"""The words a member reads: waits, refusals and penalties, in the active language and time zone."""

import math
from functools import lru_cache

from django.utils import formats, timezone, translation
from django.utils.translation import gettext, ngettext, pgettext, pgettext_lazy

from .decision import BACKEND_FAILURE, UNKNOWN_ACTION


def wait_in_words(seconds):
    """ "12 seconds", "3 minutes", "5 hours", "2 days": rounded up, never "0"."""
    seconds = max(1, math.ceil(seconds))
    if seconds < 120:
        return ngettext("%(n)d second", "%(n)d seconds", seconds) % {"n": seconds}
    if seconds < 2 * 3600:
        n = math.ceil(seconds / 60)
        return ngettext("%(n)d minute", "%(n)d minutes", n) % {"n": n}
    if seconds < 2 * 86400:
        n = math.ceil(seconds / 3600)
        return ngettext("%(n)d hour", "%(n)d hours", n) % {"n": n}
    n = math.ceil(seconds / 86400)
    return ngettext("%(n)d day", "%(n)d days", n) % {"n": n}


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
    wait = wait_in_words(decision.retry_after)
    if decision.reason in (BACKEND_FAILURE, UNKNOWN_ACTION):
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


def local_time(moment):
    """A moment in the active time zone, as members read it: "Nov. 21, 2026, 2:32 p.m. (UTC)"."""
    local = timezone.localtime(moment)
    # Translators: a date and time, then its time zone's abbreviation.
    return gettext("%(time)s (%(zone)s)") % {"time": formats.date_format(local, "DATETIME_FORMAT"), "zone": local.tzname()}


def penalty_message(penalty, action):
    """What a penalised member reads: for what, until when, why, and that staff can lift it."""
    # A blocked spammer keeps asking: format each penalty once per language and zone.
    return _penalty_message(penalty, action, translation.get_language(), timezone.get_current_timezone_name())


@lru_cache(maxsize=1024)
def _penalty_message(penalty, action, language, zone):
    params = {"action": action, "until": local_time(penalty.ends_at), "reason": penalty.reason_text}
    # Whole sentences, one per case, so a translation can order and punctuate them its own way.
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
