"""On a real local 3-master Redis Cluster: exact per member on every node, one EVALSHA to the owner."""

import multiprocessing
import time
from datetime import timedelta

import pytest
import redis
from django.core.management import call_command
from django.test.utils import override_settings

import throttling
import throttling.engine.background.eviction_watch
import throttling.engine.background.poller
import throttling.engine.decision
import throttling.engine.keys
import throttling.engine.policies.cache
import throttling.engine.refusal_memory
from tests.support.helpers import Monitor, deciding_connections, wait_for
from tests.support.traffic import as_at_exit, decide_for
from throttling import penalties
from throttling.backends.redis import get_backend
from throttling.engine.keys import log_keys, member_penalty_key

pytestmark = [pytest.mark.topology, pytest.mark.django_db(transaction=True)]

LIMIT = 5


def _members_on_every_node(cluster, count=30):
    """String identities whose keys spread over every node: {node port: [who, ...]}."""
    by_node = {}
    for i in range(count):
        who = f"member-{i}"
        key = log_keys(f"s:{who}", "reply")[0]
        by_node.setdefault(cluster.node_of(key).port, []).append(who)
    assert len(by_node) == len(cluster.nodes)
    return by_node


def test_members_on_every_node_are_each_exact(on_cluster, policy):
    policy("reply", 60, LIMIT)
    by_node = _members_on_every_node(on_cluster)
    for port, members in by_node.items():
        for who in members:
            results = [throttling.check(who, "reply") for _ in range(LIMIT + 3)]
            assert [d.allowed for d in results] == [True] * LIMIT + [False] * 3, who
            assert [d.remaining for d in results[:LIMIT]] == list(range(LIMIT - 1, -1, -1))
            assert results[-1].reason == throttling.engine.decision.THROTTLED and results[-1].retry_after > 0
            # The state lives on the node that owns the member's slot, nowhere else.
            key = log_keys(f"s:{who}", "reply")[0]
            assert redis.Redis(port=port).zcard(key) == LIMIT
            slot = redis.Redis(port=port).cluster("keyslot", key)
            held = {n.port: redis.Redis(port=n.port).cluster("countkeysinslot", slot) for n in on_cluster.nodes}
            assert [p for p, n in held.items() if n] == [port]


def test_one_evalsha_per_decision_to_the_owning_node(on_cluster, policy):
    policy("reply", 60, LIMIT)
    by_node = _members_on_every_node(on_cluster, count=12)
    with override_settings(THROTTLING_POLICY_REFRESH=3600, THROTTLING_EVICTION_CHECK=3600):
        for members in by_node.values():
            throttling.peek(members[0], "reply")  # connections open, scripts loaded
        monitors = {n.port: Monitor(f"redis://127.0.0.1:{n.port}/0") for n in on_cluster.nodes}
        for m in monitors.values():
            m.__enter__()
        try:
            for members in by_node.values():
                for who in members:
                    for _ in range(LIMIT + 1):
                        throttling.check(who, "reply")
            deciding = deciding_connections()
        finally:
            for m in monitors.values():
                m.__exit__(None, None, None)
    # This thread's connections only: the background thread's subscriber and looks are its own.
    for port, members in by_node.items():
        assert monitors[port].sent_by(deciding) == ["EVALSHA"] * (len(members) * (LIMIT + 1)), port


@pytest.mark.slow
def test_only_evalsha_from_the_deciding_connections_while_the_background_thread_looks(on_cluster, policy, settings):
    """Every master hears EVALSHA only from the thread that decides; the markers (MGET, on the
    marker's node) and the eviction watch (INFO, on every master) come from the background thread,
    which reads the markers four times a second and looks at eviction every second here, so that
    3.5 s hold as many of its looks as 12 s with the default periods."""
    settings.THROTTLING_POLICY_REFRESH = 0.25
    settings.THROTTLING_EVICTION_CHECK = 1
    policy("like", 60, 10)
    throttling.check("warm-up", "like")
    monitors = {n.port: Monitor(f"redis://127.0.0.1:{n.port}/0") for n in on_cluster.nodes}
    for m in monitors.values():
        m.__enter__()
    try:
        decisions, deciding = decide_for(3.5, "like")
    finally:
        for m in monitors.values():
            m.__exit__(None, None, None)
    assert len(deciding) == len(on_cluster.nodes)  # the members' keys live on every master
    sent = {port: m.sent_by(deciding) for port, m in monitors.items()}
    assert all(set(names) == {"EVALSHA"} for names in sent.values()), {p: set(n) for p, n in sent.items()}
    assert sum(d.allowed for d in decisions) <= sum(map(len, sent.values())) < len(decisions)
    others = {
        port: {c.split(" ", 1)[0].upper() for _db, client, c in m.events if client not in deciding}
        for port, m in monitors.items()
    }
    marker_port = on_cluster.node_of(throttling.engine.policies.cache.version_key()).port
    assert "MGET" in others[marker_port]
    assert all("INFO" in names for names in others.values())


