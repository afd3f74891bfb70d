"""DRF adapter: ActionThrottle for throttle_classes."""

import functools
import threading
from collections.abc import Mapping

from rest_framework import exceptions
from rest_framework.throttling import BaseThrottle

from ..conf import settings
from ..engine import api
from . import created_rows as created
from . import targets
from .counting_rules import SUCCESS, counter, decided_before, settle
from .post_text import field_text
from .ratelimit_headers import add_headers
from .refusal.page import retry_after


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
    action happened ("success": 2xx and 3xx; "redirect"; "created:<app_label.ModelName>";
    or a function (request, response) -> bool, or its dotted path); any other gives the
    entry back. `skip` lists fields whose presence in the request's data means it is not
    the action (["preview"]): not decided, counted or refused.
    The view's `throttle_content` (the name of the field holding the post's text, or a
    method (request) -> str) has the text judged against repeated content in the same decision.
    """

    action = None
    counts = SUCCESS
    skip = ()

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
        if action is None or _skipped(request, type(self).skip):
            return True
        target = targets.normalised(self.get_target(request, view))
        # DRF has authenticated by now and set the user on the HttpRequest it wraps too; that
        # one answers META and user directly, where the wrapper forwards each read through
        # a __getattr__.
        plain = getattr(request, "_request", request)
        if decided_before(plain, action, target):
            return True  # THROTTLING_VIEWS binds this view to the action too: decided (and refunded) there
        key = getattr(view, "throttle_key", None)
        decision = api.check(
            plain,
            action,
            target=target,
            key=None if key is None else _key(request, key),
            content=_content(request, view),
        )
        # The view reads what was decided: a held decision is the view's to hide and queue with
        # throttling.hold(request.throttling_decision, obj, hide={...}) (see Guide › Held for review).
        # Of two ActionThrottles on one view, a held decision is the one the view is given.
        earlier = getattr(plain, "throttling_decision", None)
        if earlier is None or not earlier.held:
            plain.throttling_decision = decision
        if decision.entries:
            # From the class: a function there would come back bound to this throttle.
            counted = counter(type(self).counts)
            watching = created.start(plain) if created.counts_rows(counted) else None
            _after_response(view, decision, counted, watching)
        elif decision.windows and settings.HEADERS:
            _after_response(view, decision, None)
        if not decision.allowed:
            # Raised rather than returned so the detail can say what was
            # throttled; DRF's generic message cannot.
            raise ActionThrottled(decision)
        return True

    def wait(self):  # pragma: no cover - allow_request raises instead
        return None


def _key(request, key):
    """What a view's throttle_key(request) names to count instead of the member or address, or None.

    It chooses what is counted, never who is penalised: the member behind the request is
    still refused while penalised.
    """
    value = key(request)
    return str(value) if value else None


def _content(request, view):
    """The post's text the view's throttle_content names (a field of request.data, or a method), or None."""
    source = getattr(view, "throttle_content", None)
    if source is None:
        return None
    if not isinstance(source, str):
        return source(request)
    try:
        return field_text(request, source)
    except exceptions.ParseError:
        return None  # the view answers the body it cannot read


def _skipped(request, skip):
    """True when the request's data holds one of the field names in `skip` (a preview, say)."""
    if not skip:
        return False
    try:
        data = request.data
    except exceptions.ParseError:
        return False  # the view answers the body it cannot read
    return isinstance(data, Mapping) and any(name in data for name in skip)


def _target(request, view):
    """What the view's throttle_target(request) names (a thread, say), or None."""
    target = getattr(view, "throttle_target", None)
    return None if target is None else target(request)


