"""Who is acting: users, addresses behind proxies, IPv6 networks, unusual strings."""

import re

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import RequestFactory
from redis.cluster import key_slot
from rest_framework.throttling import BaseThrottle

import throttling
from throttling.engine.decision import EXEMPT
from throttling.engine.identity import client_ip, identify
from throttling.engine.keys import log_keys

pytestmark = pytest.mark.usefixtures("redis_server")


def request_from(addr, forwarded=None, user=None):
    extra = {"REMOTE_ADDR": addr}
    if forwarded is not None:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded
    request = RequestFactory().post("/reply/", **extra)
    request.user = user if user is not None else AnonymousUser()
    return request


def test_a_user_is_keyed_by_pk(member):
    assert identify(member) == (f"u:{member.pk}", member)
    # The request of a signed-in member is the member, wherever they connect from.
    assert identify(request_from("192.0.2.1", user=member)) == (f"u:{member.pk}", member)


def test_a_member_has_one_quota_across_addresses(member, policy):
    policy("reply", 60, 2)
    assert throttling.check(request_from("192.0.2.1", user=member), "reply").allowed
    assert throttling.check(request_from("198.51.100.1", user=member), "reply").allowed
    assert not throttling.check(member, "reply").allowed


def test_an_anonymous_request_is_keyed_by_remote_addr():
    assert identify(request_from("192.0.2.44")) == ("ip:192.0.2.44", None)


def test_a_spoofed_forwarded_for_is_ignored_by_default(policy):
    policy("reply", 60, 1)
    assert throttling.check(request_from("192.0.2.44", forwarded="10.0.0.1"), "reply").allowed
    for spoof in ("10.0.0.2", "10.0.0.3, 10.0.0.4", "2001:db8::1"):
        assert not throttling.check(request_from("192.0.2.44", forwarded=spoof), "reply").allowed
    assert identify(request_from("192.0.2.44", forwarded="10.0.0.9"))[0] == "ip:192.0.2.44"


@pytest.mark.parametrize(
    "forwarded",
    ["198.51.100.1", "198.51.100.1, 203.0.113.7", "198.51.100.1,203.0.113.7, 192.0.2.200", " 198.51.100.9 "],
)
@pytest.mark.parametrize("num_proxies", [1, 2, 5])
def test_trusted_proxies_follow_drfs_num_proxies_rule(settings, forwarded, num_proxies):
    settings.THROTTLING_NUM_PROXIES = num_proxies
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": num_proxies}
    request = request_from("192.0.2.44", forwarded=forwarded)
    addrs = [a.strip() for a in forwarded.split(",")]
    expected = addrs[-min(num_proxies, len(addrs))]
    assert client_ip(request) == expected
    assert client_ip(request) == BaseThrottle().get_ident(request)


def test_one_trusted_proxy_gives_each_client_its_own_quota(settings, policy):
    settings.THROTTLING_NUM_PROXIES = 1
    policy("reply", 60, 1)
    assert throttling.check(request_from("10.1.1.1", forwarded="198.51.100.1"), "reply").allowed
    assert not throttling.check(request_from("10.1.1.2", forwarded="198.51.100.1"), "reply").allowed
    assert throttling.check(request_from("10.1.1.1", forwarded="198.51.100.2"), "reply").allowed
    # A client cannot step around its proxy by prepending addresses of its own.
    assert not throttling.check(request_from("10.1.1.1", forwarded="6.6.6.6, 198.51.100.2"), "reply").allowed


def test_a_forwarded_for_that_is_not_an_address_falls_back_to_remote_addr(settings):
    settings.THROTTLING_NUM_PROXIES = 1
    assert client_ip(request_from("192.0.2.44", forwarded="not-an-ip")) == "192.0.2.44"


