"""Repeated content on a real Redis Cluster (the wave's half in its own slot) and behind Sentinel (one command)."""

import pytest
import redis
from django.test.utils import override_settings

import throttling
from bench.content_corpus import BASES
from tests.support.helpers import Monitor, deciding_connections
from tests.support.processes.topology import SentinelGroup
from tests.support.traffic import race_posts
from throttling.backends.routing import slot_of
from throttling.engine.content import fingerprints as content
from throttling.engine.decision import DUPLICATE, REPEATED, THROTTLED, WAVE
from throttling.engine.keys import log_keys, seen_keys, targets_key, wave_keys

pytestmark = [pytest.mark.topology, pytest.mark.django_db(transaction=True)]

SPAM = BASES["cash"]["text"]
VARIANTS = [SPAM, *BASES["cash"]["variants"].values()]
OTHER = BASES["bike"]["text"]


def _apart(cluster, count):
    """String identities whose keys are on another node than the reply wave's."""
    wave_node = cluster.node_of(wave_keys("reply")[0])
    found = [f"m{i}" for i in range(400) if cluster.node_of(log_keys(f"s:m{i}", "reply")[0]) != wave_node]
    assert len(found) >= count
    return found[:count]


def _beside_the_wave(cluster):
    """A string identity whose keys share the reply wave's slot: decided in one call there, where the
    wave's index also holds the member's own posts."""
    wave_slot = slot_of(wave_keys("reply")[0])
    return next(f"m{i}" for i in range(200_000) if slot_of(log_keys(f"s:m{i}", "reply")[0]) == wave_slot)


def _wave_entries(cluster, text=SPAM):
    """Entries under the keys of `text` (or its near-duplicates) in the reply wave's index."""
    key0, key1 = wave_keys("reply")
    client = redis.Redis(port=cluster.node_of(key0).port)
    fields = content.fingerprint(text).keys
    return sum((client.hget(key, f) or b"").count(b";") for key in (key0, key1) for f in fields)


def _wave_members(cluster):
    """Every member the reply wave's index holds a post of."""
    key0, key1 = wave_keys("reply")
    client = redis.Redis(port=cluster.node_of(key0).port)
    values = [v.decode() for key in (key0, key1) for f, v in client.hgetall(key).items() if f[:1] not in b"#~!"]
    return {entry.split("@")[0] for value in values for entry in value.split(";") if entry}


def test_a_wave_across_nodes_is_stopped_at_members(on_cluster, policy):
    policy("reply", 60, 10, same_content_max=1, same_content_members=3, same_content_period=600)
    members = _apart(on_cluster, 6)
    decisions = [throttling.check(who, "reply", content=VARIANTS[i]) for i, who in enumerate(members)]
    assert [d.allowed for d in decisions] == [True, True, True, False, False, False]
    assert {d.duplicate for d in decisions[3:]} == {WAVE}
    assert all(d.offences == 1 for d in decisions[3:])
    # A member's own repeat is judged in their slot, with their rate.
    repeat = throttling.check(members[0], "reply", content=SPAM)
    assert repeat.reason == DUPLICATE and repeat.duplicate == REPEATED
    # The refused wave members took no quota, and the wave holds the admitted three only.
    assert throttling.peek(members[4], "reply").remaining == 10
    assert _wave_members(on_cluster) == {f"s:{who}" for who in members[:3]}


