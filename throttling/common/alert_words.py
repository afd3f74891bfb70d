"""The words moderators read about raids: each alert's sentence, rendered from its kind and parameters.

Alerts are stored as a kind and plain parameters, and read in the reader's language (the admin's,
or the site's LANGUAGE_CODE in mail), like penalty reasons.
"""

from datetime import datetime, timedelta

from django.utils.translation import gettext, ngettext

from .choices import AlertKind
from .words import duration_in_words, local_time


def _until(params):
    return local_time(datetime.fromisoformat(params["until"])) if params.get("until") else ""


def _limits(params):
    """ "every limit × 0.5" or "the limits of “post, reply” × 0.5"."""
    if params.get("actions"):
        return gettext("the limits of “%(actions)s” × %(m)s") % {
            "actions": params["actions"].replace(",", ", "),
            "m": params.get("multiplier", ""),
        }
    return gettext("every limit × %(m)s") % {"m": params.get("multiplier", "")}


def _surge_started(params):
    values = {
        "limits": _limits(params),
        "duration": duration_in_words(timedelta(minutes=int(params.get("minutes") or 0))),
        "until": _until(params),
        "reason": params.get("reason", ""),
        "by": params.get("by", ""),
    }
    if params.get("by"):
        return (
            gettext("Surge mode started by %(by)s: %(limits)s for %(duration)s, until %(until)s. Reason: %(reason)s")
            % values
        )
    if params.get("automatic"):
        return (
            gettext("Surge mode started on its own: %(limits)s for %(duration)s, until %(until)s. Reason: %(reason)s")
            % values
        )
    return gettext("Surge mode started: %(limits)s for %(duration)s, until %(until)s. Reason: %(reason)s") % values


def _surge_ended(params):
    values = {"limits": _limits(params), "by": params.get("by", ""), "reason": params.get("reason", "")}
    if not params.get("early"):
        return gettext("Surge mode ended on time (%(limits)s).") % values
    if params.get("by") and params.get("reason"):
        return gettext("Surge mode ended early by %(by)s (%(limits)s). Reason: %(reason)s") % values
    if params.get("by"):
        return gettext("Surge mode ended early by %(by)s (%(limits)s).") % values
    return gettext("Surge mode ended early (%(limits)s).") % values


def _rung_reached(params):
    values = {
        "member": params.get("member", ""),
        "level": params.get("level", 0),
        "rung": params.get("rung", ""),
        "action": params.get("action", ""),
        "until": _until(params),
    }
    if params.get("warning"):
        return (
            gettext(
                "Member %(member)s reached rung %(level)s (%(rung)s) of the penalty ladder after refused "
                "attempts at “%(action)s”: a warning, nothing is blocked."
            )
            % values
        )
    if params.get("all_actions"):
        return (
            gettext(
                "Member %(member)s reached rung %(level)s (%(rung)s) of the penalty ladder after refused "
                "attempts at “%(action)s”: restricted for all actions until %(until)s."
            )
            % values
        )
    return (
        gettext(
            "Member %(member)s reached rung %(level)s (%(rung)s) of the penalty ladder after refused "
            "attempts at “%(action)s”: restricted for it until %(until)s."
        )
        % values
    )


def _block_refused(params):
    values = {
        "target": params.get("target", ""),
        "action": params.get("action", ""),
        "reason": params.get("reason", ""),
    }
    return (
        gettext("The block of %(target)s refused its first request, at “%(action)s”. Its reason: %(reason)s") % values
    )


def _held_queue(params):
    count, size = params.get("count", 0), params.get("size", 0)
    return ngettext(
        "%(count)d post is waiting in Held for review, more than the %(size)d the queue should hold.",
        "%(count)d posts are waiting in Held for review, more than the %(size)d the queue should hold.",
        count,
    ) % {"count": count, "size": size}


_SENTENCES = {
    AlertKind.SURGE_STARTED: _surge_started,
    AlertKind.SURGE_ENDED: _surge_ended,
    AlertKind.RUNG_REACHED: _rung_reached,
    AlertKind.BLOCK_REFUSED: _block_refused,
    AlertKind.HELD_QUEUE: _held_queue,
}


def alert_sentence(kind, params):
    """What an alert says, in the active language and time zone ("" for a kind this release does not know)."""
    render = _SENTENCES.get(kind)
    return render(params or {}) if render is not None else ""


def alert_subject(count):
    """The subject of a digest of `count` alerts."""
    return ngettext("Throttling: %(n)d event", "Throttling: %(n)d events", count) % {"n": count}
