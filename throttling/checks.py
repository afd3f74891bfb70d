"""System checks: the cache alias, the settings, declared policies, Celery for penalties, and actions used by views without a policy."""

import functools
import inspect

from django.conf import settings as django_settings
from django.core.checks import Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError
from django.urls import get_resolver
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from . import bindings
from .backends.urls import parse
from .conf import MAX_BUCKET_SIZE, MAX_LOG_ENTRIES, settings
from .engine import moderators, watch
from .engine.declared import problems
from .engine.policies import capped_windows, policy_windows
from .exceptions import ImproperlyConfiguredBackend
from .metrics import available as metrics_available
from .models import ActionPolicy
from .text import describe_window


@register(Tags.caches)
def check_redis_url(app_configs=None, **kwargs):
    """THROTTLING_REDIS_URL, when set, must name a Redis the throttle can use; read, never connected to."""
    url = settings.REDIS_URL
    if url is None:
        return []
    try:
        parse(url)
    except ImproperlyConfiguredBackend as exc:
        return [
            Error(
                str(exc),
                hint=_(
                    "Examples: redis://127.0.0.1:6379/0, rediss://:password@host:6380/0, "
                    "unix:///run/redis.sock?db=0, redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster/0, "
                    "redis+cluster://10.0.0.1:6379,10.0.0.2:6379. Leave THROTTLING_REDIS_URL unset to use "
                    "the django-redis cache alias."
                ),
                id="throttling.E005",
            )
        ]
    return []


@register(Tags.caches)
def check_cache_alias(app_configs=None, **kwargs):
    if settings.REDIS_URL is not None:
        return []  # the throttle has a Redis of its own; CACHES may be anything
    alias = settings.CACHE_ALIAS
    caches = getattr(django_settings, "CACHES", {})
    if alias not in caches:
        return [
            Error(
                _("THROTTLING_CACHE_ALIAS is %(alias)r, but CACHES has no such alias.") % {"alias": alias},
                hint=_(
                    "Add a django-redis cache under that alias, or set THROTTLING_CACHE_ALIAS to one of: %(aliases)s."
                )
                % {"aliases": ", ".join(sorted(caches)) or _("(none)")},
                id="throttling.E001",
            )
        ]
    backend = caches[alias].get("BACKEND", "")
    if not backend.startswith("django_redis."):
        return [
            Error(
                _(
                    "The cache %(alias)r uses %(backend)r, which is not django-redis; the "
                    "throttle needs Redis to make exact, atomic decisions."
                )
                % {"alias": alias, "backend": backend},
                hint=_(
                    'Use "BACKEND": "django_redis.cache.RedisCache" for that alias, point '
                    "THROTTLING_CACHE_ALIAS at a django-redis cache, or give the throttle its own "
                    "Redis with THROTTLING_REDIS_URL."
                ),
                id="throttling.E002",
            )
        ]
    return []


