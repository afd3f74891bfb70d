"""Blocks of address ranges and members: decided in the process, each severity, expiry, per action."""

import time
from datetime import timedelta
from decimal import Decimal

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import ValidationError
from django.test import RequestFactory
from django.utils import timezone

import throttling
from tests.support.helpers import Monitor, deciding_connections
from throttling.engine.countermeasures.in_force import measures
from throttling.engine.decision import ADMITTED, SHADOW
from throttling.engine.offences.report_batches import buffer
from throttling.models import Block

pytestmark = pytest.mark.django_db


def request_from(address, user=None, forwarded=None):
    request = RequestFactory().post("/reply/", REMOTE_ADDR=address)
    if forwarded:
        request.META["HTTP_X_FORWARDED_FOR"] = forwarded
    request.user = user or AnonymousUser()
    return request


def block(**fields):
    fields.setdefault("reason", "spam wave from a hosting provider")
    return Block.objects.create(**fields)


def test_an_ipv4_range_refuses_visitors_and_members_from_it_without_a_redis_command(redis_server, policy, member):
    policy("reply", 60, 5)
    block(network="203.0.113.0/24")
    throttling.check("warm-up", "reply")
    with Monitor(redis_server.url) as monitor:
        visitor = throttling.check(request_from("203.0.113.9"), "reply")
        signed_in = throttling.check(request_from("203.0.113.200", member), "reply")
    assert monitor.sent_by(deciding_connections()) == []
    for refused in (visitor, signed_in):
        assert not refused.allowed and refused.reason == "blocked"
        # The member is never told which range, nor the moderator's reason.
        assert "203.0.113" not in refused.message and "spam" not in refused.message
        assert refused.message == "This action is not available to you at the moment."
        assert refused.retry_after == 3600  # no end: an hour, then asked again
    assert throttling.check(request_from("203.0.114.1"), "reply").reason == ADMITTED
    assert throttling.check(request_from("198.51.100.1", member), "reply").reason == ADMITTED


def test_ipv6_ranges_and_single_addresses_match_the_whole_client_address(redis_server, policy):
    policy("reply", 60, 5)
    block(network="2001:db8:1::/48")
    # A /128 inside one /64: visitors are counted per /64, but a block matches the address itself.
    block(network="2001:db8:2::7")
    block(network="192.0.2.0/24")
    assert Block.objects.get(network="2001:db8:2::7/128")  # a single address is stored as a /128
    assert not throttling.check(request_from("2001:db8:1:ffff::5"), "reply").allowed
    assert not throttling.check(request_from("2001:db8:2::7"), "reply").allowed
    assert throttling.check(request_from("2001:db8:2::8"), "reply").allowed
    assert throttling.check(request_from("2001:db8:3::7"), "reply").allowed
    # An IPv4 client written as IPv6 (a dual-stack socket) is the IPv4 address.
    assert not throttling.check(request_from("::ffff:192.0.2.1"), "reply").allowed


def test_the_client_address_follows_num_proxies(redis_server, policy, settings):
    policy("reply", 60, 5)
    block(network="203.0.113.0/24")
    # Not trusted by default: a visitor cannot escape a block, nor frame another, with a header.
    assert not throttling.check(request_from("203.0.113.9", forwarded="198.51.100.1"), "reply").allowed
    assert throttling.check(request_from("198.51.100.1", forwarded="203.0.113.9"), "reply").allowed
    settings.THROTTLING_NUM_PROXIES = 1
    assert not throttling.check(request_from("198.51.100.1", forwarded="203.0.113.9"), "reply").allowed
    assert throttling.check(request_from("203.0.113.9", forwarded="198.51.100.1"), "reply").allowed


def test_a_member_block_follows_the_member_wherever_they_connect(redis_server, policy, member, django_user_model):
    policy("reply", 60, 5)
    other = django_user_model.objects.create_user("bob")
    block(user=member, reason="sockpuppet of a banned account")
    assert throttling.check(member, "reply").reason == "blocked"
    assert throttling.check(request_from("198.51.100.1", member), "reply").reason == "blocked"
    assert throttling.check(other, "reply").allowed
    # Counted under a key (an API key), the member behind the request is still blocked.
    assert throttling.check(request_from("198.51.100.1", member), "reply", key="api-key-1").reason == "blocked"


def test_per_action_blocks_leave_other_actions_alone(redis_server, policy):
    policy("reply", 60, 5)
    policy("post", 60, 5)
    block(network="203.0.113.0/24", actions="post, like")
    assert Block.objects.get().actions == "post,like"
    assert throttling.check(request_from("203.0.113.9"), "post").reason == "blocked"
    assert throttling.check(request_from("203.0.113.9"), "reply").allowed


