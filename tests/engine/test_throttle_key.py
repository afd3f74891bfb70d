"""A client-chosen key (throttle_key, key=) chooses what is counted, never who is penalised."""

from datetime import timedelta

import pytest
import redis
from asgiref.sync import async_to_sync
from django.test.utils import override_settings
from rest_framework.test import APIClient

import throttling
from tests.support.helpers import Monitor, deciding_connections
from tests.support.processes.topology import SentinelGroup
from throttling import penalties
from throttling.engine import decision as reasons
from throttling.engine.keys import member_penalty_key, state_keys

pytestmark = pytest.mark.django_db


def penalise(member, action=""):
    penalties.apply_penalty(member, level=5, duration=timedelta(days=7), action=action, reason="Spam.")


def test_check_with_a_key_counts_the_key_and_refuses_a_penalised_member(redis_server, redis_client, policy, member):
    policy("reply", 60, 5)
    admitted = throttling.check(member, "reply", key="key-a")
    assert admitted.allowed and admitted.identity == "s:key-a"
    assert redis_client.zcard(state_keys("s:key-a", "reply")[0]) == 1  # the key is what is counted
    penalise(member)
    refused = throttling.check(member, "reply", key="key-b")
    assert not refused.allowed and refused.reason == reasons.PENALISED
    assert refused.penalty is not None and "Spam." in refused.message
    assert throttling.peek(member, "reply", key="key-c").reason == reasons.PENALISED
    assert async_to_sync(throttling.acheck)(member, "reply", key="key-d").reason == reasons.PENALISED
    # Another member's decisions under a key are untouched by this penalty.
    assert throttling.check("someone", "reply", key="key-b").allowed


def test_a_penalty_on_one_action_refuses_that_action_only(redis_server, policy, member):
    policy("reply", 60, 5)
    policy("like", 60, 5)
    penalise(member, action="reply")
    assert throttling.check(member, "reply", key="k").reason == reasons.PENALISED
    assert throttling.check(member, "like", key="k").allowed


def test_one_evalsha_per_decision_with_a_key(redis_server, policy, member):
    policy("reply", 60, 5)
    penalise(member)
    throttling.check("warm-up", "reply")  # policies loaded, connection held
    with Monitor(redis_server.url) as monitor:
        assert throttling.check(member, "reply", key="k").reason == reasons.PENALISED
    scripts = [c for _db, _client, c in monitor.events if c.upper().startswith("EVALSHA")]
    assert monitor.sent_by(deciding_connections()) == ["EVALSHA"] and member_penalty_key(member.pk) in scripts[0]


@pytest.mark.urls("tests.support.urlconfs.adapters")
def test_a_penalised_member_is_refused_whatever_header_they_send(redis_server, policy, member):
    policy("reply", 60, 50)
    web, api = APIClient(), APIClient()
    web.force_login(member)
    api.force_authenticate(member)
    assert web.post("/threads/3/reply/", HTTP_X_API_KEY="key-1").status_code == 201
    assert api.post("/api/threads/3/replies/", HTTP_X_API_KEY="key-1").status_code == 201
    penalise(member)
    for value in ("key-2", "key-3", "rotated"):
        refused = web.post("/threads/3/reply/", HTTP_X_API_KEY=value)
        assert refused.status_code == 429 and "restricted for all actions" in refused.content.decode()
        assert api.post("/api/threads/3/replies/", HTTP_X_API_KEY=value).status_code == 429
    # An anonymous client with a key is counted under it, as before.
    assert APIClient().post("/api/threads/3/replies/", HTTP_X_API_KEY="key-2").status_code == 201


@pytest.mark.topology
@pytest.mark.django_db(transaction=True)
def test_on_a_cluster_the_member_is_refused_with_a_key_on_another_slot(cluster, policy, django_user_model):
    cluster.flush()
    with override_settings(THROTTLING_REDIS_URL=cluster.url):
        policy("reply", 60, 5)
        member = django_user_model.objects.create_user("clara")
        key = next(
            f"key-{i}"
            for i in range(100)
            if cluster.node_of(state_keys(f"s:key-{i}", "reply")[0]).port
            != cluster.node_of(member_penalty_key(member.pk)).port
        )
        assert throttling.check(member, "reply", key=key).allowed
        penalise(member)
        refused = throttling.check(member, "reply", key=key)
        assert not refused.allowed and refused.reason == reasons.PENALISED
        assert async_to_sync(throttling.apeek)(member, "reply", key=key).reason == reasons.PENALISED
        assert throttling.check("someone", "reply", key=key).allowed
    cluster.flush()


@pytest.mark.topology
@pytest.mark.django_db(transaction=True)
def test_behind_sentinel_the_member_is_refused_with_a_key(policy, django_user_model):
    group = SentinelGroup().start()
    try:
        redis.Redis(port=group.master_port()).flushall()
        with override_settings(THROTTLING_REDIS_URL=group.url):
            policy("reply", 60, 5)
            member = django_user_model.objects.create_user("sena")
            assert throttling.check(member, "reply", key="k").allowed
            penalise(member)
            assert throttling.check(member, "reply", key="k").reason == reasons.PENALISED
    finally:
        group.stop()