_SETTING_RULES = {
    "ENABLED": (lambda v: isinstance(v, bool), gettext_noop("True or False")),
    "FAIL_OPEN": (lambda v: isinstance(v, bool), gettext_noop("True or False")),
    "UNKNOWN_ACTION": (lambda v: v in ("allow", "deny"), gettext_noop('"allow" or "deny"')),
    "NUM_PROXIES": (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
        gettext_noop("a whole number ≥ 0"),
    ),
    "IPV6_PREFIX": (lambda v: isinstance(v, int) and 1 <= v <= 128, gettext_noop("a prefix length from 1 to 128")),
    "SOCKET_TIMEOUT": (lambda v: isinstance(v, (int, float)) and v > 0, gettext_noop("a number of seconds > 0")),
    "SOCKET_CONNECT_TIMEOUT": (
        lambda v: isinstance(v, (int, float)) and v > 0,
        gettext_noop("a number of seconds > 0"),
    ),
    "POLICY_REFRESH": (lambda v: isinstance(v, (int, float)) and v >= 0, gettext_noop("a number of seconds ≥ 0")),
    "POLICY_MAX_AGE": (lambda v: isinstance(v, (int, float)) and v > 0, gettext_noop("a number of seconds > 0")),
    "FAIL_CLOSED_RETRY_AFTER": (lambda v: isinstance(v, int) and v >= 1, gettext_noop("a whole number of seconds ≥ 1")),
    "OFFENCE_WINDOW": (lambda v: isinstance(v, int) and v >= 1, gettext_noop("a whole number of seconds ≥ 1")),
    "OFFENCE_THRESHOLD": (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
        gettext_noop("a whole number ≥ 0 (0: never escalate)"),
    ),
    "PENALTIES": (lambda v: isinstance(v, bool), gettext_noop("True or False")),
    "LOCAL_REFUSALS": (lambda v: isinstance(v, bool), gettext_noop("True or False")),
    "FORGIVENESS_DAYS": (
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0,
        gettext_noop("a number of days > 0"),
    ),
    "ESCALATION_TIMEOUT": (lambda v: isinstance(v, int) and v >= 1, gettext_noop("a whole number of seconds ≥ 1")),
    "ESCALATION_RESEND_AFTER": (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
        gettext_noop("a whole number of seconds ≥ 1"),
    ),
    "CELERY_QUEUE": (lambda v: v is None or (isinstance(v, str) and v), gettext_noop("None or a queue name")),
    "OFFENCE_FLUSH_INTERVAL": (
        lambda v: isinstance(v, (int, float)) and v > 0,
        gettext_noop("a number of seconds > 0"),
    ),
    "OFFENCE_FLUSH_SIZE": (lambda v: isinstance(v, int) and v >= 1, gettext_noop("a whole number ≥ 1")),
    "TRUST_CACHE": (
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0,
        gettext_noop("a number of seconds ≥ 0"),
    ),
    "HEADERS": (lambda v: isinstance(v, bool), gettext_noop("True or False")),
    "SITE_HEADERS": (lambda v: isinstance(v, bool), gettext_noop("True or False")),
    "METRICS": (lambda v: isinstance(v, bool), gettext_noop("True or False")),
    "KEY_PREFIX": (
        lambda v: isinstance(v, str) and v and "{" not in v and "}" not in v,
        gettext_noop("a non-empty string without braces"),
    ),
}


@register()
def check_settings(app_configs=None, **kwargs):
    errors = []
    for name, (valid, expected) in _SETTING_RULES.items():
        value = getattr(settings, name)
        if not valid(value):
            errors.append(
                Error(
                    _("THROTTLING_%(name)s is %(value)r; it must be %(expected)s.")
                    % {"name": name, "value": value, "expected": _(expected)},
                    hint=_("See the documentation’s “Settings and checks” page (docs/settings.md)."),
                    id="throttling.E003",
                )
            )
    return errors


@register()
def check_default_policies(app_configs=None, **kwargs):
    """Policies declared in code must parse and pass the models' validation, or migrate could not create them."""
    return [
        Error(
            problem,
            hint=_(
                'Rates are written as in DRF with an optional count of units: "5/10s", "3/min", '
                '"20/day"; the first is the main window. A policy may also be a dict of what it says, with '
                'the admin’s field names: {"rate": "5/m", "windows": ["100/d"], "verb": "replied", '
                '"algorithm": "token_bucket", "mode", "scope", "tiers": [{"group": "trusted", "multiplier": 2}], '
                '"offence_threshold"}. The sliding log allows at most %(cap)s per window; use the token bucket '
                "for larger limits."
            )
            % {"cap": f"{MAX_LOG_ENTRIES:,}"},
            id="throttling.E006",
        )
        for problem in problems(settings.DEFAULT_POLICIES)
    ]


@register()
def check_moderators(app_configs=None, **kwargs):
    """THROTTLING_MODERATORS must name a permission or a function of the user that can be imported."""
    try:
        moderators.resolve(settings.MODERATORS)
    except (ValueError, ImportError) as exc:
        return [
            Error(
                str(exc),
                hint=_(
                    'Give a permission name such as "forum.moderate" (app label, a dot, the codename), a '
                    "function that takes the user and returns True for moderators, or the dotted path of one; "
                    "None keeps Django staff."
                ),
                id="throttling.E010",
            )
        ]
    return []


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


def _url_patterns():
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
    for label, actions, _costs in _views(_url_patterns() or ()):
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


def _url_named(name):
    """(the resolver that holds URL `name`'s last part, its namespace prefixes) as reverse() would
    find it, without calling it (reverse() needs the URL's arguments); None when there is no such URL."""
    resolver = get_resolver()
    *namespaces, url_name = name.split(":")
    prefixes = []
    for namespace in namespaces:
        instances = resolver.app_dict.get(namespace)
        if instances and namespace not in instances:
            namespace = instances[0]  # an application namespace names its default instance
        try:
            prefix, resolver = resolver.namespace_dict[namespace]
        except KeyError:
            return None
        prefixes.append(prefix)
    if not resolver.reverse_dict.getlist(url_name):
        return None
    return resolver, url_name, prefixes


