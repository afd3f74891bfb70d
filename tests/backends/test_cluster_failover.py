"""Failover on a real Redis Cluster with replicas (and without), under traffic: what it costs, and that nothing more is lost."""

import asyncio
import multiprocessing
import time

import pytest
import redis
import redis.crc
from asgiref.sync import async_to_sync
from django.test.utils import override_settings

import throttling
from tests.support.processes.topology import LocalCluster, _wait
from throttling.backends import topology
from throttling.engine.decision import ADMITTED, BACKEND_FAILURE
from throttling.engine.keys import log_keys

pytestmark = [pytest.mark.topology, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LIMIT = 1000  # never reached: every refusal here would be a miscount
PREFILL = 3  # decisions per member before the traffic starts, replicated before any failover
# The throttle's timeouts in these tests: generous, so that a loaded machine never turns a slow
# reply into a failed decision that would read as a miscount.
TIMEOUT = 1.0
# The longest one decision may take: a failed connect, the table relearnt from a healthy node,
# the new master connected to, NOSCRIPT there, the script loaded and run; plus a margin.
BOUND = 3 * (TIMEOUT + TIMEOUT) + 2 * TIMEOUT + 1.0
# Seconds after a promoted replica serves within which the four traffic processes, on a loaded
# machine, must have noticed it (beyond RELEARN_EVERY).
GRACE = 0.1
SETTINGS = {
    "THROTTLING_SOCKET_TIMEOUT": TIMEOUT,
    "THROTTLING_SOCKET_CONNECT_TIMEOUT": TIMEOUT,
    "THROTTLING_POLICY_REFRESH": 3600,
    "THROTTLING_EVICTION_CHECK": 3600,
}


@pytest.fixture(scope="module")
def replicated():
    c = LocalCluster(replicas=1, node_timeout_ms=1000).start()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def bare():
    c = LocalCluster(node_timeout_ms=1000).start()
    yield c
    c.stop()


def _ready(cluster):
    """Every node up (a killed one restarted: it comes back as a replica of its successor), in
    sync and empty; THROTTLING_REDIS_URL at the cluster."""
    for node in cluster.nodes:
        if not node.running:
            node.start()
    _wait(cluster.healthy, 60, "the cluster to heal")
    cluster.flush()
    return override_settings(THROTTLING_REDIS_URL=cluster.url, **SETTINGS)


@pytest.fixture
def on_replicated(replicated):
    with _ready(replicated):
        yield replicated


@pytest.fixture
def on_bare(bare):
    with _ready(bare):
        yield bare


def _members(cluster, per_master=6):
    """String identities whose keys are spread over every master: {master port: [who, ...]}."""
    by_port = {port: [] for port in cluster.master_ports()}
    i = 0
    while any(len(m) < per_master for m in by_port.values()):
        i += 1
        who = f"fo-{i}"
        members = by_port[cluster.node_of(_log_key(who)).port]
        if len(members) < per_master:
            members.append(who)
    return by_port


def _log_key(who):
    return log_keys(f"s:{who}", "reply")[0]


def _traffic(kind, url, members, barrier, stop, out):
    """What each traffic process does: decide for every member in turn until told to stop, and
    hand back (who, started, ended, reason, remaining, error) per decision."""
    seen = []

    def record(who, started, decision=None, error=None):
        if error is None:
            seen.append((who, started, time.monotonic(), decision.reason, decision.remaining, None))
        else:  # any exception is the bug under test
            seen.append((who, started, time.monotonic(), None, None, repr(error)))

    async def decide_async():
        while not stop.is_set():
            for who in members:
                started = time.monotonic()
                try:
                    record(who, started, await throttling.acheck(who, "reply"))
                except Exception as exc:  # noqa: BLE001
                    record(who, started, error=exc)
                await asyncio.sleep(0.002)

    with override_settings(THROTTLING_REDIS_URL=url, **SETTINGS):
        barrier.wait(30)
        if kind == "async":
            asyncio.run(decide_async())
        while kind == "sync" and not stop.is_set():
            for who in members:
                started = time.monotonic()
                try:
                    record(who, started, throttling.check(who, "reply"))
                except Exception as exc:  # noqa: BLE001
                    record(who, started, error=exc)
                time.sleep(0.002)
        out.put(seen)


class Traffic:
    """Four processes (two sync, two async) deciding for every member until stopped."""

    def __init__(self, cluster, members):
        ctx = multiprocessing.get_context("fork")
        self.barrier, self.stop_event, self.out = ctx.Barrier(5), ctx.Event(), ctx.Queue()
        self.procs = [
            ctx.Process(target=_traffic, args=(kind, cluster.url, members, self.barrier, self.stop_event, self.out))
            for kind in ("sync", "async", "sync", "async")
        ]

    def __enter__(self):
        for p in self.procs:
            p.start()
        self.barrier.wait(30)
        return self

    def stop(self):
        self.stop_event.set()
        seen = [d for _ in self.procs for d in self.out.get(timeout=60)]
        for p in self.procs:
            p.join(30)
            assert p.exitcode == 0
        return seen

    def __exit__(self, *exc):
        self.stop_event.set()
        for p in self.procs:
            p.join(30)
            if p.is_alive():
                p.kill()


def _prefill(cluster, by_port):
    members = [who for group in by_port.values() for who in group]
    for who in members:
        for _ in range(PREFILL):
            assert throttling.check(who, "reply").reason == ADMITTED
    cluster.wait_replicated()
    return members


def _assert_exact(seen, who, cluster, *, since=None):
    """The admitted decisions of `who` (those started after `since`, when given) each took one
    distinct count, and the owner's log holds them all: nothing lost, nothing counted twice."""
    admitted = [d for d in seen if d[0] == who and d[3] == ADMITTED and (since is None or d[1] > since)]
    left = sorted(d[4] for d in admitted)
    assert left == list(range(left[0], left[0] + len(left))), who  # distinct and contiguous
    final = throttling.peek(who, "reply").remaining
    assert final == left[0], who
    assert redis.Redis(port=cluster.node_of(_log_key(who)).port).zcard(_log_key(who)) == LIMIT - final
    return left


def _serves(cluster, heir, victim):
    """True once `heir` is a master and every other node up names it for `victim`'s former slots."""
    if redis.Redis(port=heir.port).execute_command("ROLE")[0] != b"master":
        return False
    for node in cluster.nodes:
        if node is not victim and node.running:
            ports = {int(m[1]) for _s, _e, m, *_ in cluster.client(node).execute_command("CLUSTER", "SLOTS")}
            if victim.port in ports or heir.port not in ports:
                return False
    return True


def _wait_serving(cluster, heir, victim, timeout=30):
    deadline = time.monotonic() + timeout
    while not _serves(cluster, heir, victim):
        assert time.monotonic() < deadline, "the replica was not promoted"
        time.sleep(0.005)
    return time.monotonic()


def test_a_killed_master_s_members_are_decided_by_its_promoted_replica(on_replicated, policy):
    policy("reply", 60, LIMIT, on_backend_failure="closed")
    by_port = _members(on_replicated)
    members = _prefill(on_replicated, by_port)
    victim = on_replicated.by_port(sorted(by_port)[1])
    heir = on_replicated.replica_of(victim)
    moved = set(by_port[victim.port])
    with Traffic(on_replicated, members) as traffic:
        time.sleep(0.5)
        victim.kill()
        killed = time.monotonic()
        serves = _wait_serving(on_replicated, heir, victim)
        time.sleep(1.5)
        seen = traffic.stop()
    assert [d for d in seen if d[5] is not None] == []  # nothing raised
    assert max(d[2] - d[1] for d in seen) < BOUND
    # Members of the other masters: decided exactly throughout.
    for who in set(members) - moved:
        assert {d[3] for d in seen if d[0] == who} == {ADMITTED}, who
        left = _assert_exact(seen, who, on_replicated)
        assert left[-1] == LIMIT - PREFILL - 1
    # Moved members: failed only until the promoted replica serves. A process relearns the table
    # at its next failure, at most RELEARN_EVERY after the previous look; the rest of the grace
    # is for this loaded machine to schedule the four processes.
    after = [d for d in seen if d[0] in moved and d[1] > killed]
    late = [d for d in after if d[1] > serves + topology.RELEARN_EVERY + GRACE and d[3] != ADMITTED]
    assert late == []
    assert {d[3] for d in after} <= {ADMITTED, BACKEND_FAILURE}
    again = {}
    for who in moved:
        # Counted on the promoted replica, from the counts it had replicated before the kill.
        left = _assert_exact(seen, who, on_replicated, since=killed)
        assert on_replicated.node_of(_log_key(who)) is heir
        assert left[-1] <= LIMIT - PREFILL - 1, who
        again[who] = min(d[2] for d in after if d[0] == who and d[3] == ADMITTED)
    failed = [d for d in after if d[3] == BACKEND_FAILURE]
    print(
        f"\nkill -9 of a master with a replica: it serves {serves - killed:.2f} s after the kill; "
        f"first moved member decided again {min(again.values()) - killed:.2f} s, "
        f"last {max(again.values()) - killed:.2f} s after it; {len(failed)} failed decisions of "
        f"{len(after)} for moved members, by 4 processes, the last one started "
        f"{max(d[1] for d in failed) - serves:+.3f} s from the moment it serves"
    )


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_once_the_promoted_replica_serves_no_decision_fails(on_replicated, policy, flavour):
    """One process deciding for the dead master's members while the cluster promotes its replica:
    once every node names the replica, the very next decision of every moved member is admitted
    there, however recently the process last relearnt the table."""
    policy("reply", 60, LIMIT, on_backend_failure="closed")
    by_port = _members(on_replicated)
    _prefill(on_replicated, by_port)
    victim = on_replicated.by_port(sorted(by_port)[0])
    heir = on_replicated.replica_of(victim)
    moved = by_port[victim.port]

    async def scenario():
        async def decide(who):
            if flavour == "sync":
                return throttling.check(who, "reply")
            return await throttling.acheck(who, "reply")

        victim.kill()
        failed = 0
        deadline = time.monotonic() + 30
        while not _serves(on_replicated, heir, victim):
            assert time.monotonic() < deadline, "the replica was not promoted"
            failed += (await decide(moved[0])).reason == BACKEND_FAILURE
        await asyncio.sleep(topology.RELEARN_EVERY)
        return failed, [await decide(who) for who in moved]

    failed, decisions = async_to_sync(scenario)()
    assert failed > 0
    assert [d.reason for d in decisions] == [ADMITTED] * len(moved)
    assert [d.remaining for d in decisions[1:]] == [LIMIT - PREFILL - 1] * (len(moved) - 1)


def test_a_graceful_cluster_failover_loses_no_decision(on_replicated, policy):
    policy("reply", 60, LIMIT, on_backend_failure="closed")
    by_port = _members(on_replicated)
    members = _prefill(on_replicated, by_port)
    old = on_replicated.by_port(sorted(by_port)[0])
    heir = on_replicated.replica_of(old)
    moved = by_port[old.port]
    with Traffic(on_replicated, members) as traffic:
        time.sleep(0.5)
        on_replicated.client(heir).execute_command("CLUSTER", "FAILOVER")
        _wait(lambda: on_replicated.node_of(_log_key(moved[0])) is heir, 30, "the replica's promotion")
        time.sleep(1.0)
        seen = traffic.stop()
    assert [d for d in seen if d[5] is not None] == []
    assert {d[3] for d in seen} == {ADMITTED}  # not one decision failed
    for who in members:
        left = _assert_exact(seen, who, on_replicated)
        assert left[-1] == LIMIT - PREFILL - 1, who
    assert all(on_replicated.node_of(_log_key(who)) is heir for who in moved)


def _moved_replies(node):
    return int(redis.Redis(port=node.port).info("errorstats").get("errorstat_MOVED", {}).get("count", 0))


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_one_moved_reply_relearns_the_whole_table(on_replicated, policy, flavour):
    """After a failover the first MOVED makes the process relearn every slot: the other members
    of the old master go straight to the new one, not each through a MOVED of its own."""
    policy("reply", 60, LIMIT)
    decide = throttling.check if flavour == "sync" else async_to_sync(throttling.acheck)
    by_port = _members(on_replicated)
    _prefill(on_replicated, by_port)
    old = on_replicated.by_port(sorted(by_port)[2])
    heir = on_replicated.replica_of(old)
    moved = by_port[old.port]
    slots = {redis.crc.key_slot(_log_key(who).encode()) for who in moved}
    assert len(slots) > 1
    on_replicated.client(heir).execute_command("CLUSTER", "FAILOVER")
    _wait(lambda: on_replicated.node_of(_log_key(moved[0])) is heir, 30, "the replica's promotion")
    _wait(on_replicated._consistent, 10, "every node to agree")
    before = _moved_replies(old)
    time.sleep(topology.RELEARN_EVERY)
    for who in moved:
        d = decide(who, "reply")
        assert d.reason == ADMITTED and d.remaining == LIMIT - PREFILL - 1, who
    assert _moved_replies(old) - before == 1


def test_a_killed_master_without_a_replica_fails_its_members_until_restarted(on_bare, policy):
    """The same kill without a replica: the dead master's members fail until it is back (a
    supervisor restarting it at once) and the cluster lets it take writes again, and it comes
    back empty, having kept nothing."""
    policy("reply", 60, LIMIT, on_backend_failure="closed")
    by_port = _members(on_bare)
    members = _prefill(on_bare, by_port)
    victim = on_bare.by_port(sorted(by_port)[1])
    moved = set(by_port[victim.port])
    with Traffic(on_bare, members) as traffic:
        time.sleep(0.5)
        victim.kill()
        killed = time.monotonic()
        victim.start()
        # A restarted master answers CLUSTERDOWN until it has rejoined (about two seconds).
        _wait(lambda: on_bare.client(victim).cluster("info")["cluster_state"] == "ok", 30, "the rejoin")
        serves = time.monotonic()
        time.sleep(1.0)
        seen = traffic.stop()
    assert [d for d in seen if d[5] is not None] == []
    assert max(d[2] - d[1] for d in seen) < BOUND
    for who in set(members) - moved:
        assert {d[3] for d in seen if d[0] == who} == {ADMITTED}, who
        _assert_exact(seen, who, on_bare)
    after = [d for d in seen if d[0] in moved and d[1] > killed]
    assert [d for d in after if d[1] > serves + GRACE and d[3] != ADMITTED] == []
    again = {}
    for who in moved:
        left = _assert_exact(seen, who, on_bare, since=killed)
        assert left[-1] == LIMIT - 1, who  # the restarted master forgot the counts
        again[who] = min(d[2] for d in after if d[0] == who and d[3] == ADMITTED)
    failed = sum(d[3] == BACKEND_FAILURE for d in after)
    print(
        f"\nkill -9 of a master without a replica, restarted at once: it serves {serves - killed:.2f} s "
        f"after the kill; first moved member decided again "
        f"{min(again.values()) - killed:.2f} s, last {max(again.values()) - killed:.2f} s after the kill; "
        f"{failed} failed decisions of {len(after)} for moved members, by 4 processes"
    )