def test_script_flush_on_every_node_is_recovered_without_counting_twice(on_cluster, policy):
    policy("reply", 60, LIMIT)
    by_node = _members_on_every_node(on_cluster, count=9)
    members = [who for group in by_node.values() for who in group]
    for who in members:
        assert throttling.check(who, "reply").allowed
        assert throttling.check(who, "reply").allowed
    for node in on_cluster.nodes:
        redis.Redis(port=node.port).script_flush()
    for who in members:
        admitted = sum(throttling.check(who, "reply").allowed for _ in range(LIMIT))
        assert admitted == LIMIT - 2, who
        assert throttling.peek(who, "reply").remaining == 0


def _race(barrier, results, url, identities, attempts):
    with override_settings(THROTTLING_REDIS_URL=url):
        barrier.wait(10)
        admitted = {who: 0 for who in identities}
        for _ in range(attempts):
            for who in identities:
                admitted[who] += throttling.check(who, "reply").allowed
        as_at_exit()
        results.put(admitted)


def test_exact_under_an_eight_process_race(on_cluster, policy):
    policy("reply", 60, LIMIT)
    by_node = _members_on_every_node(on_cluster, count=12)
    identities = [group[0] for group in by_node.values()]  # one member per node
    throttling.peek("warm-up", "reply")
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(8), ctx.Queue()
    workers = [ctx.Process(target=_race, args=(barrier, results, on_cluster.url, identities, 10)) for _ in range(8)]
    for w in workers:
        w.start()
    totals = {who: 0 for who in identities}
    for _ in workers:
        for who, n in results.get(timeout=60).items():
            totals[who] += n
    for w in workers:
        w.join(10)
        assert w.exitcode == 0
    assert totals == {who: LIMIT for who in identities}
    for who in identities:
        key, offences = log_keys(f"s:{who}", "reply")[:2]
        node = redis.Redis(port=on_cluster.node_of(key).port)
        assert node.zcard(key) == LIMIT
        assert int(node.get(offences)) == 8 * 10 - LIMIT


def test_penalties_are_enforced_on_every_node_and_restored_by_resync_after_flushall(
    on_cluster, policy, django_user_model
):
    policy("reply", 60, LIMIT)
    users, ports = [], set()
    for i in range(40):
        user = django_user_model.objects.create_user(f"cl{i}")
        port = on_cluster.node_of(member_penalty_key(user.pk)).port
        if port not in ports:
            ports.add(port)
            users.append(user)
        if len(ports) == len(on_cluster.nodes):
            break
    assert len(users) == len(on_cluster.nodes)
    for user in users:
        penalties.apply_penalty(user, level=1, duration=timedelta(hours=1), reason="spam in the cluster test")
        refused = throttling.check(user, "reply")
        assert refused.reason == throttling.engine.decision.PENALISED and not refused.allowed
    on_cluster.flush()
    # The mirror went with FLUSHALL, and the change marker with it: this process's next look forgets
    # the refusals it answered from memory.
    wait_for(lambda: all(throttling.peek(u, "reply").allowed for u in users), timeout=5, message="admissions")
    call_command("throttling_resync", verbosity=0)
    for user in users:
        decision = throttling.check(user, "reply")
        assert decision.reason == throttling.engine.decision.PENALISED, user.username
        assert "spam in the cluster test" in decision.penalty.reason


