"""Community controls against a real Redis: shadow mode, site-wide limits, targets, trust tiers,
member overrides, RateLimit headers and throttle_key."""

import re
import time
from datetime import timedelta
from decimal import Decimal

import pytest
import redis
from django.contrib.auth.models import AnonymousUser, Group
from django.db import IntegrityError, connection
from django.http import HttpResponse
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext, override_settings
from django.utils import timezone
from rest_framework.test import APIClient

import throttling
import throttling.engine.decision
import throttling.engine.keys
import throttling.engine.offences.report_batches
import throttling.engine.policies.cache
import throttling.engine.policies.trust
from tests.support.penalties import Signals
from throttling import penalties, signals
from throttling.decorators import throttle_action
from throttling.engine.background.poller import poller
from throttling.models import MemberOverride, OffenceRecord, PolicyTier

pytestmark = pytest.mark.django_db


# ----------------------------------------------------------------------------- shadow mode


def test_a_shadow_policy_admits_everything_and_counts_what_it_would_have_refused(redis_client, policy, member):
    policy("reply", 60, 2, mode="shadow", offence_threshold=2)
    with Signals(signals.action_throttled) as throttled:
        decisions = [throttling.check(member, "reply") for _ in range(6)]
    assert all(d.allowed for d in decisions)
    assert [d.reason for d in decisions] == [throttling.engine.decision.ADMITTED] * 2 + [
        throttling.engine.decision.SHADOW
    ] * 4
    assert [d.offences for d in decisions] == [0, 0, 1, 2, 3, 4]
    assert all(d.retry_after == 0 for d in decisions)
    assert len(throttled.sent) == 1 and throttled.sent[0]["decision"].reason == throttling.engine.decision.SHADOW
    # Above the threshold, but a shadow policy never escalates: no pending mark, nothing queued.
    assert not any(d.escalated for d in decisions)
    assert not redis_client.exists(throttling.engine.keys.state_keys(f"u:{member.pk}", "reply")[3])
    # Only what enforcement would have admitted is in the log: switching to enforce refuses at once.
    assert redis_client.zcard(throttling.engine.keys.state_keys(f"u:{member.pk}", "reply")[0]) == 2


def test_shadow_offences_reach_the_report_as_would_have_refused(redis_server, policy, member, admin_client):
    policy("reply", 60, 1, mode="shadow")
    for _ in range(4):
        throttling.check(member, "reply")
    batch = throttling.engine.offences.report_batches.buffer.batch()
    throttling.engine.offences.report_batches.buffer.discard()
    assert throttling.engine.offences.report_batches.store(batch) == 3
    record = OffenceRecord.objects.get()
    assert record.shadow and record.count == 3
    response = admin_client.get("/admin/throttling/penalty/report/")
    html = response.content.decode()
    assert response.context["totals"]["offences"] == 0  # nobody was refused
    assert response.context["totals"]["shadowed"] == 3
    assert "reply, would have refused (shadow)" in html
    assert response.context["offenders"] == []


def test_a_shadow_policy_lets_a_penalised_member_through(redis_server, policy, member, ladder):
    policy("reply", 60, 5, mode="shadow")
    penalties.apply_penalty(member, level=1, duration=timedelta(hours=1), reason="testing")
    decision = throttling.check(member, "reply")
    assert (
        decision.allowed
        and decision.reason == throttling.engine.decision.SHADOW
        and decision.penalty.reason == "testing"
    )


# ----------------------------------------------------------------------------- site-wide scope


def test_a_site_wide_limit_is_one_count_for_everyone(redis_client, policy, member, django_user_model):
    policy("thread", 60, 3, scope="site", offence_threshold=1)
    bob = django_user_model.objects.create_user("bob")
    results = [throttling.check(who, "thread") for who in (member, bob, "visitor-1", member, "visitor-2")]
    assert [d.allowed for d in results] == [True, True, True, False, False]
    assert results[3].remaining == 0 and results[3].retry_after > 0
    # Counted under the site, decided for the member who acted, never escalated.
    assert redis_client.zcard(throttling.engine.keys.state_keys("site", "thread")[0]) == 3
    assert results[3].identity == f"u:{member.pk}" and not results[3].escalated
    assert not redis_client.exists(throttling.engine.keys.state_keys(f"u:{member.pk}", "thread")[0])


