"""DRF adapter: ActionThrottle for throttle_classes."""

from rest_framework import exceptions
from rest_framework.throttling import BaseThrottle

from .conf import settings
from .counting import SUCCESS, counter, decided_before, settle
from .engine import api
from .headers import add_headers
from .refusals import retry_after


class ActionThrottled(exceptions.Throttled):
    """A 429 whose detail names the action and the wait in words."""

    def __init__(self, decision):
        exceptions.APIException.__init__(self, detail=decision.message, code="throttled")
        self.decision = decision
        self.wait = retry_after(decision)


class ActionThrottle(BaseThrottle):
    """Consults the action policy of the view (throttle_action / throttle_actions).

    A subclass may name its own `action` (counted for the unsafe methods) and
    override get_target(), to stack a second limit on a view, e.g. replies per
    thread beside replies per minute. `counts` says which responses mean the
    action happened ("success": 2xx and 3xx; "redirect"; or a function
    (request, response) -> bool, or its dotted path); any other gives the entry back.
    """

    action = None
    counts = SUCCESS

    def get_action(self, request, view):
        method = getattr(request, "_request", request).method
        if self.action is not None:
            return self.action if method in api.DEFAULT_METHODS else None
        return api.view_action(view, method)

    def get_target(self, request, view):
        """What to count per (the view's throttle_target(request)), or None."""
        return _target(request, view)

    def allow_request(self, request, view):
        action = self.get_action(request, view)
        if action is None:
            return True
        target = self.get_target(request, view)
        if decided_before(request, action, target):
            return True  # THROTTLING_VIEWS binds this view to the action too: decided (and refunded) there
        decision = api.check(_request(request), action, target=target, key=_key(request, view))
        _headers_on_response(view, decision)
        if not decision.allowed:
            # Raised rather than returned so the detail can say what was
            # throttled; DRF's generic message cannot.
            raise ActionThrottled(decision)
        if decision.entries:
            # From the class: a function there would come back bound to this throttle.
            _refund_unless_counted(view, decision, counter(type(self).counts))
        return True

    def wait(self):  # pragma: no cover - allow_request raises instead
        return None


def _key(request, view):
    """What a view's throttle_key(request) names to count instead of the member or address, or None.

    It chooses what is counted, never who is penalised: the member behind the request is
    still refused while penalised.
    """
    key = getattr(view, "throttle_key", None)
    if key is not None:
        value = key(request)
        if value:
            return str(value)
    return None


def _request(request):
    # DRF has authenticated by now and set the user on the HttpRequest it wraps too; that
    # one answers META and user directly, where the wrapper forwards each read through
    # a __getattr__.
    return getattr(request, "_request", request)


def _target(request, view):
    """What the view's throttle_target(request) names (a thread, say), or None."""
    target = getattr(view, "throttle_target", None)
    return None if target is None else target(request)


def _headers_on_response(view, decision):
    """RateLimit headers on the response, whatever it turns out to be (see _refund_unless_counted)."""
    if not (settings.HEADERS and decision.windows):
        return  # turned off, or no windows decided (exempt, disabled, Redis down): nothing to wrap
    finalize = view.finalize_response

    def finalize_response(request, response, *args, **kwargs):
        return add_headers(finalize(request, response, *args, **kwargs), decision)

    view.finalize_response = finalize_response


def _refund_unless_counted(view, decision, counted):
    """Give the entry back if the response does not count (by default: an error, see
    Architecture › Counting what did not happen), a 429 included.

    This throttle's own refusals raise before anything is recorded, so a 429
    with an admitted decision came from elsewhere: another throttle class DRF
    asked after this one (DRF asks them all and refuses if any refuses), or
    the view itself. The action did not happen, so it costs no quota.

    DRF offers no hook after the response for throttles, so the per-request
    view instance's finalize_response is wrapped; it runs for normal and
    handled-exception responses alike, and works for any APIView. Unhandled
    exceptions are caught in handle_exception.
    """
    finalize = view.finalize_response

    def finalize_response(request, response, *args, **kwargs):
        return settle(decision, counted, request, finalize(request, response, *args, **kwargs))

    view.finalize_response = finalize_response

    handle_exception = view.handle_exception

    def handle_exception_refunding(exc):
        # An exception DRF does not turn into a response becomes a 500 without
        # passing finalize_response; the action did not happen either way.
        try:
            return handle_exception(exc)
        except Exception:
            api.refund(decision)
            raise

    view.handle_exception = handle_exception_refunding