def test_a_killed_master_costs_only_its_own_members(on_cluster, policy):
    policy("reply", 60, LIMIT, on_backend_failure="closed")
    by_node = _members_on_every_node(on_cluster)
    for members in by_node.values():
        for who in members:
            assert throttling.check(who, "reply").allowed
    victim = on_cluster.nodes[1]
    victim.kill()
    for port, members in by_node.items():
        for who in members:
            started = time.monotonic()
            decision = throttling.check(who, "reply")
            elapsed = time.monotonic() - started
            if port == victim.port:
                assert (
                    decision.reason == throttling.engine.decision.BACKEND_FAILURE and not decision.allowed
                )  # closed, as configured
                # Bounded by the throttle's timeouts (0.1 s), never by retries and their back-off
                # (the margin is for a loaded machine, not for a retry).
                assert elapsed < 0.5, elapsed
            else:
                assert decision.reason == throttling.engine.decision.ADMITTED and decision.remaining == LIMIT - 2, who
    # Members on the healthy nodes stay exact while the node is down.
    healthy = [who for port, members in by_node.items() if port != victim.port for who in members]
    for who in healthy:
        assert sum(throttling.check(who, "reply").allowed for _ in range(LIMIT)) == LIMIT - 2
    victim.start()  # the node comes back with its slots (its nodes.conf was kept)
    on_cluster.wait_for_slots()
    lost = by_node[victim.port][0]
    deadline = time.monotonic() + 5
    while (
        throttling.check(lost, "reply").reason == throttling.engine.decision.BACKEND_FAILURE
        and time.monotonic() < deadline
    ):
        time.sleep(0.1)
    assert throttling.peek(lost, "reply").reason == throttling.engine.decision.ADMITTED


def test_a_slot_moving_between_nodes_never_raises_and_keeps_its_count(on_cluster, policy):
    policy("reply", 60, LIMIT)
    who = "mover"
    keys = [k for i, k in enumerate(throttling.engine.keys.state_keys(f"s:{who}", "reply")) if i != 2]
    assert throttling.check(who, "reply").allowed
    source = on_cluster.node_of(keys[0])
    target = next(n for n in on_cluster.nodes if n is not source)
    src, dst = redis.Redis(port=source.port), redis.Redis(port=target.port)
    slot = src.cluster("keyslot", keys[0])
    src_id, dst_id = src.cluster("myid"), dst.cluster("myid")
    src_id = src_id.decode() if isinstance(src_id, bytes) else src_id
    dst_id = dst_id.decode() if isinstance(dst_id, bytes) else dst_id
    seen = [throttling.check(who, "reply")]
    present = [k for k in keys if src.exists(k)]
    dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
    src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
    seen.append(throttling.check(who, "reply"))  # all keys still on the source
    src.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", present[0])
    seen.append(throttling.check(who, "reply"))  # keys split: TRYAGAIN, a backend failure
    if len(present) > 1:
        src.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *present[1:])
    # All moved: the source answers ASK. A single-key call (this refund) is answered
    # by the target behind ASKING; a decision, whose absent keys the target cannot
    # vouch for while importing, gets TRYAGAIN.
    assert throttling.refund(seen[0])
    seen.append(throttling.check(who, "reply"))
    for node in on_cluster.nodes:
        redis.Redis(port=node.port).execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
    seen.append(throttling.check(who, "reply"))  # MOVED, then the target
    reasons = [d.reason for d in seen]
    assert reasons[0] == throttling.engine.decision.ADMITTED
    assert set(reasons[1:4]) <= {throttling.engine.decision.ADMITTED, throttling.engine.decision.BACKEND_FAILURE}
    assert reasons[4] == throttling.engine.decision.ADMITTED
    counted = (
        1 + sum(d.reason == throttling.engine.decision.ADMITTED for d in seen) - 1
    )  # the first check; one refunded
    assert dst.zcard(keys[0]) == counted and src.cluster("countkeysinslot", slot) == 0
    assert throttling.peek(who, "reply").remaining == LIMIT - counted