def test_a_short_link_post_in_six_spellings_is_a_wave_across_nodes(on_cluster, policy):
    """A short post with a link makes a wave: judged in the wave's slot like a long one, by its digest."""
    policy("reply", 60, 10, same_content_max=1, same_content_members=3, same_content_period=600)
    spellings = [
        "Cheap pills at https://pharma.example/buy",
        "Cheap pills at http://www.pharma.example/buy/",
        "Cheap pills at HTTPS://PHARMA.EXAMPLE/buy#order",
        "Ch\u200beap pills at https://pharma.example/buy?utm_source=forum",
        "[Cheap pills at](https://pharma.example:443/buy)",
        "Сheap pills at https://pharma.example/buy",  # a Cyrillic С
    ]
    members = _apart(on_cluster, 6)
    decisions = [throttling.check(who, "reply", content=text) for who, text in zip(members, spellings)]
    assert [d.allowed for d in decisions] == [True, True, True, False, False, False]
    assert {d.duplicate for d in decisions[3:]} == {WAVE}
    # Kept in the wave's index, in its own slot, as a long post is: the three admitted, by their digest.
    assert _wave_members(on_cluster) == {f"s:{who}" for who in members[:3]}


@pytest.mark.parametrize("trial", range(2))
def test_eight_processes_on_a_cluster_admit_exactly_members(on_cluster, policy, trial):
    """The wave's half reserves before the member's decision, so racing members never pass it."""
    policy("reply", 60, 100, same_content_max=1, same_content_members=3, same_content_period=600)
    throttling.peek("warm-up", "reply")  # policies are cached before the fork
    members = _apart(on_cluster, 8)
    assert race_posts(members, "reply", SPAM, 5) == 3
    assert len(_wave_members(on_cluster)) == 3


def test_two_commands_per_decision_only_where_the_slots_differ(on_cluster, policy):
    policy("reply", 60, 10, same_content_max=1, same_content_members=3, same_content_period=600)
    [who] = _apart(on_cluster, 1)
    throttling.peek("warm-up", "reply", content=OTHER)
    monitors = {n.port: Monitor(f"redis://127.0.0.1:{n.port}/0") for n in on_cluster.nodes}
    for m in monitors.values():
        m.__enter__()
    try:
        with override_settings(THROTTLING_POLICY_REFRESH=3600, THROTTLING_EVICTION_CHECK=3600):
            throttling.peek(who, "reply")  # this thread's connections open
            deciding_before = deciding_connections()
            admitted = throttling.check(who, "reply", content=SPAM)
            short = throttling.check(who, "reply", content="Thanks!")
            deciding = deciding_connections() | deciding_before
    finally:
        for m in monitors.values():
            m.__exit__(None, None, None)
    assert admitted.allowed and short.allowed
    wave_port = on_cluster.node_of(wave_keys("reply")[0]).port
    member_port = on_cluster.node_of(log_keys(f"s:{who}", "reply")[0]).port
    sent = {port: m.sent_by(deciding) for port, m in monitors.items()}
    # The long post: the wave's half on its node, then the member's decision on theirs; the short
    # post (never a wave) one command.
    assert sent[wave_port].count("EVALSHA") == 1
    assert sent[member_port].count("EVALSHA") == 3  # the peek, the long post's decision, the short post


def test_a_reservation_the_rate_refuses_is_undone(on_cluster, policy):
    policy("reply", 60, 1, same_content_members=2, same_content_period=600)
    first, second, third = _apart(on_cluster, 3)
    assert throttling.check(first, "reply", content=OTHER).allowed
    refused = throttling.check(first, "reply", content=SPAM)
    assert refused.reason == THROTTLED
    # Its place in the wave was given back: two other members may still post it.
    assert _wave_entries(on_cluster) == 0
    assert throttling.check(second, "reply", content=SPAM).allowed
    assert throttling.check(third, "reply", content=SPAM).allowed


def test_refund_forgets_the_post_in_both_slots(on_cluster, policy):
    policy("reply", 60, 10, same_content_max=1, same_content_members=1, same_content_period=600)
    first, second = _apart(on_cluster, 2)
    decision = throttling.check(first, "reply", content=SPAM)
    assert decision.allowed
    assert throttling.refund(decision)
    member_node = redis.Redis(port=on_cluster.node_of(seen_keys(f"s:{first}", "reply")[0]).port)
    assert all(set(member_node.hkeys(key)) <= {b"#", b"~"} for key in seen_keys(f"s:{first}", "reply"))
    assert _wave_entries(on_cluster) == 0
    assert throttling.check(second, "reply", content=SPAM).allowed


