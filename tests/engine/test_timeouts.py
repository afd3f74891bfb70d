"""A decision that timed out may still run once Redis reads it: what it wrote is undone."""

import os
import signal
import time

import pytest
import redis

import throttling
import throttling.engine.background.undo_timeouts
import throttling.engine.decision
import throttling.engine.identity
from tests.support.helpers import wait_for
from tests.support.penalties import queued
from throttling.engine.keys import log_keys

# The product's timeouts (hasty): each test times a decision out on a stalled Redis.
pytestmark = [pytest.mark.slow, pytest.mark.django_independent, pytest.mark.django_db, pytest.mark.usefixtures("hasty")]


def _stall_and_decide(own_redis, who, action):
    """One decision sent to a stalled Redis (it times out), then Redis resumes and runs it."""
    os.kill(own_redis.pid, signal.SIGSTOP)
    try:
        decision = throttling.check(who, action)
    finally:
        os.kill(own_redis.pid, signal.SIGCONT)
    assert (
        decision.reason == throttling.engine.decision.BACKEND_FAILURE and decision.allowed
    )  # failed open, as configured
    return decision


def test_a_timed_out_admission_that_ran_late_is_not_counted_twice(own_redis, policy):
    client = redis.Redis.from_url(own_redis.url)
    policy("reply", 60, 5)
    first = throttling.check("ann", "reply")
    assert first.allowed
    log = log_keys(first.identity, "reply")[0]
    _stall_and_decide(own_redis, "ann", "reply")
    # Redis resumed and ran the call nobody waited for: two entries for one admission.
    wait_for(lambda: client.zcard(log) == 2, timeout=5, message="the late script")
    # The background thread undoes it a moment after Redis answers again (it takes the entry off its
    # list, then removes what the late call wrote: wait for both).
    wait_for(
        lambda: client.zcard(log) == 1 and not throttling.engine.background.undo_timeouts.in_doubt.entries,
        timeout=5,
        message="the undo",
    )
    third = throttling.check("ann", "reply")
    assert third.allowed
    # The late entry is gone: the first and the third remain.
    assert client.zcard(log) == 2
    assert throttling.peek("ann", "reply").remaining == 3
    assert not throttling.engine.background.undo_timeouts.in_doubt.entries


@pytest.mark.django_db(transaction=True)
def test_a_timed_out_crossing_does_not_block_escalation(own_redis, policy, member, broker, dead_queue):
    client = redis.Redis.from_url(own_redis.url)
    policy("reply", 60, 1, offence_threshold=1)
    assert throttling.check(member, "reply").allowed
    keys = log_keys(throttling.engine.identity.identify(member)[0], "reply")
    _stall_and_decide(own_redis, member, "reply")
    # Late, it refused and crossed: a pending mark for a run whose task was never sent.
    wait_for(lambda: client.exists(keys[3]), timeout=5, message="the late crossing")
    # The background thread removes the stale mark a moment after Redis answers again.
    wait_for(lambda: not client.exists(keys[3]), timeout=5, message="the undo of the stale mark")
    assert throttling.check(member, "reply").escalated  # the next refusal escalates at once
    sent = wait_for(lambda: queued(broker, dead_queue), timeout=10, message="the escalation")
    assert [name for name, _ in sent] == ["throttling.tasks.escalate_offender"]


def test_settling_is_a_no_op_when_the_timed_out_call_never_ran(own_redis, policy):
    client = redis.Redis.from_url(own_redis.url)
    policy("reply", 60, 5)
    assert throttling.check("bo", "reply").allowed
    log = log_keys(throttling.engine.identity.identify("bo")[0], "reply")[0]
    own_redis.kill()  # the call is lost with the server, not delayed
    down = throttling.check("bo", "reply")
    assert down.reason == throttling.engine.decision.BACKEND_FAILURE
    own_redis.start()
    time.sleep(0.1)
    assert throttling.check("bo", "reply").allowed
    wait_for(lambda: not throttling.engine.background.undo_timeouts.in_doubt.entries, timeout=5, message="the undo")
    assert throttling.check("bo", "reply").allowed
    assert client.zcard(log) == 2
