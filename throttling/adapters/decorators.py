"""Plain-view adapter: @throttle_action("reply")."""

import inspect
from dataclasses import dataclass
from functools import wraps
from inspect import iscoroutinefunction

from ..engine import api, asyncapi
from ..held import hiding
from . import created_rows as created
from . import targets
from .counting_rules import SUCCESS, asettle, counter, decided_before, settle, skip_names, skipped, start_hiding
from .post_text import content_reader
from .ratelimit_headers import add_headers
from .refusal.page import throttled_response


def _of_request(fn):
    """`fn` as a function of (request, *view args, **view kwargs), whether or not it takes them."""
    if fn is None:
        return None
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return lambda request, *args, **kwargs: fn(request)
    if sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params) > 1 or any(
        p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params
    ):
        return fn
    return lambda request, *args, **kwargs: fn(request)


def _subject(key, target, request, args, kwargs):
    """(counted key or None, target) of a decision: what `key` names to count instead of the
    member or address (who is penalised stays the request's member), and the target."""
    counted = None
    if key is not None:
        value = key(request, *args, **kwargs)
        if value:
            counted = str(value)
    return counted, None if target is None else targets.normalised(target(request, *args, **kwargs))


def throttle_action(
    action,
    *,
    methods=api.DEFAULT_METHODS,
    template_name="throttling/throttled.html",
    cost=1,
    form=None,
    target=None,
    key=None,
    counts=SUCCESS,
    skip=(),
    content=None,
    hold=None,
):
    """Limit a view by the policy of `action`; a refusal renders a 429 page with Retry-After.

    Only `methods` count (by default the unsafe ones, like the DRF class). An
    error response gives the reserved entry back, so a form that failed
    validation costs no quota. `form` (the view's Form class) lends its labels
    to the 429 page that gives the member back what they wrote. `target` (a
    function of the request, and of the view's arguments if it takes them)
    counts per target, e.g. per thread (a whole number as that number, see
    Usage › Per-target limits; None or empty: per member); `key` (the same) names
    what is counted instead of the member or address (an API key, a header); a
    penalised member is refused whatever it names. `counts` says which responses
    mean the action happened: "success" (2xx and 3xx), "redirect" (a classic form
    view: a form shown again costs nothing), "created:<app_label.ModelName>" (a row
    of that model was created, whatever the response) or a function (request,
    response) -> bool (or its dotted path); any other response, and a redirect to
    LOGIN_URL, gives the entry back. `skip` names POST fields whose presence means
    the request is not the action (["preview"]): not decided, counted or refused.
    An action the request decided already (THROTTLING_VIEWS binds the view too) is
    not decided again. Every response of the action carries the RateLimit headers
    (THROTTLING_HEADERS). `content` (the name of the field holding the post's text,
    in form data or a JSON body, or a function (request) -> str) has the text
    judged against the policy's limits on repeated content in the same decision.
    `hold` ({"is_public": False}, with `counts="created:…"`) hides the row a held
    decision's request creates, as it is first written, and queues it for a
    moderator (see Guide › Held for review).
    """
    bound = _Bound(
        action,
        api.http_methods(methods),
        template_name,
        cost,
        form,
        _of_request(target),
        _of_request(key),
        counter(counts),
        skip_names(skip),
        content_reader(content),
        hiding.hide_spec(hold, created.label_of(counts)),
    )

    # Two wrappers, one contract: a view is a plain or an async function, and Django calls each as
    # it is. They differ only in how they wait (check or acheck, the view called or awaited, settle
    # or asettle); what they ask and answer is _Bound's.
    def decorator(view):
        if iscoroutinefunction(view):

            @wraps(view)
            async def wrapper(request, *args, **kwargs):
                asked = bound.asked(request, args, kwargs)
                if asked is None:
                    return await view(request, *args, **kwargs)
                decision = await asyncapi.acheck(request, action, cost=cost, **asked)
                if not decision.allowed:
                    return bound.refused(request, decision)
                watching = bound.watch(request, decision, asked["content"])
                try:
                    response = await view(request, *args, **kwargs)
                except Exception:
                    await asettle(decision, bound.happened, request, None)
                    raise
                finally:
                    bound.unwatch(watching)
                return add_headers(response, decision, await asettle(decision, bound.happened, request, response))

            return _declared(wrapper, view, action, cost)

        @wraps(view)
        def wrapper(request, *args, **kwargs):
            asked = bound.asked(request, args, kwargs)
            if asked is None:
                return view(request, *args, **kwargs)
            decision = api.check(request, action, cost=cost, **asked)
            if not decision.allowed:
                return bound.refused(request, decision)
            watching = bound.watch(request, decision, asked["content"])
            try:
                response = view(request, *args, **kwargs)
            except Exception:
                # The action did not happen (404, 403, a crash), unless a row was created first.
                settle(decision, bound.happened, request, None)
                raise
            finally:
                bound.unwatch(watching)
            # A 429 here is not ours (ours returns before the view runs): the
            # action did not happen, so it costs nothing either.
            return add_headers(response, decision, settle(decision, bound.happened, request, response))

        return _declared(wrapper, view, action, cost)

    return decorator


@dataclass(frozen=True, slots=True)
class _Bound:
    """What @throttle_action was given, read once, and what both wrappers ask of it."""

    action: str
    methods: frozenset
    template_name: str
    cost: int
    form: object
    target: object  # a function of the request (see _of_request), or None
    key: object
    happened: object  # counter(counts)
    skip: frozenset
    said: object  # content_reader(content), or None
    hold: object  # what a held decision's row gets (hiding.hide_spec()), or None

    def asked(self, request, args, kwargs):
        """check()'s keyword arguments for this request, or None when it is not the action here (a safe
        method, a skipped field, or decided already by a THROTTLING_VIEWS binding of the same view)."""
        if request.method not in self.methods or skipped(request, self.skip):
            return None
        counted, counted_in = _subject(self.key, self.target, request, args, kwargs)
        if decided_before(request, self.action, counted_in):
            return None
        text = None if self.said is None else self.said(request)
        return {"target": counted_in, "key": counted, "content": text}

    def refused(self, request, decision):
        return add_headers(throttled_response(request, decision, self.template_name, form=self.form), decision)

    def watch(self, request, decision, text):
        """(rows of the model counts= names, watched while the view runs; a held decision's rows
        hidden as they are written), either None."""
        watching = created.start(request) if created.counts_rows(self.happened) else None
        return watching, start_hiding(decision, self.happened, self.hold, request, text)

    @staticmethod
    def unwatch(watched):
        watching, hidden = watched
        if hidden is not None:
            hiding.stop(hidden)
        if watching is not None:
            created.stop(watching)


def _declared(wrapper, view, action, cost):
    """`wrapper` with the actions and costs it declares, read by the system checks (W001, W005)."""
    wrapper.throttling_actions = (*getattr(view, "throttling_actions", ()), action)
    wrapper.throttling_costs = (*getattr(view, "throttling_costs", ()), (action, cost))
    return wrapper
