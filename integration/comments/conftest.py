"""Fixtures of the comments integration: its own redis-server, a flat page to comment on, a member.

The helpers are the main suite's (tests/support), imported from the top of the checkout.
"""

import pytest

from tests.support import integration

PASSWORD = "comments-pw"

# The run's own Redis, a client of it and a clean start for every test, as every integration has them.
redis_server = integration.redis_server
redis_client = integration.redis_client
_clean_state = integration._clean_state


@pytest.fixture
def member(django_user_model):
    return django_user_model.objects.create_user("alice", email="alice@example.com", password=PASSWORD)


@pytest.fixture
def page(db):
    """A flat page of the site, the object comments are on."""
    from django.contrib.flatpages.models import FlatPage
    from django.contrib.sites.models import Site

    flat = FlatPage.objects.create(url="/about/", title="About", content="Who we are.")
    flat.sites.add(Site.objects.get_current())
    return flat
