"""On a Redis Cluster, a dead node holding the policy change marker fails no decision of members elsewhere."""

import time

import pytest
import redis
from asgiref.sync import async_to_sync
from django.test.utils import override_settings

import throttling
import throttling.engine.decision
from tests.support.helpers import settle_background_thread, wait_for
from throttling.engine.keys import log_keys
from throttling.engine.policies.cache import policies, version_key

pytestmark = [pytest.mark.topology, pytest.mark.django_db(transaction=True)]

LIMIT = 5


@pytest.fixture
def on_cluster(cluster, settings):
    """The cluster, every node up and empty; every decision polls the marker (no wait for a poll)."""
    for node in cluster.nodes:
        if not node.running:
            node.start()
    cluster.wait_for_slots()
    cluster.flush()
    settings.THROTTLING_POLICY_REFRESH = 0
    with override_settings(THROTTLING_REDIS_URL=cluster.url):
        yield cluster
    for node in cluster.nodes:
        if not node.running:
            node.start()
    cluster.wait_for_slots()
    cluster.flush()


def _away_from_the_marker(cluster, count=12):
    """The node holding the marker, and string identities whose keys live on the other nodes."""
    marker_node = cluster.node_of(version_key())
    members = []
    i = 0
    while len(members) < count:
        who = f"elsewhere-{i}"
        i += 1
        if cluster.node_of(log_keys(f"s:{who}", "reply")[0]) is not marker_node:
            members.append(who)
    return marker_node, members


def test_a_dead_marker_node_fails_no_decision_elsewhere_and_cached_policies_stay(on_cluster, policy):
    policy("reply", 60, LIMIT, on_backend_failure="closed")
    marker_node, members = _away_from_the_marker(on_cluster)
    assert throttling.check("warm-up", "reply").reason == throttling.engine.decision.ADMITTED
    marker_node.kill()
    for who in members:
        decisions = [throttling.check(who, "reply") for _ in range(LIMIT + 1)]
        # Each decision polled the dead node first; only its own call decided.
        assert [d.reason for d in decisions] == [throttling.engine.decision.ADMITTED] * LIMIT + [
            throttling.engine.decision.THROTTLED
        ], who
        assert decisions[0].limit == LIMIT  # the cached policy, in force


def test_async_decisions_ignore_a_dead_marker_node_too(on_cluster, policy):
    policy("reply", 60, LIMIT, on_backend_failure="closed")
    marker_node, members = _away_from_the_marker(on_cluster, count=4)
    assert throttling.check("warm-up", "reply").allowed
    marker_node.kill()

    async def decide():
        return [[await throttling.acheck(who, "reply") for _ in range(LIMIT + 1)] for who in members]

    for decisions in async_to_sync(decide)():
        assert [d.allowed for d in decisions] == [True] * LIMIT + [False]
        assert throttling.engine.decision.BACKEND_FAILURE not in {d.reason for d in decisions}


def test_the_marker_is_polled_again_once_its_node_is_back(on_cluster, policy):
    p = policy("reply", 60, LIMIT)
    marker_node, members = _away_from_the_marker(on_cluster, count=2)
    assert throttling.check(members[0], "reply").limit == LIMIT
    marker = redis.Redis(port=marker_node.port)
    announced = marker.get(version_key())
    # The policy's saves were announced on the change channel. Their messages, and a marker read made
    # before them, may still be on their way to the background thread: one arriving once the node is
    # down would mark the cache stale, and the next decision would read the edit below too soon.
    settle_background_thread(marker)
    wait_for(lambda: policies._seen == announced, message="the background thread to read the marker")
    assert policies.get("reply").windows[0][1] == LIMIT  # reloaded if anything made it stale
    assert policies.cached("reply")[0]
    marker_node.kill()
    # An edit saved meanwhile in another process, whose announcement could not reach the marker.
    type(p).objects.filter(pk=p.pk).update(max_count=LIMIT + 10)
    assert throttling.check(members[0], "reply").limit == LIMIT  # the poll failed: the cache holds
    marker_node.start()  # without persistence: the marker it held is gone, which is a change too
    on_cluster.wait_for_slots()
    assert redis.Redis(port=marker_node.port).get(version_key()) != announced
    deadline = time.monotonic() + 5
    while throttling.check(members[1], "reply").limit != LIMIT + 10 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert throttling.peek(members[1], "reply").limit == LIMIT + 10
