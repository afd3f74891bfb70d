"""What a moderator or a visitor can change never breaks a decision: impossible costs, shadow mode on a
Redis that is down, targets of any size, window rows past the sliding log's cap."""

import gc
import tracemalloc

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import AnonymousUser, Group
from django.core.checks import run_checks
from django.test import RequestFactory
from django.test.utils import override_settings
from django.urls import reverse

import throttling
import throttling.engine.decision
from throttling.engine import decision as reasons
from throttling.engine.policies.cache import load_policies, policies
from throttling.models import ActionPolicy, ActionWindow, MemberOverride, PolicyTier

pytestmark = pytest.mark.django_db


# An impossible cost is a refusal, never an exception


def test_a_cost_an_override_makes_impossible_is_refused_with_a_message(redis_server, policy, member):
    policy("reply", 60, 3)
    MemberOverride.objects.create(user=member, action="reply", multiplier="0.5", reason="Slow down.")
    decision = throttling.check(member, "reply", cost=2)
    assert not decision.allowed and decision.reason == reasons.TOO_COSTLY
    assert decision.limit == 1 and decision.retry_after == 0
    assert "at most 1" in decision.message and "cannot be done" in decision.message
    assert throttling.check(member, "reply").allowed  # a cost of 1 still fits the scaled window


def test_a_cost_a_tier_makes_impossible_is_refused_and_peek_agrees(redis_server, policy, member):
    newcomers = Group.objects.create(name="newcomers")
    member.groups.add(newcomers)
    p = policy("reply", 60, 3)
    PolicyTier.objects.create(policy=p, position=1, group=newcomers, multiplier="0.5")
    assert throttling.peek(member, "reply", cost=2).reason == reasons.TOO_COSTLY
    assert throttling.check(member, "reply", cost=2).reason == reasons.TOO_COSTLY


def test_a_shadow_policy_admits_a_cost_above_its_limit(redis_server, policy, member):
    policy("reply", 60, 1, mode="shadow")
    decision = throttling.check(member, "reply", cost=2)
    assert decision.allowed and decision.reason == reasons.SHADOW


def test_async_decisions_refuse_an_impossible_cost_too(redis_server, policy, member):
    policy("reply", 60, 1)
    decision = async_to_sync(throttling.acheck)(member, "reply", cost=3)
    assert not decision.allowed and decision.reason == reasons.TOO_COSTLY


@pytest.mark.urls("tests.support.urlconfs.adapters")
def test_a_decorated_view_with_an_impossible_cost_answers_429_not_500(client, redis_server, policy, member):
    policy("reply", 60, 3)
    MemberOverride.objects.create(user=member, action="reply", multiplier="0.5", reason="Slow down.")
    client.force_login(member)
    response = client.post(reverse("costly"), {"body": "what I wrote"})
    assert response.status_code == 429
    assert "what I wrote" in response.content.decode()


@pytest.mark.urls("tests.support.urlconfs.adapters")
def test_check_w005_warns_about_a_declared_cost_the_policy_never_admits(policy):
    policy("reply", 60, 1)
    warnings = [m for m in run_checks() if m.id == "throttling.W005"]
    assert len(warnings) == 1 and warnings[0].obj == "reply"
    assert "cost=2" in warnings[0].msg and "adapters_views" in warnings[0].msg and warnings[0].hint
    ActionPolicy.objects.filter(action="reply").update(max_count=2)
    assert not [m for m in run_checks() if m.id == "throttling.W005"]


# Shadow mode never refuses


@pytest.mark.parametrize("site_fail_open, policy_failure", [(True, "closed"), (False, "default")])
def test_a_shadow_policy_admits_when_redis_is_down_and_fails_closed(
    own_redis, policy, member, site_fail_open, policy_failure
):
    policy("reply", 60, 5, mode="shadow", on_backend_failure=policy_failure)
    policy("post", 60, 5, on_backend_failure=policy_failure)
    with override_settings(THROTTLING_FAIL_OPEN=site_fail_open):
        assert throttling.check(member, "reply").allowed
        own_redis.kill()
        shadow = throttling.check(member, "reply")
        enforced = throttling.check(member, "post")
    assert shadow.allowed and shadow.reason == reasons.BACKEND_FAILURE and shadow.retry_after == 0
    assert not enforced.allowed and enforced.reason == reasons.BACKEND_FAILURE  # enforce still fails closed


# Targets and identities of any size


def test_large_distinct_targets_and_identities_do_not_pile_up_in_memory(redis_server, policy):
    policy("reply", 60, 5)
    big = "x" * 1_000_000
    throttling.peek("warm-up", "reply", target="warm-up")
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        with override_settings(THROTTLING_NUM_PROXIES=2):
            for i in range(60):
                throttling.peek(f"{i}{big}", "reply", target=f"{big}{i}")
                # A forwarded address is one more text a visitor writes.
                request = RequestFactory().post("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=f"{big}{i}, 10.0.0.2")
                request.user = AnonymousUser()
                throttling.peek(request, "reply")
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # 180 MB of distinct text went through; what stays is hashes and keys, a few MB at most.
    assert grown < 10_000_000, grown


def test_long_texts_keep_their_hashed_identity(redis_server, policy):
    policy("reply", 60, 1)
    long_text = "ü" * 500
    assert throttling.check(long_text, "reply").allowed
    refused = throttling.check(long_text, "reply")
    assert not refused.allowed and refused.identity.startswith("s:%h") and len(refused.identity) < 64


# The sliding log's cap holds for every row


def _log_policy_with_raw_window(policy, max_count=1_000_000):
    p = policy("reply", 60, 5)
    # bulk_create skips save(), where the cap of a window row is checked.
    ActionWindow.objects.bulk_create([ActionWindow(policy=p, period=3600, max_count=max_count)])
    return p


def test_window_rows_past_the_log_cap_are_decided_capped(redis_server, policy):
    _log_policy_with_raw_window(policy)
    spec = load_policies()["reply"]
    assert spec.windows == ((60, 5), (3600, 1000))
    assert spec.capped
    decision = throttling.check("ann", "reply")
    assert decision.windows == ((60, 5), (3600, 1000))


def test_a_bucket_policy_switched_to_the_log_by_update_is_capped(redis_server, policy):
    p = policy("reply", 60, 5, algorithm="token_bucket", windows=[(3600, 50_000)])
    ActionPolicy.objects.filter(pk=p.pk).update(algorithm="sliding_log")
    policies.clear()
    assert throttling.check("ann", "reply").windows == ((60, 5), (3600, 1000))


def test_check_w006_lists_policies_decided_capped(policy):
    _log_policy_with_raw_window(policy)
    policy("post", 60, 5, windows=[(3600, 1000)])
    warnings = [m for m in run_checks() if m.id == "throttling.W006"]
    assert [w.obj for w in warnings] == ["reply"]
    assert "1,000" in warnings[0].msg and warnings[0].hint


def test_the_admin_shows_the_capped_limit_with_a_warning(admin_client, policy):
    p = _log_policy_with_raw_window(policy)
    listing = admin_client.get(reverse("admin:throttling_actionpolicy_changelist")).content.decode()
    assert "decided as 5 per minute, 1000 per hour" in listing
    page = admin_client.get(reverse("admin:throttling_actionpolicy_change", args=[p.pk])).content.decode()
    assert "decided as 5 per minute, 1000 per hour" in page and "1,000" in page