def test_a_site_wide_limit_per_target_counts_each_target_once(redis_client, policy):
    policy("reply", 60, 2, scope="site")
    assert [throttling.check(f"v{i}", "reply", target=7).allowed for i in range(3)] == [True, True, False]
    assert throttling.check("v9", "reply", target=8).allowed
    assert redis_client.zcard(throttling.engine.keys.state_keys("site@7", "reply")[0]) == 2


# ----------------------------------------------------------------------------- targets


def test_a_target_counts_per_identity_and_target(redis_client, policy, member):
    policy("reply", 60, 2)
    in_one = [throttling.check(member, "reply", target=41).allowed for _ in range(3)]
    assert in_one == [True, True, False]
    assert throttling.check(member, "reply", target=42).allowed  # another thread
    assert throttling.check(member, "reply").allowed  # no target: its own count
    assert throttling.peek(member, "reply", target=41).remaining == 0
    # The state is per target; offences stay per member and action.
    state, offences = throttling.engine.keys.state_keys(f"u:{member.pk}", "reply", target="41")[:2]
    assert redis_client.zcard(state) == 2 and int(redis_client.get(offences)) == 1
    throttling.reset(member, "reply", target=41)
    assert throttling.peek(member, "reply", target=41).remaining == 2


def test_a_targets_decision_is_refunded_from_its_own_count(redis_server, policy, member):
    policy("reply", 60, 2)
    policy("like", 60, 2, algorithm="token_bucket")
    for action in ("reply", "like"):
        first = throttling.check(member, action, target="t:1")
        assert throttling.refund(first)
        assert throttling.peek(member, action, target="t:1").remaining == 2


def test_hostile_targets_cannot_break_out_of_their_key(redis_server, policy):
    policy("reply", 60, 1)
    assert throttling.check("x", "reply", target="a}:b{c").allowed
    assert throttling.check("x", "reply", target="a").allowed
    assert throttling.check("x", "reply", target="é" * 500).allowed
    with pytest.raises(ValueError, match="target must not be empty"):
        throttling.check("x", "reply", target="")


@pytest.mark.urls("tests.support.urlconfs.adapters")
def test_drf_throttle_target_and_the_decorators_target_count_per_thread(redis_server, policy):
    policy("reply", 60, 1)
    api = APIClient()
    assert api.post("/api/threads/1/replies/").status_code == 201
    assert api.post("/api/threads/1/replies/").status_code == 429
    assert api.post("/api/threads/2/replies/").status_code == 201
    throttling.reset("ip:127.0.0.1", "reply")
    from django.test import Client

    web = Client()
    assert web.post("/threads/5/reply/").status_code == 201
    assert web.post("/threads/5/reply/").status_code == 429
    assert web.post("/threads/6/reply/").status_code == 201


@pytest.mark.urls("tests.support.urlconfs.adapters")
def test_throttle_key_names_the_identity(redis_server, policy):
    policy("reply", 60, 1)
    api = APIClient()
    assert api.post("/api/threads/1/replies/", HTTP_X_API_KEY="key-a").status_code == 201
    # Another address, the same key: the same count.
    assert api.post("/api/threads/1/replies/", HTTP_X_API_KEY="key-a", REMOTE_ADDR="203.0.113.9").status_code == 429
    assert api.post("/api/threads/1/replies/", HTTP_X_API_KEY="key-b").status_code == 201
    assert throttling.peek("key-a", "reply", target=1).remaining == 0
    from django.test import Client

    web = Client()
    assert web.post("/threads/3/reply/", HTTP_X_API_KEY="key-c").status_code == 201
    assert web.post("/threads/3/reply/", HTTP_X_API_KEY="key-c").status_code == 429
    assert web.post("/threads/3/reply/").status_code == 201  # no key: the address


# ----------------------------------------------------------------------------- trust tiers


def _tier(policy_row, multiplier, *, group=None, days=None, position=0):
    return PolicyTier.objects.create(
        policy=policy_row, multiplier=Decimal(str(multiplier)), group=group, new_member_days=days, position=position
    )


def _admitted(who, action, attempts=20):
    return sum(throttling.check(who, action).allowed for _ in range(attempts))


