"""Fixtures: a throwaway redis-server per session, a clean policy cache per test."""

import os
import signal

import pytest
import redis
from django.test.utils import override_settings

from demo_site.redis_server import RedisServer
from tests.helpers import redis_caches


@pytest.fixture(scope="session")
def redis_server():
    """The suite's own Redis on a free loopback port; the only server tests touch."""
    server = RedisServer()
    server.start()
    with override_settings(CACHES=redis_caches(server.url)):
        yield server
    server.stop()


@pytest.fixture
def own_redis():
    """A server one test may kill, stall or restart without disturbing the others."""
    server = RedisServer()
    server.start()
    with override_settings(CACHES=redis_caches(server.url)):
        yield server
    if server.pid:
        try:
            os.kill(server.pid, signal.SIGCONT)  # in case the test stalled it
        except OSError:
            pass
    server.stop()


@pytest.fixture
def member(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def redis_client(redis_server):
    client = redis.Redis.from_url(redis_server.url)
    yield client
    client.close()


@pytest.fixture(autouse=True)
def _clean_state(request):
    """Every test starts with an empty Redis (ours) and no cached policies."""
    from throttling import core

    if "redis_server" in request.fixturenames or "redis_client" in request.fixturenames:
        server = request.getfixturevalue("redis_server")
        if server.running:
            redis.Redis.from_url(server.url).flushall()
    core.policies.clear()
    yield
    core.policies.clear()


@pytest.fixture
def policy(db):
    """Factory: policy("reply", 60, 5, windows=[(3600, 20)])."""
    from throttling.models import ActionPolicy, ActionWindow

    def make(action, period, max_count, *, windows=(), **fields):
        ActionPolicy.objects.filter(action=action).delete()  # the data migration's defaults
        p = ActionPolicy.objects.create(action=action, period=period, max_count=max_count, **fields)
        for extra_period, extra_max in windows:
            ActionWindow.objects.create(policy=p, period=extra_period, max_count=extra_max)
        return p

    return make