def test_ipv6_addresses_share_a_quota_per_64(policy):
    policy("reply", 60, 1)
    assert throttling.check(request_from("2001:db8:1:2::1"), "reply").allowed
    assert not throttling.check(request_from("2001:db8:1:2:ffff:ffff:ffff:fffe"), "reply").allowed
    assert throttling.check(request_from("2001:db8:1:3::1"), "reply").allowed
    assert identify(request_from("2001:DB8:1:2:abcd::9"))[0] == "ip:2001:db8:1:2::/64"


def test_ipv4_mapped_ipv6_is_the_ipv4_address(policy):
    policy("reply", 60, 1)
    assert identify(request_from("::ffff:192.0.2.44")) == identify(request_from("192.0.2.44"))
    assert throttling.check(request_from("192.0.2.44"), "reply").allowed
    assert not throttling.check(request_from("::ffff:192.0.2.44"), "reply").allowed


AWKWARD = [
    "a:b",
    "a%3Ab",
    "a b",
    "a+b",
    "ü",
    "u",
    "{tag}",
    "a}b{",
    "}{",
    "throttling:{x}:reply",
    # Long identities are hashed: two that differ by one character must stay apart.
    "x" * 300,
    "x" * 301,
]


def test_awkward_identities_are_distinct():
    identities = [identify(who)[0] for who in AWKWARD]
    assert len(set(identities)) == len(AWKWARD)
    for identity in identities:
        assert re.fullmatch(r"s:[A-Za-z0-9_.~%-]+", identity), identity
        assert len(identity) <= 130


def test_awkward_identities_each_have_their_own_quota(policy, redis_client):
    policy("reply", 60, 1)
    for who in AWKWARD:
        assert throttling.check(who, "reply").allowed, who
    for who in AWKWARD:
        assert not throttling.check(who, "reply").allowed, who
    logs = [k for k in redis_client.keys("*") if k.endswith(b":log")]
    assert len(logs) == len(AWKWARD)


@pytest.mark.parametrize("who", AWKWARD)
def test_keys_of_one_call_share_one_hash_tag_and_one_slot(who, policy, redis_client):
    identity = identify(who)[0]
    keys = log_keys(identity, "reply")
    for key in keys:
        # Redis Cluster hashes the text between the first "{" and the next "}".
        assert key.count("{") == 1 and key.count("}") == 1
        assert key[key.index("{") + 1 : key.index("}")] == identity
    assert len({key_slot(k.encode()) for k in keys}) == 1
    # The keys the script really wrote are these ones (offences included).
    policy("reply", 60, 1)
    throttling.check(who, "reply")
    throttling.check(who, "reply")
    written = set(redis_client.keys("*{*"))
    assert {k.encode() for k in keys[:2]} <= written <= {k.encode() for k in keys}


def test_staff_and_superusers_are_exempt_by_default(django_user_model, policy):
    policy("reply", 60, 1)
    staff = django_user_model.objects.create_user("sam", password="x", is_staff=True)
    boss = django_user_model.objects.create_superuser("bo", password="x")
    for who in (staff, boss, request_from("192.0.2.1", user=staff)):
        decisions = [throttling.check(who, "reply") for _ in range(3)]
        assert all(d.allowed and d.reason == EXEMPT for d in decisions)


def test_staff_are_limited_when_the_policy_says_so(django_user_model, policy):
    policy("reply", 60, 1, exempt_staff=False)
    staff = django_user_model.objects.create_user("sam", password="x", is_staff=True)
    boss = django_user_model.objects.create_superuser("bo", password="x")
    for who in (staff, boss):
        assert [throttling.check(who, "reply").allowed for _ in range(2)] == [True, False]


def test_an_anonymous_user_alone_is_refused_with_a_hint(policy):
    policy("reply", 60, 1)
    with pytest.raises(ValueError, match="pass the request"):
        throttling.check(AnonymousUser(), "reply")
    with pytest.raises(ValueError, match="pass the request"):
        identify(AnonymousUser())


def test_an_empty_identity_string_is_refused():
    with pytest.raises(ValueError, match="empty"):
        identify("")