def _takes(found, kwarg):
    """True when the URL `found` (from _url_named) has the keyword argument `kwarg`."""
    resolver, url_name, prefixes = found
    for entry in resolver.reverse_dict.getlist(url_name):
        if any(kwarg in params for _result, params in entry[0]):  # entry: (possibilities, pattern, ...)
            return True
    return any(f"(?P<{kwarg}>" in prefix for prefix in prefixes)


@register(Tags.urls)
def check_bindings(app_configs=None, **kwargs):
    """throttling.E007 / E008: THROTTLING_VIEWS names URLs that exist, with bindings that can be read."""
    bound, problems = bindings.parsed()
    errors = [
        Error(
            problem,
            hint=_(
                'Each key is a URL name as reverse() takes it, each value an action name or a dict with "action" '
                'and optionally "methods", "target", "counts" ("success", "redirect" or a function), "anonymous" '
                '("skip" or "count"), "form" and "template_name" (see docs/usage.md).'
            ),
            id="throttling.E008",
        )
        for problem in problems
    ]
    if not bound or _url_patterns() is None:
        return errors
    for name, binding in bound.items():
        found = _url_named(name)
        if found is None:
            errors.append(
                Error(
                    _(
                        "THROTTLING_VIEWS[%(name)r] names no URL: reverse() knows no %(name)r, so the "
                        "action %(action)r is not limited there."
                    )
                    % {"name": name, "action": binding.action},
                    hint=_(
                        "The app may have renamed or removed the URL. Find its new name in the app's urls.py "
                        '(with its namespaces, e.g. "forum:comment:publish") and update the key, or remove the binding.'
                    ),
                    obj=name,
                    id="throttling.E007",
                )
            )
        elif binding.target is not None and not _takes(found, binding.target):
            errors.append(
                Error(
                    _("THROTTLING_VIEWS[%(name)r] counts per %(target)r, which is not a keyword argument of that URL.")
                    % {"name": name, "target": binding.target},
                    hint=_('"target" names one of the URL\'s keyword arguments, e.g. "pk" for <int:pk>.'),
                    obj=name,
                    id="throttling.E008",
                )
            )
    return errors


MIDDLEWARE = "throttling.middleware.ActionThrottleMiddleware"
AUTHENTICATION = "django.contrib.auth.middleware.AuthenticationMiddleware"


@register()
def check_middleware(app_configs=None, **kwargs):
    """throttling.W007: the bindings' middleware is installed where it sees who is signed in."""
    middleware = list(getattr(django_settings, "MIDDLEWARE", None) or ())
    if MIDDLEWARE not in middleware:
        if not settings.VIEWS:
            return []
        problem = _("THROTTLING_VIEWS binds views, but %(middleware)s is not in MIDDLEWARE: nothing is limited.")
    elif AUTHENTICATION not in middleware or middleware.index(MIDDLEWARE) < middleware.index(AUTHENTICATION):
        problem = _(
            "%(middleware)s comes before AuthenticationMiddleware (or it is missing): every request looks "
            "logged out to it, so bindings skip members or count them per address."
        )
    else:
        return []
    return [
        Warning(
            problem % {"middleware": MIDDLEWARE},
            hint=_("Put %(middleware)s in MIDDLEWARE after %(authentication)s.")
            % {"middleware": MIDDLEWARE, "authentication": AUTHENTICATION},
            id="throttling.W007",
        )
    ]


@register()
def check_celery_app(app_configs=None, **kwargs):
    """Penalties need a Celery app of the project's; Celery's fallback app would send to nowhere useful."""
    if not settings.PENALTIES:
        return []
    try:
        from celery import _state
    except ImportError:
        return [
            Warning(
                _(
                    "THROTTLING_PENALTIES is on, but Celery is not installed: repeat offenders are "
                    "throttled but never penalised, and the report gets no offence history."
                ),
                hint=_(
                    'pip install "django-action-throttling[celery]" and set up a Celery app, '
                    "or set THROTTLING_PENALTIES = False."
                ),
                id="throttling.W002",
            )
        ]
    # Without an app of the project's, Celery's current app is its fallback, named "default".
    if _state.get_current_app().main == "default":
        return [
            Warning(
                _(
                    "THROTTLING_PENALTIES is on, but the project has no Celery app: escalations and "
                    "offence history would go to Celery's default broker (amqp://localhost)."
                ),
                hint=_(
                    "Create a Celery app (the quickstart’s “Celery” section, docs/quickstart.md) and import it in your "
                    "project's __init__.py, or set THROTTLING_PENALTIES = False."
                ),
                id="throttling.W002",
            )
        ]
    return []


