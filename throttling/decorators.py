"""Plain-view adapter: @throttle_action("reply")."""

import math
from functools import wraps
from inspect import iscoroutinefunction

from django.forms import PasswordInput
from django.template.response import TemplateResponse
from django.utils.text import capfirst
from django.views.debug import SafeExceptionReporterFilter

from . import core
from .conf import settings


def _label(name, field):
    if field is not None and field.label:
        return str(field.label)
    return capfirst(name.replace("_", " ").replace("-", " "))


def _is_password(field):
    return field is not None and isinstance(field.widget, PasswordInput)


def is_sensitive(name):
    """True for a field name Django hides in error reports (API, AUTH, TOKEN, KEY, SECRET, PASS, ...)."""
    return bool(SafeExceptionReporterFilter.hidden_settings.search(name))


def throttle_action(
    action, *, methods=core.DEFAULT_METHODS, template_name="throttling/throttled.html", cost=1, form=None
):
    """Limit a view by the policy of `action`; a refusal renders a 429 page with Retry-After.

    Only `methods` count (by default the unsafe ones, like the DRF class). An
    error response gives the reserved entry back, so a form that failed
    validation costs no quota. `form` (the view's Form class) lends its labels
    to the 429 page that gives the member back what they wrote.
    """
    methods = frozenset(m.upper() for m in methods)

    def decorator(view):
        if iscoroutinefunction(view):
            wrapper = _async_wrapper(view, action, methods, template_name, cost, form)
            wrapper.throttling_actions = (*getattr(view, "throttling_actions", ()), action)
            return wrapper

        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if request.method not in methods:
                return view(request, *args, **kwargs)
            decision = core.check(request, action, cost=cost)
            if not decision.allowed:
                return throttled_response(request, decision, template_name, form=form)
            try:
                response = view(request, *args, **kwargs)
            except Exception:
                core.refund(decision)  # the action did not happen (404, 403, a crash)
                raise
            if response.status_code >= 400:
                # A 429 here is not ours (ours returns before the view runs): the
                # action did not happen, so it costs nothing either.
                core.refund(decision)
            return response

        # Read by the system check that lists actions without a policy.
        wrapper.throttling_actions = (*getattr(view, "throttling_actions", ()), action)
        return wrapper

    return decorator


def _async_wrapper(view, action, methods, template_name, cost, form):
    """The same contract for an `async def` view: the decision is awaited (core.acheck)."""

    @wraps(view)
    async def wrapper(request, *args, **kwargs):
        if request.method not in methods:
            return await view(request, *args, **kwargs)
        decision = await core.acheck(request, action, cost=cost)
        if not decision.allowed:
            return throttled_response(request, decision, template_name, form=form)
        try:
            response = await view(request, *args, **kwargs)
        except Exception:
            await core.arefund(decision)
            raise
        if response.status_code >= 400:
            await core.arefund(decision)
        return response

    return wrapper


def throttled_response(request, decision, template_name="throttling/throttled.html", form=None):
    # The submitted text goes back to the member so nothing they wrote is lost,
    # labelled as the form labels it, except what must never be written into a
    # page: password inputs and fields whose names look sensitive by Django's
    # own rule for error reports (passwords, tokens, keys).
    fields = getattr(form, "base_fields", {})
    submitted = [
        (name, value)
        for name, value in request.POST.items()
        if name != "csrfmiddlewaretoken" and value.strip() and not is_sensitive(name)
        and not _is_password(fields.get(name))
    ]
    context = {
        "decision": decision,
        "message": decision.message,
        "submitted": submitted,  # (field name, text), for templates of your own
        "submitted_labelled": [(_label(name, fields.get(name)), value) for name, value in submitted],
        "throttling_base_template": settings.BASE_TEMPLATE,
        # The site's own banner about a penalty would say the same thing again.
        "throttling_refusal": True,
    }
    response = TemplateResponse(request, template_name, context, status=429)
    response["Retry-After"] = str(max(1, math.ceil(decision.retry_after)))
    return response