def test_reset_refund_and_policy_changes_work_on_a_cluster(on_cluster, policy):
    p = policy("reply", 60, LIMIT)
    by_node = _members_on_every_node(on_cluster, count=9)
    for members in by_node.values():
        who = members[0]
        first = throttling.check(who, "reply")
        assert throttling.refund(first)
        assert throttling.peek(who, "reply").remaining == LIMIT
        for _ in range(LIMIT):
            throttling.check(who, "reply")
        assert not throttling.check(who, "reply").allowed
        throttling.reset(who, "reply")
        assert throttling.check(who, "reply").remaining == LIMIT - 1
    # A moderator's edit reaches every process through the change marker on the cluster.
    version_key = throttling.engine.policies.cache.version_key()
    before = int(get_backend().get(version_key) or 0)
    p.max_count = LIMIT + 10
    p.save()
    assert int(get_backend().get(version_key)) > before
    who = by_node[next(iter(by_node))][1]
    assert throttling.check(who, "reply").limit == LIMIT + 10


@pytest.mark.parametrize("algorithm", ["sliding_log", "token_bucket"])
def test_a_reset_forgets_every_target_on_every_node(on_cluster, policy, algorithm):
    policy("reply", 600, 1, algorithm=algorithm)
    targets = (None, "thread-1", "thread-2")
    members = [group[0] for group in _members_on_every_node(on_cluster, count=12).values()]
    for who in members:
        for target in targets:
            assert throttling.check(who, "reply", target=target).allowed
            assert not throttling.check(who, "reply", target=target).allowed
        throttling.reset(who, "reply", target="thread-1")
        assert [throttling.peek(who, "reply", target=t).allowed for t in targets] == [False, True, False]
        throttling.reset(who, "reply")
        assert [throttling.peek(who, "reply", target=t).allowed for t in targets] == [True] * 3, who
    # Nothing of theirs is left on any node.
    left = [k for n in on_cluster.nodes for k in redis.Redis(port=n.port).keys("throttling:{s:member-*")]
    assert left == []


def test_penalty_and_eviction_housekeeping_reach_every_master(on_cluster, policy):
    infos = get_backend().infos("server")
    assert sorted(int(i["tcp_port"]) for i in infos) == sorted(n.port for n in on_cluster.nodes)
    import throttling.engine.background.eviction_watch

    assert throttling.engine.background.eviction_watch.evicted_keys() == 0
    assert throttling.engine.background.eviction_watch.current_risk() is None


def test_async_decisions_are_exact_on_every_node(on_cluster, policy):
    import asyncio

    from asgiref.sync import async_to_sync

    policy("reply", 60, LIMIT)
    by_node = _members_on_every_node(on_cluster, count=12)
    members = [group[0] for group in by_node.values()]

    async def gather():
        return await asyncio.gather(*(throttling.acheck(who, "reply") for who in members for _ in range(12)))

    decisions = async_to_sync(gather)()
    for who in members:
        mine = [d for d in decisions if d.identity == f"s:{who}"]
        assert sum(d.allowed for d in mine) == LIMIT, who
        key = log_keys(f"s:{who}", "reply")[0]
        assert redis.Redis(port=on_cluster.node_of(key).port).zcard(key) == LIMIT


def test_a_marker_moved_on_one_node_is_heard_by_a_subscriber_on_another(on_cluster, policy):
    """A classic PUBLISH reaches the subscribers of every node: the change channel can be listened to anywhere."""
    backend = get_backend()
    marker = throttling.engine.keys.refusals_version_key()
    home = backend.subscriber_address(marker)
    assert home == ("127.0.0.1", on_cluster.node_of(marker).port)
    elsewhere = next(address for address in backend.topology.masters() if address != home)
    subscriber = backend.subscribe(throttling.engine.keys.changes_channel(), elsewhere)
    try:
        throttling.reset("ann", "reply")  # moves the marker on its own node
        messages = wait_for(lambda: subscriber.read(0.1), message="the message on another node")
    finally:
        subscriber.close()
    assert messages == [redis.Redis(port=home[1]).get(marker) + b" " + marker.encode()]


