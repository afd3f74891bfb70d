"""ActionThrottleMiddleware: limits on views the site does not own, bound by URL name (THROTTLING_VIEWS).

    MIDDLEWARE = [..., "django.contrib.auth.middleware.AuthenticationMiddleware",
                  "throttling.middleware.ActionThrottleMiddleware", ...]

The view is found by the URL resolution Django does anyway (request.resolver_match, set before
process_view): no URL is resolved twice. A binding decides like @throttle_action, in the same
single Redis call, refunds what did not count, and adds the RateLimit headers. A binding that
cannot be read, or a target its URL lacks, stops the server at start (ImproperlyConfigured, with
check throttling.E008's words).
"""

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

from ..engine import api, asyncapi
from . import url_bindings as bindings
from .counting_rules import asettle, decided_before, keep, settle, skipped, take
from .login_redirects import requires_login
from .ratelimit_headers import add_headers
from .refusal.page import throttled_response


def _pending(request, view_kwargs):
    """(the Binding of the URL name this request resolved to, the target it counts per), or None
    when none binds it, the request is not the action (`skip`) or it was decided already (the
    middleware listed twice)."""
    bound = bindings.bindings()
    if not bound:
        return None
    match = request.resolver_match
    binding = bound.get(match.view_name)
    if binding is None and match.app_names and match.app_names != match.namespaces:
        # Bound by its application namespace ("forum:publish") where the URLconf included it
        # under another instance namespace ("board:publish").
        binding = bound.get(f"{match.app_name}:{match.url_name}")
    if binding is None or request.method not in binding.methods or skipped(request, binding.skip):
        return None
    target = binding.target_value(request, view_kwargs)
    if decided_before(request, binding.action, target):
        return None
    return binding, target


class ActionThrottleMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        # A binding that cannot be read, or counts per a URL argument its URL lacks, is an error
        # at start, not a 500 on every request (nor a count per member that should be per target).
        bindings.check_targets(bindings.bindings())
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)
            # Django awaits a coroutine process_view in an async stack, and runs a plain one
            # in a thread: the async stack gets the awaited decision.
            self.process_view = self.aprocess_view

    def __call__(self, request):
        if self.is_async:
            return self.__acall__(request)
        response = self.get_response(request)
        bound = take(request)
        if bound is None:
            return response
        return add_headers(response, bound.decision, settle(bound.decision, bound.counts, request, response))

    async def __acall__(self, request):
        response = await self.get_response(request)
        bound = take(request)
        if bound is None:
            return response
        return add_headers(response, bound.decision, await asettle(bound.decision, bound.counts, request, response))

    def process_view(self, request, view_func, view_args, view_kwargs):
        pending = _pending(request, view_kwargs)
        if pending is None:
            return None
        binding, target = pending
        user = getattr(request, "user", None)
        if (user is None or not user.is_authenticated) and _left_to_view(binding, view_func):
            return None
        text = None if binding.content is None else binding.content(request)
        return _decided(request, binding, target, api.check(request, binding.action, target=target, content=text), text)

    async def aprocess_view(self, request, view_func, view_args, view_kwargs):
        pending = _pending(request, view_kwargs)
        if pending is None:
            return None
        binding, target = pending
        if not binding.count_anonymous or requires_login(view_func):
            auser = getattr(request, "auser", None)
            user = None if auser is None else await auser()
            if (user is None or not user.is_authenticated) and _left_to_view(binding, view_func):
                return None
        text = None if binding.content is None else binding.content(request)
        decision = await asyncapi.acheck(request, binding.action, target=target, content=text)
        return _decided(request, binding, target, decision, text)


def _left_to_view(binding, view_func):
    """True when a logged-out request is the view's to answer: the binding skips visitors, or the
    view sends them to log in (its login redirect stays its answer, never a refusal)."""
    return not binding.count_anonymous or requires_login(view_func)


def _decided(request, binding, target, decision, text=None):
    """The refusal page, or None (the view runs) with the decision kept for the response."""
    if not decision.allowed:
        return add_headers(throttled_response(request, decision, binding.template_name, form=binding.form), decision)
    keep(request, decision, binding.counts, binding.action, target, binding.hold, text)
    return None
