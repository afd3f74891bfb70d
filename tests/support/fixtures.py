"""Fixtures the main suite and the integrations share (each conftest imports them)."""

import pytest
import redis
from django.test import Client


@pytest.fixture
def redis_client(redis_server):
    """A client of the run's own Redis (the conftest's `redis_server`)."""
    client = redis.Redis.from_url(redis_server.url)
    yield client
    client.close()


@pytest.fixture
def browser(member):
    """The member's web client, signed in."""
    client = Client()
    client.force_login(member)
    return client
