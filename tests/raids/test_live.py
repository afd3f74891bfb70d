"""Blocks and surges in every process: live within a second of a save, one command per decision."""

import random
import time
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import RequestFactory
from django.test.utils import override_settings
from django.utils import timezone

import throttling
from tests.support.helpers import Monitor, deciding_connections
from throttling import signals
from throttling.models import Block


def request_from(address):
    request = RequestFactory().post("/", REMOTE_ADDR=address)
    request.user = AnonymousUser()
    return request


def read_state(proc):
    stamp, limit, remaining, reason = proc.stdout.readline().split()
    return float(stamp), limit, remaining, reason


def assert_seen_within_a_second(worker, state, changed_at):
    """The next state `worker` reports is `state` (limit, remaining, reason), and it saw it less than a
    second after the change made here at `changed_at`."""
    seen_at, *seen = read_state(worker)
    assert seen == state
    assert seen_at - changed_at < 1.0


def thousand_blocks(now):
    """1,000 blocks of every severity, nested and apart, by range and by member, some expired."""
    rng = random.Random(7)
    blocks = []
    for i in range(1000):
        severity = ("refuse", "shadow", "tighten", "loosen")[i % 4]
        multiplier = {"tighten": Decimal("0.5"), "loosen": Decimal("2")}.get(severity)
        if i % 2:
            network = f"10.{rng.randrange(256)}.{rng.randrange(256)}.0/{rng.choice((16, 20, 24, 28))}"
        else:
            network = f"2001:db8:{rng.randrange(65536):x}::/{rng.choice((32, 48, 64))}"
        blocks.append(
            Block(
                network=network,
                severity=severity,
                multiplier=multiplier,
                actions="" if i % 3 else "reply",
                reason=f"wave {i}",
                expires_at=now - timedelta(hours=1) if i % 10 == 0 else None,
            )
        )
    Block.objects.bulk_create(blocks)


@pytest.mark.django_db
@override_settings(THROTTLING_POLICY_REFRESH=3600)
def test_one_evalsha_per_decision_with_a_thousand_blocks_in_place(redis_server, redis_client, policy):
    policy("reply", 60, 1000)
    thousand_blocks(timezone.now())
    for blocked in (
        Block(network="203.0.113.0/24", reason="raid"),
        Block(network="198.51.100.0/24", reason="x", severity="tighten", multiplier=Decimal("0.5")),
    ):
        blocked.save()
    throttling.check("warm-up", "reply")  # loads the policies, the blocks and the script
    addresses = [f"192.0.2.{i}" for i in range(20)] + [f"198.51.100.{i}" for i in range(10)]
    with Monitor(redis_server.url) as monitor:
        decided = [throttling.check(request_from(a), "reply") for a in addresses]
        refused = [throttling.check(request_from(f"203.0.113.{i}"), "reply") for i in range(10)]
    assert all(d.allowed for d in decided)
    assert {d.limit for d in decided} == {1000, 500}  # some tightened by their range
    assert {d.reason for d in refused} == {"blocked"}
    # One EVALSHA per decision Redis made, none for the refusals of the block.
    assert monitor.sent_by(deciding_connections()) == ["EVALSHA"] * len(addresses)


@pytest.mark.slow
@pytest.mark.django_independent  # the change channel and the index across processes; the save's wiring runs on every leg (test_blocks.py)
@pytest.mark.django_db(transaction=True)
def test_a_block_saved_here_is_live_in_another_process_within_a_second(redis_server, policy, other_process):
    policy("reply", 60, 5)
    worker = other_process("reply", "addr:203.0.113.9")
    assert read_state(worker)[1:] == ("5", "5", "admitted")
    b = Block.objects.create(network="203.0.113.0/24", reason="raid from a hosting provider")
    assert_seen_within_a_second(worker, ["0", "0", "blocked"], time.time())
    b.severity, b.multiplier = "tighten", Decimal("0.4")
    b.save()
    assert_seen_within_a_second(worker, ["2", "2", "admitted"], time.time())
    b.delete()
    assert_seen_within_a_second(worker, ["5", "5", "admitted"], time.time())


@pytest.mark.slow
@pytest.mark.django_independent  # the change channel and the index across processes; the save's wiring runs on every leg (test_blocks.py)
@pytest.mark.django_db(transaction=True)
def test_a_surge_started_and_ended_here_is_live_in_another_process_within_a_second(redis_server, policy, other_process):
    policy("reply", 60, 10)
    worker = other_process("reply", "someone")
    assert read_state(worker)[1:] == ("10", "10", "admitted")
    throttling.start_surge(0.5, 30, "raid on the announcements board")
    assert_seen_within_a_second(worker, ["5", "5", "admitted"], time.time())
    throttling.end_surge(reason="calm again")
    assert_seen_within_a_second(worker, ["10", "10", "admitted"], time.time())


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_surge_ends_everywhere_within_a_second_though_a_receiver_of_its_alert_raises(
    redis_server, policy, other_process
):
    def broken_receiver(**kwargs):
        raise RuntimeError("the site's own receiver is broken")

    signals.alert.connect(broken_receiver, dispatch_uid="test-broken-alert-receiver")
    try:
        policy("reply", 60, 10)
        worker = other_process("reply", "someone")
        assert read_state(worker)[1:] == ("10", "10", "admitted")
        throttling.start_surge(0.5, 30, "raid on the announcements board")
        assert_seen_within_a_second(worker, ["5", "5", "admitted"], time.time())
        throttling.end_surge(reason="calm again")
        assert_seen_within_a_second(worker, ["10", "10", "admitted"], time.time())
    finally:
        signals.alert.disconnect(dispatch_uid="test-broken-alert-receiver")


@pytest.mark.topology
@pytest.mark.django_db(transaction=True)
def test_on_a_cluster_a_key_decision_planned_twice_is_scaled_and_counted_once(
    cluster, policy, django_user_model, monkeypatch
):
    from throttling.engine.countermeasures.in_force import measures
    from throttling.engine.keys import state_keys
    from throttling.models import SurgeTrigger

    cluster.flush()
    with override_settings(THROTTLING_REDIS_URL=cluster.url):
        p = policy("reply", 60, 10)
        SurgeTrigger.objects.create(policy=p, threshold=1000, period=60, multiplier=Decimal("0.5"), minutes=5)
        member = django_user_model.objects.create_user("clara")
        key = next(
            f"key-{i}"
            for i in range(100)
            if cluster.node_of(state_keys(f"s:key-{i}", "reply")[0]).port
            != cluster.node_of(throttling.engine.keys.member_penalty_key(member.pk)).port
        )
        throttling.start_surge(0.5, 30, "raid")
        # The background thread's look would take the counts to Redis meanwhile: they stay here.
        monkeypatch.setattr(measures.counts, "flush", lambda backend, surges: None)
        measures.counts.take()
        decisions = [throttling.check(member, "reply", key=key) for _ in range(3)]
        # The decision is planned again without the member's penalty slot: the surge applies once.
        assert [d.limit for d in decisions] == [5, 5, 5]
        assert [d.remaining for d in decisions] == [4, 3, 2]
        assert measures.counts.take() == {"reply": 3}
    cluster.flush()
