"""System checks that escalations can be sent: a Celery app of the project's and a broker it can load."""

from django.core.checks import Warning, register
from django.utils.translation import gettext as _

from ..conf import settings


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