def test_the_first_matching_tier_scales_every_window(redis_server, policy, django_user_model):
    reply = policy("reply", 60, 4, windows=[(3600, 6)])
    trusted = Group.objects.create(name="trusted")
    _tier(reply, 3, group=trusted, position=1)
    _tier(reply, "0.5", days=7, position=2)
    veteran = django_user_model.objects.create_user("veteran")
    veteran.date_joined = timezone.now() - timedelta(days=400)
    veteran.save()
    veteran.groups.add(trusted)
    newcomer = django_user_model.objects.create_user("newcomer")
    regular = django_user_model.objects.create_user("regular")
    regular.date_joined = timezone.now() - timedelta(days=30)
    regular.save()
    throttling.engine.policies.trust.groups.clear()
    assert _admitted(veteran, "reply") == 12  # 4×3 a minute (18 an hour)
    assert throttling.peek(veteran, "reply").limit == 12
    assert _admitted(newcomer, "reply") == 2  # 4×0.5
    assert _admitted(regular, "reply") == 4  # no tier matches
    assert _admitted("anonymous-visitor", "reply") == 4


def test_a_tier_never_takes_a_limit_below_one(redis_server, policy, django_user_model):
    reply = policy("reply", 60, 1)
    _tier(reply, "0.1", days=30)
    newcomer = django_user_model.objects.create_user("fresh")
    assert _admitted(newcomer, "reply") == 1


def test_group_lookups_are_cached_per_member(redis_server, policy, django_user_model):
    reply = policy("reply", 60, 100)
    _tier(reply, 2, group=Group.objects.create(name="trusted"))
    m = django_user_model.objects.create_user("cached")
    throttling.engine.policies.trust.groups.clear()
    throttling.check(m, "reply")  # policies and the member's groups are loaded
    # The background thread's look at the change markers: the saves above moved them, so a
    # look that comes after the first load reloads the policies once; made here, not during the count.
    poller.look(markers=True)
    throttling.check(m, "reply")
    with CaptureQueriesContext(connection) as queries:
        for _ in range(20):
            throttling.check(m, "reply")
    assert len(queries) == 0
    with override_settings(THROTTLING_TRUST_CACHE=0):
        with CaptureQueriesContext(connection) as queries:
            throttling.check(m, "reply")
    assert len(queries) == 1  # one query for the member's groups, none for anything else


# ----------------------------------------------------------------------------- member overrides


def _override(user, *, action="", exempt=False, multiplier=None, expires_in=None, reason="trusted helper"):
    expires = timezone.now() + expires_in if expires_in is not None else None
    return MemberOverride.objects.create(
        user=user, action=action, exempt=exempt, multiplier=multiplier, expires_at=expires, reason=reason
    )


def test_an_exempt_override_lets_the_member_through_for_its_action(redis_server, policy, member):
    policy("reply", 60, 1)
    policy("like", 60, 1)
    _override(member, action="reply", exempt=True)
    decisions = [throttling.check(member, "reply") for _ in range(5)]
    assert all(d.allowed and d.reason == throttling.engine.decision.EXEMPT for d in decisions)
    assert _admitted(member, "like", 3) == 1


def test_a_multiplier_override_beats_the_tiers_and_an_action_override_beats_an_all_actions_one(
    redis_server, policy, member
):
    reply = policy("reply", 60, 2)
    policy("like", 60, 2)
    _tier(reply, "0.5")
    _override(member, multiplier=Decimal("3"))
    _override(member, action="like", multiplier=Decimal("5"))
    assert _admitted(member, "reply") == 6
    assert _admitted(member, "like") == 10


def test_expired_and_revoked_overrides_no_longer_apply(redis_server, policy, member):
    policy("reply", 60, 1)
    _override(member, exempt=True, expires_in=timedelta(seconds=-1))
    revoked = _override(member, exempt=True)
    revoked.revoked_at = timezone.now()
    revoked.save()
    assert _admitted(member, "reply", 3) == 1


def test_an_override_expiring_while_cached_stops_at_its_expiry(redis_server, policy, member):
    policy("reply", 60, 1)
    _override(member, exempt=True, expires_in=timedelta(seconds=1))
    assert throttling.check(member, "reply").reason == throttling.engine.decision.EXEMPT
    time.sleep(1.1)
    assert _admitted(member, "reply", 3) == 1


