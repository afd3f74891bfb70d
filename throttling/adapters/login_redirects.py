"""Visitors sent to log in: a login redirect is never counted, and a login-required view is never refused."""

from functools import lru_cache
from urllib.parse import urlsplit

from django.conf import settings as django_settings
from django.shortcuts import resolve_url

LOGIN_REQUIRED_MIDDLEWARE = "django.contrib.auth.middleware.LoginRequiredMiddleware"
REDIRECTS = frozenset({301, 302, 303, 307, 308})


def _path(url):
    return urlsplit(str(url)).path


def to_login(request, response):
    """True when `response` sends the visitor to LOGIN_URL (with a `next`, say): it did not do the
    action, whatever `counts` says."""
    if response is None or response.status_code not in REDIRECTS:
        return False
    location = response.get("Location")
    if not location:
        return False
    login = _path(resolve_url(django_settings.LOGIN_URL))
    return bool(login) and _path(location) == login


def requires_login(view_func):
    """True when Django's own machinery sends a visitor of `view_func` to log in before it runs:
    `login_required` (and the rest of the `user_passes_test` family, which mark the view for
    LoginRequiredMiddleware), `LoginRequiredMixin` and its kin, or LoginRequiredMiddleware itself.

    A visitor there is left to the view, never refused: the app's login redirect stays its answer.
    """
    if view_func is None:
        return False
    try:
        marked = _marked(view_func)
    except TypeError:  # a view that cannot be hashed (a callable instance defining __eq__ only)
        marked = _marked.__wrapped__(view_func)
    if marked is not None:
        return marked
    return LOGIN_REQUIRED_MIDDLEWARE in (getattr(django_settings, "MIDDLEWARE", None) or ())


@lru_cache(maxsize=1024)
def _marked(view_func):
    """What the view itself says: True (it requires a login), False (login_not_required), or None."""
    if getattr(view_func, "login_required", True) is False:
        return False
    if hasattr(view_func, "redirect_field_name") and hasattr(view_func, "login_url"):
        return True
    # The mixins import the auth forms and so its models: not before the app registry is ready.
    from django.contrib.auth.mixins import LoginRequiredMixin

    view_class = getattr(view_func, "view_class", None)
    if isinstance(view_class, type) and issubclass(view_class, LoginRequiredMixin):
        return True
    return None
