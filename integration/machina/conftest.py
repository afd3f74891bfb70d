"""Fixtures of the machina integration: its own redis-server, a forum with a topic, a member.

The helpers are the main suite's (tests/support), imported from the top of the checkout.
"""

import pytest

from tests.support import integration

PASSWORD = "machina-pw"

# The run's own Redis, a client of it and a clean start for every test, as every integration has them.
redis_server = integration.redis_server
redis_client = integration.redis_client
_clean_state = integration._clean_state


def _user(django_user_model, username):
    return django_user_model.objects.create_user(username, email=f"{username}@example.com", password=PASSWORD)


@pytest.fixture
def member(django_user_model):
    return _user(django_user_model, "alice")


@pytest.fixture
def forum(db):
    """A forum (machina's model, no views)."""
    from machina.apps.forum.models import Forum

    return Forum.objects.create(name="General", type=Forum.FORUM_POST)


@pytest.fixture
def topic(forum, django_user_model):
    """A topic in `forum` with its first post, started by another member."""
    from machina.apps.forum_conversation.models import Post, Topic

    author = _user(django_user_model, "bob")
    topic = Topic.objects.create(
        forum=forum, poster=author, subject="Welcome", type=Topic.TOPIC_POST, status=Topic.TOPIC_UNLOCKED
    )
    Post.objects.create(topic=topic, poster=author, subject="Welcome", content="First!")
    return topic


@pytest.fixture
def member_client(client, member):
    assert client.login(username=member.username, password=PASSWORD)
    return client