def test_overrides_are_live_in_other_processes_within_a_second(redis_server, policy, member):
    policy("reply", 60, 1)
    throttling.peek(member, "reply")
    # Another process: its cache is current and polls the change marker.
    _override(member, exempt=True)
    throttling.engine.policies.cache.policies._polled_at = 0  # as if the poll interval passed
    assert throttling.check(member, "reply").reason == throttling.engine.decision.EXEMPT


def test_an_override_must_exempt_or_multiply_and_say_why(member):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        MemberOverride(user=member, exempt=True, multiplier=Decimal("2"), reason="x").full_clean()
    with pytest.raises(ValidationError):
        MemberOverride(user=member, reason="x").full_clean()
    with pytest.raises(ValidationError):
        MemberOverride(user=member, exempt=True, reason=" ").full_clean()
    with pytest.raises(IntegrityError):
        MemberOverride.objects.create(user=member, exempt=True, multiplier=Decimal("2"), reason="x")


def test_overrides_are_granted_and_revoked_in_the_admin_never_deleted(admin_client, admin_user, member):
    response = admin_client.post(
        "/admin/throttling/memberoverride/add/",
        {"user": member.pk, "action": "reply", "multiplier": "2", "reason": "runs the help desk"},
    )
    assert response.status_code == 302, response.context["adminform"].form.errors
    override = MemberOverride.objects.get()
    assert override.created_by == admin_user and override.in_force
    changelist = "/admin/throttling/memberoverride/"
    confirm = admin_client.post(changelist, {"action": "revoke_overrides", "_selected_action": [override.pk]})
    assert confirm.status_code == 200 and b"Reason for revoking" in confirm.content
    missing_reason = admin_client.post(
        changelist, {"action": "revoke_overrides", "_selected_action": [override.pk], "confirm": "yes"}
    )
    assert missing_reason.status_code == 200
    override.refresh_from_db()
    assert override.revoked_at is None
    done = admin_client.post(
        changelist,
        {"action": "revoke_overrides", "_selected_action": [override.pk], "confirm": "yes", "reason": "left the team"},
    )
    assert done.status_code == 302
    override.refresh_from_db()
    assert override.revoked_by == admin_user and override.revoke_reason == "left the team"
    page = admin_client.get(f"{changelist}{override.pk}/change/").content.decode()
    assert "left the team" in page and 'name="reason"' not in page  # read-only once granted
    assert admin_client.post(f"{changelist}{override.pk}/delete/").status_code == 403


# ----------------------------------------------------------------------------- RateLimit headers


def _fields(value):
    return [dict(re.findall(r";(\w)=(\d+)", item)) | {"name": item.split(";")[0].strip()} for item in value.split(",")]


@pytest.mark.urls("tests.support.urlconfs.adapters")
def test_drf_responses_carry_ratelimit_headers_admitted_and_refused(redis_server, policy):
    policy("reply", 60, 2, windows=[(3600, 10)])
    api = APIClient()
    first = api.post("/api/replies/", {"text": "hi"})
    assert first.status_code == 201
    assert _fields(first["RateLimit-Policy"]) == [
        {"name": '"reply-60"', "q": "2", "w": "60"},
        {"name": '"reply-3600"', "q": "10", "w": "3600"},
    ]
    limit = _fields(first["RateLimit"])[0]
    assert limit["name"] == '"reply-60"' and limit["r"] == "1" and 1 <= int(limit["t"]) <= 60
    api.post("/api/replies/", {"text": "two"})
    refused = api.post("/api/replies/", {"text": "three"})
    assert refused.status_code == 429
    assert _fields(refused["RateLimit"])[0]["r"] == "0"
    assert int(_fields(refused["RateLimit"])[0]["t"]) == int(refused["Retry-After"])


@pytest.mark.urls("tests.support.urlconfs.adapters")
def test_decorated_views_carry_them_too_and_the_setting_turns_them_off(redis_server, policy):
    from django.test import Client

    policy("reply", 60, 1)
    web = Client()
    admitted = web.post("/reply/", {"text": "hello"})
    assert "q=1;w=60" in admitted["RateLimit-Policy"] and ";r=0;" in admitted["RateLimit"]
    refused = web.post("/reply/", {"text": "again"})
    assert refused.status_code == 429 and refused["Retry-After"] and refused["RateLimit"]
    with override_settings(THROTTLING_HEADERS=False):
        off = web.post("/reply/", {"text": "quiet"})
    assert off.status_code == 429 and "RateLimit" not in off and off["Retry-After"]


