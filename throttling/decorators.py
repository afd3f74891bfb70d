"""Plain-view adapter: @throttle_action("reply")."""

import inspect
from functools import wraps
from inspect import iscoroutinefunction

from . import created, targets
from .content_source import content_reader
from .counting import SUCCESS, asettle, counter, decided_before, settle, skip_names, skipped
from .engine import api, asyncapi
from .headers import add_headers
from .refusals import throttled_response


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
    """
    methods = api.http_methods(methods)
    target, key = _of_request(target), _of_request(key)
    happened = counter(counts)
    skip = skip_names(skip)
    said = content_reader(content)

    def decorator(view):
        if iscoroutinefunction(view):
            wrapper = _async_wrapper(
                view, action, methods, template_name, cost, form, target, key, happened, skip, said
            )
            return _declared(wrapper, view, action, cost)

        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if request.method not in methods or skipped(request, skip):
                return view(request, *args, **kwargs)
            counted, counted_in = _subject(key, target, request, args, kwargs)
            if decided_before(request, action, counted_in):
                return view(request, *args, **kwargs)  # bound by THROTTLING_VIEWS too: decided there
            text = None if said is None else said(request)
            decision = api.check(request, action, cost=cost, target=counted_in, key=counted, content=text)
            if not decision.allowed:
                return add_headers(throttled_response(request, decision, template_name, form=form), decision)
            watching = created.start(request) if created.counts_rows(happened) else None
            try:
                response = view(request, *args, **kwargs)
            except Exception:
                # The action did not happen (404, 403, a crash), unless a row was created first.
                settle(decision, happened, request, None)
                raise
            finally:
                if watching is not None:
                    created.stop(watching)
            # A 429 here is not ours (ours returns before the view runs): the
            # action did not happen, so it costs nothing either.
            return add_headers(response, decision, settle(decision, happened, request, response))

        return _declared(wrapper, view, action, cost)

    return decorator


def _declared(wrapper, view, action, cost):
    """`wrapper` with the actions and costs it declares, read by the system checks (W001, W005)."""
    wrapper.throttling_actions = (*getattr(view, "throttling_actions", ()), action)
    wrapper.throttling_costs = (*getattr(view, "throttling_costs", ()), (action, cost))
    return wrapper


def _async_wrapper(view, action, methods, template_name, cost, form, target, key, happened, skip, said):
    """The same contract for an `async def` view: the decision is awaited (asyncapi.acheck)."""

    @wraps(view)
    async def wrapper(request, *args, **kwargs):
        if request.method not in methods or skipped(request, skip):
            return await view(request, *args, **kwargs)
        counted, counted_in = _subject(key, target, request, args, kwargs)
        if decided_before(request, action, counted_in):
            return await view(request, *args, **kwargs)
        text = None if said is None else said(request)
        decision = await asyncapi.acheck(request, action, cost=cost, target=counted_in, key=counted, content=text)
        if not decision.allowed:
            return add_headers(throttled_response(request, decision, template_name, form=form), decision)
        watching = created.start(request) if created.counts_rows(happened) else None
        try:
            response = await view(request, *args, **kwargs)
        except Exception:
            await asettle(decision, happened, request, None)
            raise
        finally:
            if watching is not None:
                created.stop(watching)
        return add_headers(response, decision, await asettle(decision, happened, request, response))

    return wrapper
