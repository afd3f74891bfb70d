"""System checks of THROTTLING_VIEWS: bound URL names, their targets, and the middleware's place."""

from django.conf import settings as django_settings
from django.core.checks import Error, Tags, Warning, register
from django.urls import get_resolver
from django.utils.translation import gettext as _

from ..adapters import url_bindings as bindings
from ..conf import settings
from .views import url_patterns


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
                'and optionally "methods", "target" (a URL argument, or a function of the request), "counts" '
                '("success", "redirect", "created:<app_label.ModelName>" or a function), "anonymous" ("count" or '
                '"skip"), "skip" (POST field names), "content" (the field holding the post’s text, or a function '
                'of the request), "form" and "template_name" (see docs/usage.md).'
            ),
            id="throttling.E008",
        )
        for problem in problems
    ]
    if not bound or url_patterns() is None:
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
