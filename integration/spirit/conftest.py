"""Fixtures of the Spirit integration: its own redis-server and Celery worker, a forum with a topic.

The helpers are the main suite's (tests/support), imported from the top of the checkout.
"""

import pytest
import redis
from django.core.cache import caches
from django.test.utils import override_settings

import tests.support.celery_app  # noqa: F401  (the Celery app escalations are sent with)
from demo_site.redis_server import RedisServer
from tests.support.fixtures import redis_client  # noqa: F401  (a fixture, shared with the main suite)
from tests.support.helpers import broker_url, forget_process_state, ladder_back_after_flush

SETTINGS = "integration.spirit.settings"
PASSWORD = "spirit-pw"


@pytest.fixture(scope="session")
def redis_server():
    """The run's own Redis on a free loopback port: the throttle's (db 0) and the broker's (db 1)."""
    from tests.support.celery_app import app

    server = RedisServer()
    server.start()
    app.conf.broker_url = broker_url(server)
    # Escalations are sent with Celery's current app: this one, not the demo's (which importing
    # tests.support made current in this thread).
    app.set_current()
    with override_settings(THROTTLING_REDIS_URL=server.url):
        yield server
    server.stop()


@pytest.fixture(autouse=True)
def _clean_state(request, redis_server):
    """Every test starts with an empty throttle, no cached policies and Spirit's rate limit unspent."""
    redis.Redis.from_url(redis_server.url).flushdb()
    forget_process_state()
    caches["st_rate_limit"].clear()
    caches["default"].clear()
    ladder_back_after_flush(request)
    yield
    forget_process_state()


@pytest.fixture
def spirit_rate_limit_off(settings):
    """Spirit's own "wait 10 s" limit switched off, so only ours answers."""
    settings.ST_RATELIMIT_ENABLE = False


@pytest.fixture(scope="session")
def _session_worker(redis_server, django_db_setup, django_db_blocker):
    from tests.support.celery_worker import CeleryWorker

    with django_db_blocker.unblock():
        worker = CeleryWorker(redis_server.url, broker_url(redis_server), name="spirit", settings=SETTINGS).start()
    yield worker
    worker.stop()


@pytest.fixture
def celery_worker(_session_worker, transactional_db):
    """A real worker with Spirit's settings on the run's broker; tests using it commit what they write."""
    from tests.support.celery_app import app

    app.control.purge()
    return _session_worker


def _user(django_user_model, username):
    return django_user_model.objects.create_user(username, email=f"{username}@example.com", password=PASSWORD)


@pytest.fixture
def member(django_user_model):
    return _user(django_user_model, "alice")


@pytest.fixture
def author(django_user_model):
    return _user(django_user_model, "bob")


@pytest.fixture
def topic(author):
    """A public category and one topic in it, started by `author` (Spirit's models, no views)."""
    from spirit.category.models import Category
    from spirit.comment.models import Comment
    from spirit.topic.models import Topic

    category = Category.objects.create(title="General", slug="general")
    topic = Topic.objects.create(user=author, category=category, title="Welcome", slug="welcome")
    Comment.objects.create(user=author, topic=topic, comment="First!", comment_html="<p>First!</p>")
    return topic


@pytest.fixture
def member_client(client, member):
    """Django's test client, signed in as `member` through Spirit's own login form."""
    from django.urls import reverse

    response = client.post(reverse("spirit:user:auth:login"), {"username": member.username, "password": PASSWORD})
    assert response.status_code == 302, response.content[:500]
    return client