def test_an_expired_block_stops_applying_on_time_and_is_kept(redis_server, policy):
    policy("reply", 60, 50)
    b = block(network="203.0.113.0/24", expires_at=timezone.now() + timedelta(seconds=0.6))
    refused = throttling.check(request_from("203.0.113.9"), "reply")
    assert refused.reason == "blocked"
    assert 0 < refused.retry_after <= 1  # its end, not an hour
    assert "Try again in 1 second" in refused.message
    time.sleep(0.7)
    # No reload, no task: the decision reads the block's end.
    assert throttling.check(request_from("203.0.113.9"), "reply").allowed
    assert Block.objects.filter(pk=b.pk).exists()


def test_when_the_narrowest_block_expires_the_range_around_it_applies(redis_server, policy):
    policy("reply", 60, 4)
    block(network="203.0.0.0/16")
    block(
        network="203.0.113.0/24",
        severity="loosen",
        multiplier=Decimal("3"),
        reason="a school behind these addresses",
        expires_at=timezone.now() + timedelta(seconds=0.6),
    )
    school = throttling.check(request_from("203.0.113.9"), "reply")
    assert school.allowed and school.limit == 12  # the narrowest range decides: loosened
    assert throttling.check(request_from("203.0.5.1"), "reply").reason == "blocked"
    time.sleep(0.7)
    assert throttling.check(request_from("203.0.113.9"), "reply").reason == "blocked"


def test_a_range_for_this_action_wins_over_one_as_wide_for_every_action(redis_server, policy):
    policy("post", 60, 4)
    block(network="203.0.113.0/24")
    block(network="203.0.113.0/24", actions="post", severity="tighten", multiplier=Decimal("0.5"), reason="noisy")
    # A narrower range for every action beats a wider one for this action.
    block(network="203.0.113.9/32", severity="loosen", multiplier=Decimal("2"), reason="the library's address")
    assert throttling.check(request_from("203.0.113.10"), "post").limit == 2
    assert throttling.check(request_from("203.0.113.9"), "post").limit == 8


def test_between_a_members_block_and_their_ranges_the_more_severe_wins(redis_server, policy, member, django_user_model):
    policy("reply", 60, 4)
    warned = django_user_model.objects.create_user("bob")
    block(user=member, severity="loosen", multiplier=Decimal("2"), reason="trusted helper")
    block(network="203.0.113.0/24")
    block(user=warned, severity="loosen", multiplier=Decimal("2"), reason="trusted helper")
    block(user=warned, severity="tighten", multiplier=Decimal("0.5"), reason="warned twice")
    block(network="198.51.100.0/24", severity="loosen", multiplier=Decimal("3"), reason="a school")
    assert throttling.check(request_from("203.0.113.9", member), "reply").reason == "blocked"
    assert throttling.check(request_from("192.0.2.1", member), "reply").limit == 8
    # Of a member's own blocks the most severe, and it beats a loosened range.
    assert throttling.check(request_from("192.0.2.1", warned), "reply").limit == 2
    assert throttling.check(request_from("198.51.100.1", warned), "reply").limit == 2


def test_shadow_admits_and_records_a_would_be_refusal(redis_server, policy):
    policy("reply", 60, 5)
    block(network="203.0.113.0/24", severity="shadow", reason="trying a block before enforcing it")
    decisions = [throttling.check(request_from("203.0.113.9"), "reply") for _ in range(3)]
    assert all(d.allowed and d.reason == SHADOW for d in decisions)
    assert [d.remaining for d in decisions] == [4, 3, 2]  # still counted by the limit
    assert buffer.pending() == 3
    assert [row[5] for row in buffer.batch()] == [True]  # shadow rows, as a shadow policy's
    # A peek records nothing.
    throttling.peek(request_from("203.0.113.9"), "reply")
    assert buffer.pending() == 3
    # Refused by the limit itself: still the limit's refusal.
    for _ in range(3):
        last = throttling.check(request_from("203.0.113.9"), "reply")
    assert not last.allowed and last.reason == "throttled"


def test_tighten_and_loosen_multiply_every_window_of_per_member_policies_only(redis_server, policy):
    policy("reply", 60, 10, windows=[(3600, 40)])
    policy("thread", 60, 10, scope="site")
    block(network="203.0.113.0/24", severity="tighten", multiplier=Decimal("0.5"), reason="raid")
    block(network="198.51.100.0/24", severity="loosen", multiplier=Decimal("3"), reason="school")
    tight = throttling.check(request_from("203.0.113.9"), "reply")
    assert (tight.limit, tight.windows) == (5, ((60, 5), (3600, 20)))
    loose = throttling.check(request_from("198.51.100.9"), "reply")
    assert (loose.limit, loose.windows) == (30, ((60, 30), (3600, 120)))
    # Everyone shares a site-wide count: a range does not get a limit of its own there.
    assert throttling.check(request_from("203.0.113.9"), "thread").limit == 10


def test_blocks_are_read_without_sql_once_loaded(redis_server, policy, django_assert_num_queries):
    policy("reply", 60, 50)
    block(network="203.0.113.0/24")
    throttling.check("warm-up", "reply")
    with django_assert_num_queries(0):
        for i in range(20):
            throttling.check(request_from(f"198.51.100.{i}"), "reply")
            throttling.check(request_from(f"203.0.113.{i}"), "reply")


