"""What counts: whether a response means the action happened (`counts=`), and what a request has
decided already, for every adapter alike (see Architecture › Counting what did not happen)."""

from functools import lru_cache

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from .engine import api, asyncapi

SUCCESS = "success"
REDIRECT = "redirect"

# What a binding (THROTTLING_VIEWS) decided for a request, until its response comes back:
# (decision, counts predicate, action, target text). On the HttpRequest, which a DRF Request wraps.
_BOUND = "_throttling_bound"


def on_success(request, response):
    """`counts="success"`: a 2xx or 3xx response means the action happened."""
    return response.status_code < 400


def on_redirect(request, response):
    """`counts="redirect"`: only a redirect does (a classic form view answers a failed form, and
    often its own refusals, by showing the form again with 200)."""
    return 300 <= response.status_code < 400


_NAMED = {SUCCESS: on_success, REDIRECT: on_redirect}


def counter(counts):
    """The predicate `(request, response) -> bool` that `counts` names: "success", "redirect", the
    dotted path of a callable, or a callable. ImproperlyConfigured says what else it may be."""
    if isinstance(counts, str):
        named = _NAMED.get(counts)
        return named if named is not None else _imported(counts)
    if callable(counts):
        return counts
    raise ImproperlyConfigured(
        f'counts={counts!r}: it must be "success", "redirect", the dotted path of a function '
        "(request, response) -> bool, or such a function."
    )


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
    return bound is not None and bound[2] == action and bound[3] == (None if target is None else str(target))


def keep(request, decision, counts, action, target):
    """Remember what a binding decided for `request` until its response comes back (take())."""
    request.__dict__[_BOUND] = (decision, counts, action, None if target is None else str(target))


def take(request):
    """(decision, counts, action, target) a binding decided for `request`, forgotten now; or None."""
    return request.__dict__.pop(_BOUND, None)


def settle(decision, counted, request, response):
    """Give the decision's entries back when `counted` says the response did not do the action:
    it costs no quota, so it can never lead to a refusal or an offence."""
    if decision.entries and not counted(request, response):
        api.refund(decision)
    return response


async def asettle(decision, counted, request, response):
    """settle() for async code."""
    if decision.entries and not counted(request, response):
        await asyncapi.arefund(decision)
    return response
