"""System checks (throttling.E0xx / W0xx), one module per topic; importing this package registers them all."""

from .backend import check_cache_alias, check_eviction, check_redis_url
from .middleware import check_bindings, check_middleware
from .penalties import check_celery_app, check_celery_broker
from .policies import check_capped_policies
from .replay_sources import check_history_indexes, check_history_sources
from .settings import check_default_policies, check_metrics, check_moderators, check_settings
from .views import check_view_actions, check_view_costs

__all__ = [
    "check_bindings",
    "check_cache_alias",
    "check_capped_policies",
    "check_celery_app",
    "check_celery_broker",
    "check_default_policies",
    "check_eviction",
    "check_history_indexes",
    "check_history_sources",
    "check_metrics",
    "check_middleware",
    "check_moderators",
    "check_redis_url",
    "check_settings",
    "check_view_actions",
    "check_view_costs",
]
