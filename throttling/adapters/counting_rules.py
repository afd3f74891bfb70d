"""What counts: whether a response means the action happened (`counts=`), and what a request has
decided already, for every adapter alike (see Architecture › Counting what did not happen)."""

from functools import lru_cache
from typing import NamedTuple

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from ..engine import api, asyncapi
from ..engine.keys import TOKEN_BUCKET
from ..held import hiding
from . import created_rows as created
from .login_redirects import to_login

SUCCESS = "success"
REDIRECT = "redirect"

# What a binding (THROTTLING_VIEWS) decided for a request, until its response comes back (a Kept),
# on the HttpRequest, which a DRF Request wraps.
_BOUND = "_throttling_bound"


class Kept(NamedTuple):
    """What a binding decided for a request, kept until its response comes back (keep(), take())."""

    decision: object
    counts: object  # the counts predicate (counter())
    action: str
    target: object  # the target as text, or None
    watching: object  # the created-rows watch, or None
    hiding: object  # a held decision's rows hidden as they are written (hiding.start()), or None


def on_success(request, response):
    """`counts="success"`: a 2xx or 3xx response means the action happened."""
    return response.status_code < 400


def on_redirect(request, response):
    """`counts="redirect"`: only a redirect does (a classic form view answers a failed form, and
    often its own refusals, by showing the form again with 200)."""
    return 300 <= response.status_code < 400


_NAMED = {SUCCESS: on_success, REDIRECT: on_redirect}


def counter(counts):
    """The predicate `(request, response) -> bool` that `counts` names: "success", "redirect",
    "created:<app_label.ModelName>", the dotted path of a callable, or a callable.
    ImproperlyConfigured says what else it may be."""
    if isinstance(counts, str):
        named = _NAMED.get(counts)
        if named is not None:
            return named
        label = created.label_of(counts)
        return created.Created(label) if label is not None else _imported(counts)
    if callable(counts):
        return counts
    raise ImproperlyConfigured(
        f'counts={counts!r}: it must be "success", "redirect", "created:<app_label.ModelName>", the dotted '
        "path of a function (request, response) -> bool, or such a function."
    )


def happened(counted, request, response):
    """Whether the action happened, as `counted` says; `response` None when the view raised.

    A row the request created counts whatever the response (`created:`). Otherwise a login
    redirect never does (the visitor was sent to log in), nor does an exception.
    """
    if getattr(counted, "whatever_the_response", False):
        return counted(request, response)
    if response is None or to_login(request, response):
        return False
    return counted(request, response)


def skipped(request, skip):
    """True when the request posts one of the field names in `skip` (a preview, say): it is not
    the action, so it is neither decided, counted nor refused."""
    if not skip or request.method != "POST":
        return False
    data = getattr(request, "POST", None)
    return data is not None and any(name in data for name in skip)


def skip_names(skip, what="skip"):
    """`skip` as a tuple of POST field names; ImproperlyConfigured for anything else."""
    if skip is None:
        return ()
    if isinstance(skip, str) or not all(isinstance(name, str) and name for name in skip):
        raise ImproperlyConfigured(f'{what}={skip!r}: it must be a list of POST field names, e.g. ["preview"].')
    return tuple(skip)


@lru_cache(maxsize=64)
def _imported(path):
    try:
        found = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(
            f'counts={path!r} is neither "success" nor "redirect", and cannot be imported as the dotted '
            f"path of a function (request, response) -> bool: {exc}"
        )
    if not callable(found):
        raise ImproperlyConfigured(f"counts={path!r} names {found!r}, which cannot be called.")
    return found


def decided_before(request, action, target):
    """True when a binding already decided `action` for `target` on this request: the decorator,
    ActionThrottle and another binding then leave it to that one, which also refunds it."""
    bound = getattr(request, "_request", request).__dict__.get(_BOUND)
    return bound is not None and bound.action == action and bound.target == (None if target is None else str(target))


def keep(request, decision, counts, action, target, hold=None, text=None):
    """Remember what a binding decided for `request` until its response comes back (take()); rows
    the request creates are watched from now on when `counts` counts them, and hidden as they are
    written when the decision is held and the binding says how (`hold`; see Guide › Held for review)."""
    watching = created.start(request) if created.counts_rows(counts) else None
    request.__dict__[_BOUND] = Kept(
        decision,
        counts,
        action,
        None if target is None else str(target),
        watching,
        start_hiding(decision, counts, hold, request, text),
    )


def start_hiding(decision, counts, hold, request, text):
    """The hiding of a held decision's created rows, begun (stop it with hiding.stop()), or None."""
    if not hold or not decision.held or not created.counts_rows(counts):
        return None
    return hiding.start(decision, counts.label, hold, request, text)


def take(request):
    """The Kept a binding decided for `request`, forgotten now (its watch of created rows stopped); or None."""
    bound = request.__dict__.pop(_BOUND, None)
    if bound is None:
        return None
    if bound.hiding is not None:
        hiding.stop(bound.hiding)
    if bound.watching is not None:
        created.stop(bound.watching)
    return bound


def _taken(decision):
    """How many the decision took: a bucket's tokens, or its log entries."""
    entries = decision.entries
    return entries[1] if entries[0] == TOKEN_BUCKET else len(entries)


def settle(decision, counted, request, response):
    """Give the decision's entries back when the response did not do the action (happened()): it
    costs no quota, so it can never lead to a refusal or an offence. How many were given back."""
    if decision.entries and not happened(counted, request, response):
        taken = _taken(decision)
        return taken if api.refund(decision) else 0
    return 0


async def asettle(decision, counted, request, response):
    """settle() for async code."""
    if decision.entries and not happened(counted, request, response):
        taken = _taken(decision)
        return taken if await asyncapi.arefund(decision) else 0
    return 0