def _after_response(view, decision, counted, watching=None):
    """Headers on the response and, when `counted` is given, the entry back unless the response
    counts: both when DRF finalizes this view's response (see _settling).

    DRF offers throttles no hook after the response, so each view class gets one: the first time
    ActionThrottle decides for it, its finalize_response and handle_exception are wrapped once
    (_settling). A request leaves what it decided in the view instance's __dict__, which DRF makes
    per request; a request with nothing left there passes straight through. Nothing is built per
    request beyond that entry, and nothing in it refers back to the view (no closure, no bound
    method): the throttle adds no reference cycle of its own for the garbage collector.
    """
    state = view.__dict__
    pending = state.get(_PENDING)
    if pending is None:
        view_class = type(view)
        if getattr(view_class, _SETTLED, None) is not view_class:
            _settling(view_class)
        state[_PENDING] = [(decision, counted, watching)]
    else:
        pending.append((decision, counted, watching))  # two ActionThrottles on one view: each settles its own


# On a view instance: [(decision, counts predicate or None, created-rows watch or None)] until its
# response is finalized.
_PENDING = "_throttling_pending"
# On a wrapper this module installed, so a view class (or a subclass inheriting it) is wrapped once.
_SETTLES = "_throttling_settles"
# On a view class whose methods were looked at: the class itself (a subclass inherits the attribute,
# which then names its base, so the subclass is looked at too).
_SETTLED = "_throttling_settled"
# On a view instance: how many of this module's finalize_response (handle_exception) wrappers are
# running, so the outermost one settles when a subclass's wraps its base's.
_FINALIZING = "_throttling_finalizing"
_HANDLING = "_throttling_handling"
_settling_lock = threading.Lock()


def _settling(view_class):
    """Wrap `view_class`'s finalize_response and handle_exception once (see _after_response)."""
    with _settling_lock:
        for name, wrap in (("finalize_response", _finalizing), ("handle_exception", _refunding)):
            method = getattr(view_class, name)
            if not getattr(method, _SETTLES, False):
                wrapper = functools.wraps(method)(wrap(method))
                setattr(wrapper, _SETTLES, True)
                setattr(view_class, name, wrapper)
        setattr(view_class, _SETTLED, view_class)


def _finalizing(finalize):
    def finalize_response(self, request, response, *args, **kwargs):
        state = self.__dict__
        if _PENDING not in state:
            return finalize(self, request, response, *args, **kwargs)
        depth = state[_FINALIZING] = state.get(_FINALIZING, 0) + 1
        try:
            response = finalize(self, request, response, *args, **kwargs)
        finally:
            state[_FINALIZING] = depth - 1
        if depth > 1:
            # A base class's wrapper, inside a subclass's (its finalize_response called super()):
            # the outermost settles, once the subclass's own code has made the response final.
            return response
        for decision, counted, watching in state.pop(_PENDING, ()):
            given_back = 0
            if watching is not None:
                created.stop(watching)
            if counted is not None:
                # Not counted (by default: an error, see Architecture › Counting what did not
                # happen), a 429 included: this throttle's own refusals raise before anything is
                # recorded, so a 429 with an admitted decision came from elsewhere (another
                # throttle class DRF asked after this one, or the view itself).
                given_back = settle(decision, counted, request, response)
            if settings.HEADERS and decision.windows:
                add_headers(response, decision, given_back)
        return response

    return finalize_response


def _refunding(handle_exception):
    def handle_exception_refunding(self, exc):
        state = self.__dict__
        if _PENDING not in state:
            return handle_exception(self, exc)
        depth = state[_HANDLING] = state.get(_HANDLING, 0) + 1
        try:
            return handle_exception(self, exc)
        except Exception:
            # An exception DRF does not turn into a response becomes a 500 without passing
            # finalize_response; the action did not happen either way. Only the outermost
            # wrapper gives it back: a subclass may still turn what its base re-raised into a
            # response, which finalize_response then settles.
            if depth == 1:
                for decision, counted, watching in state.pop(_PENDING, ()):
                    if watching is not None:
                        created.stop(watching)
                    if counted is not None:
                        settle(decision, counted, getattr(self, "request", None), None)
            raise
        finally:
            state[_HANDLING] = depth - 1

    return handle_exception_refunding
