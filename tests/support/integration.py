"""Fixtures of the integration tests on apps from the package index (integration/…): the run's own Redis,
named by THROTTLING_REDIS_URL, and a clean start for every test. Each integration's conftest imports them."""

import pytest
import redis
from django.core.cache import caches
from django.test.utils import override_settings

from demo_site.redis_server import RedisServer
from tests.support.fixtures import redis_client  # noqa: F401  (the main suite's, every integration's too)
from tests.support.helpers import forget_process_state, ladder_back_after_flush


@pytest.fixture(scope="session")
def redis_server():
    """The run's own Redis on a free loopback port, the only server the tests touch."""
    server = RedisServer()
    server.start()
    with override_settings(THROTTLING_REDIS_URL=server.url):
        yield server
    server.stop()


@pytest.fixture(autouse=True)
def _clean_state(request, redis_server):
    """Every test starts with an empty throttle, no cached policies and the site's caches empty (the app's
    own rate limit unspent, the rows it caches read afresh); a transactional test's flush gives the
    penalty ladder back."""
    # Only the throttle's database: a broker on the same server (db 1) keeps its queue bindings.
    redis.Redis.from_url(redis_server.url).flushdb()
    forget_process_state()
    for cache in caches.all():
        cache.clear()
    ladder_back_after_flush(request)
    yield
    forget_process_state()
