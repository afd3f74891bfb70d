"""System checks of the throttle's Redis: its URL or cache alias, and eviction."""

from django.conf import settings as django_settings
from django.core.checks import Error, Tags, Warning, register
from django.utils.translation import gettext as _

from ..backends.redis_urls import parse
from ..conf import settings
from ..engine.background import eviction_watch as watch
from ..exceptions import ImproperlyConfiguredBackend


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


@register()
def check_eviction(app_configs=None, **kwargs):
    """The throttle's Redis must not evict its keys: an evicted penalty mirror admits a penalised member."""
    problem = watch.current_risk()
    if problem is None:
        return []
    return [Warning(problem, hint=str(watch.HINT), id="throttling.W004")]