@pytest.mark.django_db(transaction=True)
def test_a_block_deleted_or_changed_here_applies_once_committed_and_indexed(redis_server, policy):
    policy("reply", 60, 5)
    b = block(network="203.0.113.0/24")
    assert not throttling.check(request_from("203.0.113.9"), "reply").allowed
    b.severity, b.multiplier = "tighten", Decimal("0.5")
    b.save()
    assert measures.settle(30)  # the builder thread read the committed change and indexed it
    assert throttling.check(request_from("203.0.113.9"), "reply").limit == 2
    b.delete()
    assert measures.settle(30)
    assert throttling.check(request_from("203.0.113.9"), "reply").limit == 5


def test_async_decisions_see_blocks_too(redis_server, policy):
    policy("reply", 60, 5)
    block(network="203.0.113.0/24")
    # The first async decision loads the policies and the blocks in a thread, never on the loop.
    assert async_to_sync(throttling.acheck)(request_from("203.0.113.9"), "reply").reason == "blocked"
    assert async_to_sync(throttling.acheck)(request_from("198.51.100.9"), "reply").allowed


@pytest.mark.django_db(transaction=True)
def test_the_block_index_is_built_again_only_when_blocks_changed(redis_server, policy):
    policy("reply", 60, 5)
    b = block(network="203.0.113.0/24")
    throttling.check("warm-up", "reply")
    index = measures.blocks
    throttling.start_surge(0.5, 30, "raid")  # the same marker moves: surges are read again, blocks kept
    assert throttling.check(request_from("198.51.100.1"), "reply").limit == 2
    assert measures.settle(30)
    assert measures.blocks is index
    b.reason = "edited"
    b.save()
    assert measures.settle(30)
    assert measures.blocks is not index


def test_exempt_members_are_never_blocked(redis_server, policy, member, admin_user):
    from throttling.models import MemberOverride

    policy("reply", 60, 5)
    block(network="203.0.113.0/24")
    block(user=member, reason="sockpuppet")
    MemberOverride.objects.create(user=member, exempt=True, reason="our own test account", created_by=admin_user)
    assert throttling.check(request_from("203.0.113.9", member), "reply").reason == "exempt"
    assert throttling.check(request_from("203.0.113.9", admin_user), "reply").reason == "exempt"  # staff


# --- What a moderator can mean ---------------------------------------------------------------


@pytest.mark.parametrize(
    "network, words",
    [
        ("0.0.0.0/0", "wider than a block may be"),
        ("::/0", "wider than a block may be"),
        ("8.0.0.0/7", "wider than a block may be"),
        ("2000::/15", "wider than a block may be"),
        ("10.1.2.3/8", "did you mean 10.0.0.0/8?"),
        ("2001:db8::1/48", "did you mean 2001:db8::/48?"),
    ],
)
def test_a_range_no_moderator_means_is_refused_on_the_network(network, words):
    with pytest.raises(ValidationError) as caught:
        Block(network=network, reason="raid").full_clean()
    assert words in " ".join(caught.value.message_dict["network"])


def test_the_widest_range_is_a_setting(settings):
    Block(network="10.0.0.0/8", reason="raid").full_clean()
    Block(network="2001::/16", reason="raid").full_clean()
    Block(network="198.51.100.7", reason="raid").full_clean()  # one address: a /32
    settings.THROTTLING_BLOCK_WIDEST = (16, 32)
    with pytest.raises(ValidationError) as caught:
        Block(network="10.0.0.0/8", reason="raid").full_clean()
    assert "an IPv4 /16 at most" in " ".join(caught.value.message_dict["network"])
    Block(network="10.1.0.0/16", reason="raid").full_clean()


def test_an_action_no_policy_has_is_refused_naming_the_known_ones(policy):
    from throttling.models import ActionPolicy

    ActionPolicy.objects.all().delete()
    policy("reply", 60, 5)
    policy("post", 60, 5)
    with pytest.raises(ValidationError) as caught:
        Block(network="203.0.113.0/24", actions="reply, replyy", reason="raid").full_clean()
    assert caught.value.message_dict["actions"] == ["No policy has the action “replyy”; the actions are: post, reply."]
    Block(network="203.0.113.0/24", actions="reply, post", reason="raid").full_clean()


def test_an_expiry_in_the_past_is_refused_but_an_expired_block_can_still_be_edited():
    past = timezone.now() - timedelta(hours=1)
    with pytest.raises(ValidationError) as caught:
        Block(network="203.0.113.0/24", reason="raid", expires_at=past).full_clean()
    assert "expires_at" in caught.value.message_dict
    kept = Block.objects.create(network="203.0.113.0/24", reason="raid", expires_at=past)
    kept.reason = "raid from a hosting provider"
    kept.full_clean()  # the record of a block that ran out stays editable
