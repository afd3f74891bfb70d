"""Fixtures of the Spirit integration: its own redis-server and Celery worker, a forum with a topic.

The helpers are the main suite's (tests/support), imported from the top of the checkout.
"""

import pytest

import tests.support.processes.celery_app  # noqa: F401  (the Celery app escalations are sent with)
from tests.support import integration
from tests.support.helpers import broker_url

SETTINGS = "integration.spirit.settings"
PASSWORD = "spirit-pw"

# The run's own Redis, a client of it and a clean start for every test, as every integration has them.
redis_server = integration.redis_server
redis_client = integration.redis_client
_clean_state = integration._clean_state


@pytest.fixture(scope="session", autouse=True)
def _broker(redis_server):
    """The run's own Redis is the broker's too: the throttle's is db 0, the broker's db 1."""
    from tests.support.processes.celery_app import app

    app.conf.broker_url = broker_url(redis_server)
    # Escalations are sent with Celery's current app: this one, not the demo's (which importing
    # tests.support made current in this thread).
    app.set_current()


@pytest.fixture
def spirit_rate_limit_off(settings):
    """Spirit's own "wait 10 s" limit switched off, so only ours answers."""
    settings.ST_RATELIMIT_ENABLE = False


@pytest.fixture(scope="session")
def _session_worker(redis_server, django_db_setup, django_db_blocker):
    from tests.support.processes.celery_worker import CeleryWorker

    with django_db_blocker.unblock():
        worker = CeleryWorker(redis_server.url, broker_url(redis_server), name="spirit", settings=SETTINGS).start()
    yield worker
    worker.stop()


@pytest.fixture
def celery_worker(_session_worker, transactional_db):
    """A real worker with Spirit's settings on the run's broker; tests using it commit what they write."""
    from tests.support.processes.celery_app import app

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