@pytest.mark.urls("tests.support.urlconfs.adapters")
def test_headers_show_a_members_scaled_limits_and_none_for_shadow_policies(redis_server, policy, member):
    reply = policy("reply", 60, 2)
    _override(member, multiplier=Decimal("3"))
    api = APIClient()
    api.force_authenticate(member)
    assert "q=6;w=60" in api.post("/api/replies/", {"text": "hi"})["RateLimit-Policy"]
    reply.mode = "shadow"
    reply.save()
    assert "RateLimit" not in api.post("/api/replies/", {"text": "hi"})


@pytest.mark.urls("tests.support.urlconfs.adapters")
def test_a_shadow_blocked_member_gets_the_same_headers_as_anyone(redis_server, policy, member, django_user_model):
    from throttling.models import Block

    policy("reply", 60, 3, windows=[(3600, 10)])
    other = django_user_model.objects.create_user("bystander")
    Block.objects.create(user=member, severity="shadow", reason="trying a block before enforcing it")
    answers = {}
    for who in (member, other):
        api = APIClient()
        api.force_authenticate(who)
        answers[who] = [api.post("/api/replies/", {"text": f"hi {n}"}) for n in range(4)]
    for shadowed, anyone in zip(answers[member], answers[other], strict=True):
        assert shadowed.status_code == anyone.status_code
        assert shadowed["RateLimit-Policy"] == anyone["RateLimit-Policy"]
        assert _fields(shadowed["RateLimit"])[0]["r"] == _fields(anyone["RateLimit"])[0]["r"]
    assert [_fields(a["RateLimit"])[0]["r"] for a in answers[member]] == ["2", "1", "0", "0"]


def test_a_penalised_members_headers_say_nothing_is_left(redis_server, policy, member, ladder):
    from throttling.adapters.ratelimit_headers import ratelimit_headers

    policy("reply", 60, 5)
    penalties.apply_penalty(member, level=1, duration=timedelta(minutes=30), reason="spam")
    headers = ratelimit_headers(throttling.check(member, "reply"))
    assert headers["RateLimit"].startswith('"reply-60";r=0;t=')
    assert 1790 <= int(headers["RateLimit"].rsplit("=", 1)[1]) <= 1800


# ----------------------------------------------------------------------------- async


def test_async_decisions_take_targets_and_tiers(redis_server, policy, django_user_model):
    import asyncio

    from asgiref.sync import async_to_sync

    reply = policy("reply", 60, 2)
    trusted = Group.objects.create(name="trusted")
    _tier(reply, 2, group=trusted)
    m = django_user_model.objects.create_user("async-trusted")
    m.groups.add(trusted)
    throttling.engine.policies.trust.groups.clear()

    async def gather():
        return await asyncio.gather(*(throttling.acheck(m, "reply", target=9) for _ in range(8)))

    decisions = async_to_sync(gather)()
    assert sum(d.allowed for d in decisions) == 4
    assert throttling.peek(m, "reply").remaining == 4  # the untargeted count is untouched
    assert (
        redis.Redis.from_url(redis_server.url).zcard(
            throttling.engine.keys.state_keys(f"u:{m.pk}", "reply", target="9")[0]
        )
        == 4
    )


def test_stacked_limits_list_every_policy_and_name_the_tightest(redis_server, policy):
    policy("reply", 60, 5)
    policy("thread-reply", 600, 2)

    @throttle_action("reply")
    @throttle_action("thread-reply", target=lambda request: "t1")
    def view(request):
        return HttpResponse("ok", status=201)

    request = RequestFactory().post("/", {"text": "hi"})
    request.user = AnonymousUser()
    response = view(request)
    assert response.status_code == 201
    policies = response["RateLimit-Policy"]
    assert '"thread-reply-600";q=2;w=600' in policies and '"reply-60";q=5;w=60' in policies
    assert response["RateLimit"].startswith('"thread-reply-600";r=1;')  # 1 left there, 4 in the other