@register()
def check_celery_broker(app_configs=None, **kwargs):
    """Penalties need a broker Celery can reach: a missing one or an unimportable transport drops every escalation."""
    if not settings.PENALTIES or check_celery_app():
        return []  # penalties off, or no Celery app at all (W002 says so)
    from celery import _state

    app = _state.get_current_app()
    url = app.conf.broker_url
    if not url:
        return [
            Warning(
                _(
                    "THROTTLING_PENALTIES is on, but the Celery app has no broker configured: escalations "
                    "and offence history would go to Celery's default broker (amqp://localhost)."
                ),
                hint=_(
                    'Set CELERY_BROKER_URL (for example "redis://127.0.0.1:6379/1"), or set '
                    "THROTTLING_PENALTIES = False."
                ),
                id="throttling.W003",
            )
        ]
    try:
        # Builds the transport class, importing what it needs; nothing is connected.
        _transport = app.connection_for_write().transport
    except Exception as exc:  # ImportError, kombu's unknown-transport KeyError, ...
        scheme = str(url).split("://", 1)[0]
        return [
            Warning(
                _(
                    "THROTTLING_PENALTIES is on, but Celery cannot load the %(scheme)r broker transport "
                    "(%(error)s): every escalation would fail to send."
                )
                % {"scheme": scheme, "error": f"{type(exc).__name__}: {exc}"},
                hint=_(
                    'Install the transport\'s dependencies: pip install "django-action-throttling[celery]" '
                    '(it brings celery[redis]), or "celery[<transport>]" for another broker.'
                ),
                id="throttling.W003",
            )
        ]
    return []


@register()
def check_metrics(app_configs=None, **kwargs):
    """THROTTLING_METRICS needs prometheus-client, or nothing is measured."""
    if not settings.METRICS or metrics_available():
        return []
    return [
        Error(
            _("THROTTLING_METRICS is on, but prometheus-client is not installed: no metric is recorded."),
            hint=_('pip install "django-action-throttling[metrics]", or set THROTTLING_METRICS = False.'),
            id="throttling.E012",
        )
    ]


@register()
def check_eviction(app_configs=None, **kwargs):
    """The throttle's Redis must not evict its keys: an evicted penalty mirror admits a penalised member."""
    problem = watch.current_risk()
    if problem is None:
        return []
    return [Warning(problem, hint=str(watch.HINT), id="throttling.W004")]


@register(Tags.urls)
def check_view_costs(app_configs=None, **kwargs):
    """A cost declared on a view (@throttle_action(cost=)) that the action's policy can never admit.

    Only costs declared on views can be known here; a cost passed to check() in code is
    refused at run time (reason too_costly), as is a cost a member's tier or override
    makes impossible.
    """
    costs = {}
    for label, _actions, declared in _views(_url_patterns() or ()):
        for key in declared:
            if key[1] > 1:
                costs.setdefault(key, label)
    if not costs:
        return []
    try:
        smallest = {p.action: min(m for _, m in capped_windows(p.algorithm, policy_windows(p))) for p in _policies()}
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


@register()
def check_capped_policies(app_configs=None, **kwargs):
    """Window rows above their algorithm's cap (written around the form and save()) are decided capped."""
    try:
        rows = list(_policies())
    except Exception:  # no database yet (not migrated, not reachable, not allowed here): nothing to compare
        return []
    warnings = []
    for p in rows:
        written = policy_windows(p)
        windows = capped_windows(p.algorithm, written)
        if windows != written:
            cap = MAX_BUCKET_SIZE if p.algorithm == "token_bucket" else MAX_LOG_ENTRIES
            warnings.append(
                Warning(
                    _(
                        "The policy %(name)r has a window above its algorithm’s cap of %(cap)s; it is decided as %(windows)s."
                    )
                    % {"name": p.action, "cap": f"{cap:,}", "windows": ", ".join(describe_window(*w) for w in windows)},
                    hint=_(
                        "Edit the policy in the admin: lower the window’s maximum, or choose the token bucket, "
                        "which keeps a few bytes per member whatever its maximum."
                    ),
                    obj=p.action,
                    id="throttling.W006",
                )
            )
    return warnings


def _policies():
    return ActionPolicy.objects.prefetch_related("windows")