def test_peek_reserves_nothing(on_cluster, policy):
    policy("reply", 60, 10, same_content_members=1, same_content_period=600)
    first, second = _apart(on_cluster, 2)
    assert throttling.peek(first, "reply", content=SPAM).allowed
    assert _wave_entries(on_cluster) == 0
    assert throttling.check(second, "reply", content=SPAM).allowed
    assert throttling.peek(first, "reply", content=SPAM).duplicate == WAVE


def test_per_target_the_members_half_lists_the_target_in_their_slot(on_cluster, policy):
    """A count per thread with content: the wave's half in its slot, then one call in the member's slot
    that judges the rate, the member's repeats and lists the thread in their targets index."""
    policy("reply", 60, 1, same_content_max=1, same_content_members=2, same_content_period=600)
    first, second, third = _apart(on_cluster, 3)
    assert throttling.check(first, "reply", target="thread-1", content=SPAM).allowed
    repeat = throttling.check(first, "reply", target="thread-2", content=SPAM)
    assert repeat.reason == DUPLICATE and repeat.duplicate == REPEATED
    assert throttling.check(second, "reply", target="thread-1", content=VARIANTS[1]).allowed
    wave = throttling.check(third, "reply", target="thread-3", content=SPAM)
    assert wave.duplicate == WAVE
    index = targets_key(f"s:{first}", "reply")
    member_node = redis.Redis(port=on_cluster.node_of(index).port)
    assert member_node.zrange(index, 0, -1) == [b"thread-1"]
    third_index = targets_key(f"s:{third}", "reply")
    assert not redis.Redis(port=on_cluster.node_of(third_index).port).exists(third_index)
    assert _wave_members(on_cluster) == {f"s:{first}", f"s:{second}"}
    throttling.reset(first, "reply")
    assert not member_node.exists(index)
    assert throttling.peek(first, "reply", target="thread-1").allowed


def test_reset_forgets_a_members_posts_in_either_slot(on_cluster, policy):
    """A member beside the wave keeps their own posts in its index (one call), one apart from it in their
    own (two calls): a reset forgets them either way, and the wave still counts both members."""
    policy("reply", 60, 10, same_content_max=1, same_content_members=2, same_content_period=600)
    beside, [apart, third] = _beside_the_wave(on_cluster), _apart(on_cluster, 2)
    for member in (beside, apart):
        assert throttling.check(member, "reply", content=SPAM).allowed
        assert throttling.check(member, "reply", content=SPAM).duplicate == REPEATED
        throttling.reset(member, "reply")
        assert throttling.check(member, "reply", content=SPAM).allowed, member
        assert throttling.check(member, "reply", content=VARIANTS[1]).duplicate == REPEATED
    assert _wave_members(on_cluster) == {f"s:{beside}", f"s:{apart}"}
    assert throttling.check(third, "reply", content=SPAM).duplicate == WAVE


@pytest.fixture(scope="module")
def group():
    g = SentinelGroup().start()
    yield g
    g.stop()


def test_behind_sentinel_one_command_per_decision(group, policy):
    redis.Redis(port=group.master_port()).flushall()
    with override_settings(THROTTLING_REDIS_URL=group.url, THROTTLING_POLICY_REFRESH=3600):
        policy("reply", 60, 10, same_content_max=1, same_content_members=2, same_content_period=600)
        throttling.peek("warm-up", "reply", content=OTHER)
        with Monitor(f"redis://127.0.0.1:{group.master_port()}/0") as monitor:
            decisions = [throttling.check(f"m{i}", "reply", content=VARIANTS[i]) for i in range(3)]
            decisions.append(throttling.check("m0", "reply", content=SPAM))
        assert [d.allowed for d in decisions] == [True, True, False, False]
        assert [d.duplicate for d in decisions[2:]] == [WAVE, REPEATED]
        assert monitor.sent_by(deciding_connections()) == ["EVALSHA"] * 4
