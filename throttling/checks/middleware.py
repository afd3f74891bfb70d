"""System checks of THROTTLING_VIEWS: bound URL names, their targets, and the middleware's place."""

from django.conf import settings as django_settings
from django.core.checks import Error, Tags, Warning, register
from django.utils.translation import gettext as _

from ..adapters import url_bindings as bindings
from ..conf import settings
from .views import url_patterns


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
        found = bindings.url_named(name)
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
        elif binding.target is not None and not bindings.takes(found, binding.target):
            errors.append(
                Error(
                    bindings.target_problem(name, binding.target),
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
