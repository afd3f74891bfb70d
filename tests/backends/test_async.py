"""Async decisions: acheck/apeek/areset on redis.asyncio, exact under gather, the loop never blocked."""

import asyncio
import os
import signal

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

import throttling
import throttling.engine.decision
import throttling.engine.policies.cache
from tests.support.helpers import retry_after

pytestmark = pytest.mark.django_db

LIMIT = 5


def run(coro_fn, *args):
    """Run a coroutine function as Django would: on an event loop in another thread."""
    return async_to_sync(coro_fn)(*args)


async def _gather(who, n, action="reply"):
    return await asyncio.gather(*(throttling.acheck(who, action) for _ in range(n)))


def test_exact_under_gather(redis_server, policy):
    policy("reply", 60, LIMIT)
    decisions = run(_gather, "crowd", 40)
    assert sum(d.allowed for d in decisions) == LIMIT
    assert sorted(d.remaining for d in decisions if d.allowed) == list(range(LIMIT))
    assert all(d.reason == throttling.engine.decision.THROTTLED for d in decisions if not d.allowed)
    assert throttling.peek("crowd", "reply").remaining == 0  # the sync API sees the same state


def test_peek_reset_and_refund_have_async_twins(redis_server, policy):
    policy("reply", 60, LIMIT)

    async def scenario():
        first = await throttling.acheck("pat", "reply")
        peeked = await throttling.apeek("pat", "reply")
        refunded = await throttling.arefund(first)
        after_refund = await throttling.apeek("pat", "reply")
        for _ in range(LIMIT):
            await throttling.acheck("pat", "reply")
        refused = await throttling.acheck("pat", "reply")
        await throttling.areset("pat", "reply")
        return first, peeked, refunded, after_refund, refused, await throttling.apeek("pat", "reply")

    first, peeked, refunded, after_refund, refused, after_reset = run(scenario)
    assert first.allowed and peeked.remaining == LIMIT - 1
    assert refunded and after_refund.remaining == LIMIT
    assert not refused.allowed and refused.retry_after > 0
    assert after_reset.remaining == LIMIT


@pytest.mark.parametrize("algorithm", ["sliding_log", "token_bucket"])
def test_a_flushed_script_is_loaded_once_and_sent_again_without_counting_twice(own_redis, policy, algorithm):
    import redis

    policy("reply", 60, LIMIT, algorithm=algorithm)
    client = redis.Redis.from_url(own_redis.url)

    async def scenario():
        first = await throttling.acheck("nora", "reply")
        client.script_flush()  # what a restart or a failover of a managed server does to its scripts
        second = await throttling.acheck("nora", "reply")
        return first, second, await throttling.apeek("nora", "reply")

    first, second, peeked = run(scenario)
    assert first.allowed and second.allowed and second.reason == throttling.engine.decision.ADMITTED
    assert (first.remaining, second.remaining, peeked.remaining) == (LIMIT - 1, LIMIT - 2, LIMIT - 2)
    # Loaded again, once: the next decision finds it.
    from throttling.backends.scripts import Script

    assert client.script_exists(Script(algorithm).sha) == [True]


def test_a_token_bucket_is_decided_and_refunded_too(redis_server, policy):
    policy("like", 60, LIMIT, algorithm="token_bucket")
    decisions = run(_gather, "liker", 12, "like")
    assert sum(d.allowed for d in decisions) == LIMIT

    async def refund_one():
        await throttling.areset("liker2", "like")
        d = await throttling.acheck("liker2", "like")
        ok = await throttling.arefund(d)
        return ok, await throttling.apeek("liker2", "like")

    ok, after = run(refund_one)
    assert ok and after.remaining == LIMIT


def test_policies_load_from_async_code_without_synchronous_only_errors(redis_server, policy):
    policy("reply", 60, LIMIT)
    throttling.engine.policies.cache.policies.clear()  # the first decision must load policies from the database
    decision = run(throttling.acheck, "first-of-the-day", "reply")
    assert decision.reason == throttling.engine.decision.ADMITTED and decision.limit == LIMIT


@pytest.mark.slow
def test_the_event_loop_keeps_running_while_redis_stalls(own_redis, policy):
    """A decision waiting on a stalled Redis must yield: other coroutines run, and other decisions
    start, while it waits. A blocking call would return (timed out) before anything else ran. The
    suite's 1 s timeout (tests/settings.py) is long enough that "still waiting" is never a race."""
    policy("reply", 60, LIMIT)
    throttling.peek("warm-up", "reply")

    async def scenario():
        await throttling.acheck("warm", "reply")  # this loop's connection is open
        os.kill(own_redis.pid, signal.SIGSTOP)
        try:
            pending = [asyncio.ensure_future(throttling.acheck(f"m{i}", "reply")) for i in range(20)]
            other_work = 0
            for _ in range(50):
                await asyncio.sleep(0)
                other_work += 1
            waiting = sum(not task.done() for task in pending)
            decisions = await asyncio.gather(*pending)
        finally:
            os.kill(own_redis.pid, signal.SIGCONT)
        return other_work, waiting, decisions

    other_work, waiting, decisions = run(scenario)
    assert other_work == 50 and waiting == 20  # the loop ran on while all twenty waited on Redis
    assert all(
        d.reason == throttling.engine.decision.BACKEND_FAILURE and d.allowed for d in decisions
    )  # fail open, as configured


@pytest.mark.urls("tests.support.urlconfs.adapters")
def test_the_decorator_on_an_async_view_returns_429_with_retry_after(redis_server, policy, member):
    policy("reply", 60, 2)
    client = AsyncClient()

    async def post(data):
        return await client.post("/async-reply/", data)

    first = run(post, {"text": "one"})
    assert first.status_code == 201 and first.content == b"saved for a visitor"
    refused_form = run(post, {"text": "bad", "status": "400"})  # a failed form gives its entry back
    assert refused_form.status_code == 400
    second = run(post, {"text": "two"})
    assert second.status_code == 201
    third = run(post, {"text": "three, kept for the member"})
    assert third.status_code == 429
    assert 1 <= retry_after(third) <= 60
    assert "three, kept for the member" in third.content.decode()


@pytest.mark.urls("tests.support.urlconfs.adapters")
def test_the_async_view_counts_a_signed_in_member_by_account(redis_server, policy, member):
    policy("reply", 60, 1)
    client = AsyncClient()
    client.force_login(member)

    async def post():
        return await client.post("/async-reply/", {"text": "hi"})

    assert run(post).content == b"saved for a member"
    assert run(post).status_code == 429
    assert throttling.peek(member, "reply").remaining == 0
    assert throttling.peek("ip:127.0.0.1", "reply").remaining == 1
