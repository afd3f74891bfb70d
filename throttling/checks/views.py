"""System checks of the views that name actions: an action without a policy, a cost no policy admits."""

import functools
import inspect

from django.conf import settings as django_settings
from django.core.checks import Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError
from django.urls import get_resolver
from django.utils.translation import gettext as _

from ..adapters import url_bindings as bindings
from ..engine.policies.cache import capped_windows, policy_windows
from ..models import ActionPolicy
from .policies import policy_rows


def _inner(callback):
    """A URL's view without its decorators' wrappers and partial()."""
    inner = inspect.unwrap(callback)
    return inner.func if isinstance(inner, functools.partial) else inner


def _view_class(callback):
    """The class behind a URL's view: a DRF view's (cls), a Django class-based view's
    (view_class), a callable instance's own class; None for a plain function."""
    view = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
    if view is not None:
        return view
    inner = _inner(callback)
    if inspect.isroutine(inner) or isinstance(inner, type):
        return None
    return type(inner)  # an instance of a class with __call__: it has no __name__ of its own


def _declared(callback, view):
    """(actions, {(action, cost)}) a URL's view (its class `view`, or None) declares: a decorated
    function, a class whose attributes (throttle_action, throttle_actions) or handlers
    (method_decorator) name them, the arguments of as_view() or of a DRF router's @action, or a
    decorated callable instance."""
    actions = set(getattr(callback, "throttling_actions", ()))
    costs = set(getattr(callback, "throttling_costs", ()))
    if view is None:
        return actions, costs
    initkwargs = getattr(callback, "initkwargs", None) or getattr(callback, "view_initkwargs", None) or {}
    action = initkwargs.get("throttle_action", getattr(view, "throttle_action", None))
    if isinstance(action, str) and action:
        actions.add(action)
    mapped = initkwargs.get("throttle_actions", getattr(view, "throttle_actions", None))
    if isinstance(mapped, dict):
        actions.update(name for name in mapped.values() if isinstance(name, str))
    handlers = {"dispatch", "__call__", *getattr(view, "http_method_names", ())}
    handlers.update((getattr(callback, "actions", None) or {}).values())  # a DRF viewset's {method: handler}
    for handler in handlers:
        method = getattr(view, handler, None)
        actions.update(getattr(method, "throttling_actions", ()))
        costs.update(getattr(method, "throttling_costs", ()))
    return actions, costs


def _views(patterns):
    """(module.qualname of the view, its actions, its {(action, cost)}) for each URL's view that
    declares any, through includes and namespaces."""
    for pattern in patterns:
        if hasattr(pattern, "url_patterns"):
            yield from _views(pattern.url_patterns)
            continue
        callback = pattern.callback
        view = _view_class(callback)
        actions, costs = _declared(callback, view)
        if actions or costs:
            named = view or _inner(callback)
            yield f"{named.__module__}.{named.__qualname__}", actions, costs


def url_patterns():
    """The root URLconf's patterns, or None when it cannot be loaded (Django's own URL checks,
    and every request, report that). A project without ROOT_URLCONF (a worker, a script) has none."""
    if not getattr(django_settings, "ROOT_URLCONF", None):
        return None
    try:
        return get_resolver().url_patterns
    except (ImportError, ImproperlyConfigured):
        return None


@register(Tags.urls)
def check_view_actions(app_configs=None, **kwargs):
    """throttling.W001: an action a view uses, or THROTTLING_VIEWS binds, has no policy."""
    found = {}
    for label, actions, _costs in _views(url_patterns() or ()):
        for name in actions:
            found.setdefault(name, label)
    for name, binding in bindings.parsed()[0].items():
        found.setdefault(binding.action, f"{bindings.SETTING}[{name!r}]")
    if not found:
        return []
    try:
        known = set(ActionPolicy.objects.values_list("action", flat=True))
    except DatabaseError:
        return []  # not migrated yet: nothing to compare with
    return [
        Warning(
            _("The view %(view)s uses throttle action %(name)r, which has no policy.") % {"view": view, "name": name},
            hint=_(
                "Add an action policy with that name in the admin (Throttling › Action "
                "policies). Until then the action is not limited (THROTTLING_UNKNOWN_ACTION)."
            ),
            obj=name,
            id="throttling.W001",
        )
        for name, view in sorted(found.items())
        if name not in known
    ]


@register(Tags.urls)
def check_view_costs(app_configs=None, **kwargs):
    """A cost declared on a view (@throttle_action(cost=)) that the action's policy can never admit.

    Only costs declared on views can be known here; a cost passed to check() in code is
    refused at run time (reason too_costly), as is a cost a member's tier or override
    makes impossible.
    """
    costs = {}
    for label, _actions, declared in _views(url_patterns() or ()):
        for key in declared:
            if key[1] > 1:
                costs.setdefault(key, label)
    if not costs:
        return []
    try:
        smallest = {p.action: min(m for _, m in capped_windows(p.algorithm, policy_windows(p))) for p in policy_rows()}
    except DatabaseError:
        return []
    return [
        Warning(
            _(
                "The view %(view)s declares cost=%(cost)d for action %(name)r, but its policy admits at most "
                "%(max)d at once: every request there is refused."
            )
            % {"view": view, "cost": cost, "name": name, "max": smallest[name]},
            hint=_("Raise the smallest window’s maximum to at least the cost, or lower the cost the view takes."),
            obj=name,
            id="throttling.W005",
        )
        for (name, cost), view in sorted(costs.items())
        if name in smallest and cost > smallest[name]
    ]
