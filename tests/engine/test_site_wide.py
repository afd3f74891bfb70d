"""Site-wide counts: reset from code and from the admin, and headers that do not publish the site's activity."""

import pytest
from asgiref.sync import async_to_sync
from django.contrib.admin.models import CHANGE, LogEntry
from django.test.utils import override_settings
from django.urls import reverse

import throttling
from tests.support.helpers import messages_of
from throttling.engine import decision as reasons

pytestmark = pytest.mark.django_db

RESET = "admin:throttling_actionpolicy_reset"


def lock_out(action, limit, target=None):
    for i in range(limit):
        assert throttling.check(f"visitor{i}", action, target=target).allowed
    refused = throttling.check("latecomer", action, target=target)
    assert not refused.allowed and refused.reason == reasons.THROTTLED


def test_reset_none_resets_the_site_wide_count_and_every_targets_count(redis_server, policy):
    policy("raid", 60, 3, scope="site")
    policy("raid-x", 60, 3, scope="site")  # a name the first one's pattern could span
    lock_out("raid", 3)
    for target in ("thread-7", "thread-8", "tag:{odd}*"):
        lock_out("raid", 3, target=target)
    lock_out("raid-x", 3, target="thread-7")
    throttling.reset(None, "raid", target="thread-7")  # one target's count alone
    assert throttling.check("latecomer", "raid", target="thread-7").allowed
    assert not throttling.check("latecomer", "raid", target="thread-8").allowed
    assert not throttling.check("latecomer", "raid").allowed
    throttling.reset(None, "raid")  # the site-wide count and every target's
    for target in (None, "thread-8", "tag:{odd}*"):
        assert throttling.check("latecomer", "raid", target=target).allowed, target
    assert not throttling.check("latecomer", "raid-x", target="thread-7").allowed  # another action: untouched


def test_reset_none_of_every_action_and_its_async_twin(redis_server, policy):
    policy("raid", 60, 2, scope="site")
    lock_out("raid", 2)
    lock_out("raid", 2, target="thread-7")
    throttling.reset(None)
    assert throttling.check("latecomer", "raid").allowed
    assert throttling.check("latecomer", "raid", target="thread-7").allowed
    lock_out("raid", 1)  # one left of two
    lock_out("raid", 1, target="thread-7")
    async_to_sync(throttling.areset)(None, "raid")
    assert throttling.check("latecomer", "raid").allowed
    assert throttling.check("latecomer", "raid", target="thread-7").allowed


def test_the_reset_page_resets_a_site_wide_count(admin_client, redis_server, policy):
    policy("raid", 60, 2, scope="site")
    lock_out("raid", 2)
    page = admin_client.get(reverse(RESET)).content.decode()
    assert 'name="site_wide"' in page
    response = admin_client.post(reverse(RESET), {"site_wide": "on", "action": ["raid"]})
    assert response.status_code == 302
    assert throttling.check("latecomer", "raid").allowed
    assert messages_of(response) == [("success", "The site-wide count was reset for 1 action: raid.")]
    assert LogEntry.objects.filter(action_flag=CHANGE, change_message__contains="site-wide").count() == 1


def test_the_reset_page_never_reports_a_reset_that_changes_nothing(admin_client, redis_server, policy, member):
    policy("raid", 60, 2, scope="site")
    lock_out("raid", 2)
    # A member has no count of their own on a site-wide policy.
    response = admin_client.post(reverse(RESET), {"member": "alice", "action": ["raid"]})
    assert response.status_code == 200 and "member" in response.context["form"].errors
    response = admin_client.post(reverse(RESET), {"site_wide": "on", "action": ["reply"]})
    assert response.status_code == 200 and "site_wide" in response.context["form"].errors
    response = admin_client.post(reverse(RESET), {"action": ["raid"]})
    assert response.status_code == 200 and "member" in response.context["form"].errors
    assert not throttling.check("latecomer", "raid").allowed
    assert not LogEntry.objects.exists()


@pytest.mark.urls("tests.support.urlconfs.adapters")
def test_site_wide_headers_are_not_sent_to_anonymous_visitors_unless_the_site_asks(
    client, redis_server, policy, member
):
    policy("reply", 60, 50, scope="site")
    anonymous = client.post("/reply/", {"text": "hi"})
    assert anonymous.status_code == 201
    assert "RateLimit" not in anonymous and "RateLimit-Policy" not in anonymous
    client.force_login(member)
    signed_in = client.post("/reply/", {"text": "hi"})
    assert signed_in["RateLimit"] == '"reply-60";r=48;t=60'
    client.logout()
    with override_settings(THROTTLING_SITE_HEADERS=True):
        assert client.post("/reply/", {"text": "hi"})["RateLimit"] == '"reply-60";r=47;t=60'


@pytest.mark.urls("tests.support.urlconfs.adapters")
def test_a_site_wide_refusal_still_says_when_to_come_back(client, redis_server, policy):
    policy("reply", 60, 1, scope="site")
    assert client.post("/reply/", {"text": "hi"}).status_code == 201
    refused = client.post("/reply/", {"text": "hi"})
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert "RateLimit" not in refused
