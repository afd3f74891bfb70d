"""Async decisions on a stalled Redis come back within their bound, however many run at once."""

import asyncio
import os
import signal
import time

import pytest
from asgiref.sync import async_to_sync

import throttling
import throttling.engine.decision
from throttling.backends.aio import get_async_backend
from throttling.conf import settings

# The product's timeouts (hasty), not the suite's longer ones: their bound is what is tested.
pytestmark = [pytest.mark.slow, pytest.mark.django_independent, pytest.mark.django_db, pytest.mark.usefixtures("hasty")]

# An async decision waits at most the connect timeout for a connection (queueing for one
# included) and the socket timeout for its reply: 0.2 s with the defaults. The margin is
# for a shared, loaded machine; without the bound the slowest of 200 took seconds.
MARGIN = 0.6


def _bound():
    return settings.SOCKET_CONNECT_TIMEOUT + settings.SOCKET_TIMEOUT


async def _stalled_gather(own_redis, n, call, action="reply"):
    """`n` concurrent decisions while Redis is stopped: [(decision, seconds it took)]."""
    await throttling.acheck("warm", action)  # this loop holds an open connection

    async def timed(i):
        started = time.monotonic()
        decision = await call(f"crowd-{i}", action)
        return decision, time.monotonic() - started

    os.kill(own_redis.pid, signal.SIGSTOP)
    try:
        return await asyncio.gather(*(timed(i) for i in range(n)))
    finally:
        os.kill(own_redis.pid, signal.SIGCONT)


@pytest.mark.parametrize("n", [20, 50, 200])
def test_every_concurrent_acheck_returns_within_its_bound_and_fails_open(own_redis, policy, n):
    policy("reply", 60, 5)
    results = async_to_sync(_stalled_gather)(own_redis, n, throttling.acheck)
    slowest = max(seconds for _, seconds in results)
    print(f"{n} concurrent acheck on a stalled Redis: slowest {slowest:.3f} s")
    assert all(d.reason == throttling.engine.decision.BACKEND_FAILURE and d.allowed for d, _ in results)
    assert slowest < _bound() + MARGIN, slowest


def test_apeek_is_bounded_and_fails_closed_when_the_policy_says_so(own_redis, policy):
    policy("reply", 60, 5, on_backend_failure="closed")
    results = async_to_sync(_stalled_gather)(own_redis, 200, throttling.apeek)
    slowest = max(seconds for _, seconds in results)
    print(f"200 concurrent apeek on a stalled Redis: slowest {slowest:.3f} s")
    assert all(d.reason == throttling.engine.decision.BACKEND_FAILURE and not d.allowed for d, _ in results)
    assert slowest < _bound() + MARGIN, slowest


def test_a_new_connection_sends_nothing_before_the_decision(own_redis, policy):
    """No HELLO (protocol 2) and no CLIENT SETINFO: a connection opened to a stalled server has
    nothing to wait for before the decision's own command, so opening one never costs a timeout."""
    policy("reply", 60, 5)

    async def scenario():
        await throttling.acheck("first", "reply")
        conn = get_async_backend()._pool(None).free[0][0]
        return conn.protocol, await throttling.acheck("second", "reply")

    protocol, second = async_to_sync(scenario)()
    assert protocol == 2
    assert second.reason == throttling.engine.decision.ADMITTED


def test_decisions_after_the_stall_are_counted_again(own_redis, policy):
    policy("reply", 60, 5)
    async_to_sync(_stalled_gather)(own_redis, 50, throttling.acheck)

    async def after():
        return [await throttling.acheck("after", "reply") for _ in range(6)]

    decisions = async_to_sync(after)()
    # No connection the stall left half-read is used again: counting resumes at once.
    assert [d.allowed for d in decisions] == [True] * 5 + [False]