def test_a_change_published_on_another_node_reaches_this_process(on_cluster, policy):
    """This process's subscriber listens on the marker's node; another process may publish from any node.
    The markers are read once an hour here: only the message can end the refusal."""
    with override_settings(THROTTLING_POLICY_REFRESH=3600):
        policy("reply", 60, 1)
        throttling.check("warm-up", "reply")
        backend = get_backend()
        # Subscribed on these settings first: subscribing again ends every refusal.
        wait_for(lambda: throttling.engine.background.poller.poller._subscribed_on is backend, message="subscribed")
        throttling.check("ann", "reply")
        assert not throttling.check("ann", "reply").allowed
        assert throttling.engine.refusal_memory.local_refusals.entries
        marker = throttling.engine.keys.refusals_version_key()
        other = next(n for n in on_cluster.nodes if n.port != on_cluster.node_of(marker).port)
        # A node counts only its own subscribers in PUBLISH's reply: none here.
        assert redis.Redis(port=other.port).publish(throttling.engine.keys.changes_channel(), f"1 {marker}") == 0
        wait_for(lambda: not throttling.engine.refusal_memory.local_refusals.entries, message="the refusal ended")


def test_a_refund_on_another_node_ends_this_processes_refusal(on_cluster, policy):
    """A refund publishes from the member's node, in its own script call; this process listens on the
    markers' node, and reads the markers once an hour here: only the message can end the refusal."""
    from throttling.backends.scripts import Script

    with override_settings(THROTTLING_POLICY_REFRESH=3600):
        policy("reply", 60, 1)
        throttling.check("warm-up", "reply")
        backend = get_backend()
        wait_for(lambda: throttling.engine.background.poller.poller._subscribed_on is backend, message="subscribed")
        listened = on_cluster.node_of(throttling.engine.keys.refusals_version_key()).port
        port, members = next((p, m) for p, m in _members_on_every_node(on_cluster).items() if p != listened)
        who = members[0]
        throttling.check(who, "reply")
        assert not throttling.check(who, "reply").allowed
        log = log_keys(f"s:{who}", "reply")[0]
        node = redis.Redis(port=port)
        (entry,) = node.zrange(log, 0, -1)
        node.eval(Script("refund").source, 1, log, throttling.engine.keys.changes_channel(), entry)
        wait_for(lambda: not throttling.engine.refusal_memory.local_refusals.entries, message="the refusal ended")
        assert throttling.check(who, "reply").allowed


def test_an_async_refund_follows_a_slot_being_migrated(on_cluster, policy):
    """The refund is a script: behind ASKING, the node importing the slot may not know it yet."""
    from asgiref.sync import async_to_sync

    policy("reply", 60, LIMIT)
    taken = throttling.check("mover-async", "reply")
    log = taken.log_key
    source = on_cluster.node_of(log)
    target = next(n for n in on_cluster.nodes if n is not source)
    src, dst = redis.Redis(port=source.port), redis.Redis(port=target.port)
    dst.script_flush()
    slot = src.cluster("keyslot", log)
    src_id, dst_id = (c.cluster("myid") for c in (src, dst))
    src_id, dst_id = (i.decode() if isinstance(i, bytes) else i for i in (src_id, dst_id))
    dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
    src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
    src.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", log)
    assert async_to_sync(throttling.arefund)(taken)
    for node in on_cluster.nodes:
        redis.Redis(port=node.port).execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
    assert dst.zcard(log) == 0 and throttling.peek("mover-async", "reply").remaining == LIMIT


def test_a_site_wide_reset_forgets_every_targets_count_on_every_node(on_cluster, policy):
    """Each target's site-wide count is an identity of its own, in its own slot: the reset finds them
    on every master."""
    from throttling.engine.deciding.plan import site_identity

    policy("raid", 60, 1, scope="site")
    targets = [f"thread-{i}" for i in range(30)]
    nodes = {on_cluster.node_of(log_keys(site_identity(t), "raid")[0]).port for t in targets}
    assert len(nodes) == len(on_cluster.nodes)  # the targets' counts spread over every node
    for target in targets:
        assert throttling.check("visitor", "raid", target=target).allowed
        assert not throttling.check("latecomer", "raid", target=target).allowed
    throttling.reset(None, "raid")
    assert all(throttling.check("latecomer", "raid", target=t).allowed for t in targets)
