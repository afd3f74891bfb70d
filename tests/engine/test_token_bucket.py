"""The token bucket (GCRA) against a real Redis: burst, refill, exact waits, memory, windows, races."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection

import throttling
import throttling.engine.decision
import throttling.engine.policies.cache
from tests.support.helpers import wait_for
from tests.support.penalties import queued
from tests.support.traffic import race
from throttling import penalties
from throttling.engine.keys import TOKEN_BUCKET, state_keys
from throttling.models import ActionPolicy

pytestmark = [pytest.mark.django_independent, pytest.mark.django_db]


def bucket(policy, action, period, max_count, **fields):
    return policy(action, period, max_count, algorithm="token_bucket", **fields)


def keys_of(client, identity):
    return [k for k in client.keys(f"*{{{identity}}}*")]


def test_burst_of_n_then_one_token_every_p_over_n_with_exact_retry_after(redis_server, policy):
    bucket(policy, "like", 3, 3)  # 3 at once, then one every second
    started = time.monotonic()
    burst = [throttling.check("alice", "like") for _ in range(3)]
    assert all(d.allowed for d in burst)
    assert [d.remaining for d in burst] == [2, 1, 0]
    assert all(d.limit == 3 for d in burst)
    sent = time.monotonic()
    refused = throttling.check("alice", "like")
    took = time.monotonic() - started
    assert not refused.allowed and refused.reason == throttling.engine.decision.THROTTLED
    # The next token is one interval (P/N = 1 s) after the burst's first, less the time since.
    assert 1.0 - took - 0.002 <= refused.retry_after <= 1.0
    # A full bucket again three intervals after the first, less the time since.
    assert 3.0 - took - 0.002 <= refused.reset_after <= 3.0

    # Shortly before the token: still refused, with the rest of the wait (`since` is at least the
    # time between the two decisions, the sleep at most).
    time.sleep(refused.retry_after - 0.3)
    early = throttling.check("alice", "like")
    since = time.monotonic() - sent
    assert since < refused.retry_after, "the test process stalled past the token"
    assert not early.allowed
    assert refused.retry_after - since - 0.002 <= early.retry_after <= 0.3 + 0.002
    time.sleep(early.retry_after + 0.01)
    one = throttling.check("alice", "like")
    assert one.allowed and one.remaining == 0
    # Exactly one token came back: the next waits a whole interval again, less the time since `one`.
    again = throttling.check("alice", "like")
    assert not again.allowed and 0.5 < again.retry_after <= 1.0


def test_a_refusal_takes_no_token_and_counts_an_offence(redis_server, redis_client, policy):
    bucket(policy, "like", 60, 2)
    throttling.check("bob", "like")
    throttling.check("bob", "like")
    state_key = state_keys("s:bob", "like", TOKEN_BUCKET)[0]
    before = redis_client.get(state_key)
    refusals = [throttling.check("bob", "like") for _ in range(3)]
    assert [d.offences for d in refusals] == [1, 2, 3]
    assert redis_client.get(state_key) == before  # nothing written to the bucket
    # The wait stays the same whatever the number of refused attempts.
    assert refusals[-1].retry_after == pytest.approx(30.0, abs=0.1)


def test_state_is_constant_in_size_and_expires_when_the_bucket_is_full(redis_server, redis_client, policy):
    bucket(policy, "like", 3600, 100_000)
    for _ in range(10):
        throttling.check("carol", "like")
    small = sum(redis_client.memory_usage(k, samples=0) for k in keys_of(redis_client, "s:carol"))
    started = time.monotonic()
    for _ in range(2000):
        throttling.check("carol", "like")
    took_ms = (time.monotonic() - started) * 1000
    (key,) = keys_of(redis_client, "s:carol")
    large = redis_client.memory_usage(key, samples=0)
    # The same one short string (its number may take a few more digits), not 2,000 entries.
    assert abs(large - small) <= 16 and large <= 160
    # The key lives exactly until the bucket is full again: 2,010 tokens × 36 ms, less what
    # refilled while the calls were made.
    assert 2010 * 36 - took_ms - 500 < redis_client.pttl(key) <= 2010 * 36


def test_state_of_several_windows_stays_under_160_bytes(redis_server, redis_client, policy):
    bucket(policy, "like", 60, 100_000, windows=[(3600, 500_000), (86400, 1_000_000)])
    for _ in range(50):
        throttling.check("dave", "like")
    (key,) = keys_of(redis_client, "s:dave")
    assert redis_client.memory_usage(key, samples=0) <= 160
    # A refusal adds only the offence counter (penalties' bookkeeping, shared with
    # the log), which expires with the offence window.
    bucket(policy, "poke", 60, 1)
    throttling.check("dave", "poke")
    throttling.check("dave", "poke")
    offences = state_keys("s:dave", "poke", TOKEN_BUCKET)[1]
    assert 0 < redis_client.ttl(offences) <= 600


def test_idle_bucket_key_disappears(redis_server, redis_client, policy):
    bucket(policy, "like", 1, 2)
    d = throttling.check("erin", "like")
    assert redis_client.exists(d.log_key)
    time.sleep(0.7)  # one token (0.5 s) back and then some: the level drained to zero
    assert not redis_client.exists(d.log_key)


def test_max_count_of_a_million_is_accepted_and_decides(redis_server, policy):
    bucket(policy, "view", 60, 1_000_000)
    d = throttling.check("frank", "view", cost=1000)
    assert d.allowed and d.limit == 1_000_000 and d.remaining == 999_000


@pytest.mark.slow
def test_windows_are_all_or_nothing(redis_server, redis_client, policy):
    # 2 per second and 3 per minute: the minute binds after three.
    bucket(policy, "flag", 1, 2, windows=[(60, 3)])
    started = time.monotonic()
    first, second = throttling.check("gina", "flag"), throttling.check("gina", "flag")
    assert first.allowed and second.allowed
    refused = throttling.check("gina", "flag")
    took = time.monotonic() - started
    assert not refused.allowed  # the second-long bucket is empty
    # Its next token comes half a second after the first was taken.
    assert refused.limit == 2 and 0.5 - took - 0.002 <= refused.retry_after <= 0.5
    key = refused.log_key
    written = redis_client.get(key)
    time.sleep(0.55)
    third = throttling.check("gina", "flag")
    assert third.allowed and third.remaining == 0  # both buckets are empty now
    time.sleep(1.05)  # the short bucket is full again; the minute bucket is not
    blocked = throttling.check("gina", "flag")
    assert not blocked.allowed and blocked.limit == 3
    assert blocked.retry_after == pytest.approx(20 - 1.6, abs=0.3)  # one minute-token every 20 s
    # The refusal by the minute window took nothing from the second window either.
    assert redis_client.get(key) != written
    time.sleep(0.05)
    assert throttling.peek("gina", "flag", cost=1).limit == 3


def test_cost_takes_several_tokens_and_is_refused_whole(redis_server, policy):
    bucket(policy, "upload", 60, 5)
    assert throttling.check("hana", "upload", cost=3).remaining == 2
    refused = throttling.check("hana", "upload", cost=3)
    assert not refused.allowed and refused.remaining == 2
    assert refused.retry_after == pytest.approx(12, abs=0.1)  # one token per 12 s is missing
    assert throttling.check("hana", "upload", cost=2).allowed


def test_peek_writes_nothing_and_refund_gives_the_tokens_back_once(redis_server, redis_client, policy):
    bucket(policy, "like", 60, 3)
    assert throttling.peek("ivan", "like").remaining == 3
    assert not keys_of(redis_client, "s:ivan")
    d = throttling.check("ivan", "like", cost=2)
    assert throttling.peek("ivan", "like").remaining == 1
    assert throttling.refund(d) is True
    assert throttling.peek("ivan", "like").remaining == 3
    assert throttling.refund(d) is False  # a decision is refunded at most once
    assert throttling.peek("ivan", "like").remaining == 3


@pytest.mark.django_db(transaction=True)
def test_offences_and_penalties_work_for_a_bucket(
    redis_server, redis_client, policy, member, ladder, broker, dead_queue
):
    bucket(policy, "like", 60, 1, offence_threshold=3)
    assert throttling.check(member, "like").allowed
    refusals = [throttling.check(member, "like") for _ in range(3)]
    assert [d.escalated for d in refusals] == [False, False, True]
    # The crossing queued exactly one escalation (to a queue no worker reads).
    sent = wait_for(lambda: queued(broker, dead_queue), timeout=10, message="the escalation at the broker")
    assert [name for name, _ in sent] == ["throttling.tasks.escalate_offender"]
    run = redis_client.get(state_keys(refusals[-1].identity, "like", TOKEN_BUCKET)[3]).decode()
    warning = penalties.escalate(member.pk, "like", run, 3, 600)  # the first rung warns
    assert warning.action == "like" and warning.crossing == run
    block = penalties.apply_penalty(member, level=2, duration=timedelta(minutes=15), action="like", reason="Spam.")
    refused = throttling.check(member, "like")
    assert refused.reason == throttling.engine.decision.PENALISED and refused.penalty.penalty_id == block.pk
    assert 14 * 60 < refused.retry_after <= 15 * 60


def test_switching_a_live_policy_between_algorithms_works_on_the_next_decision(redis_server, policy):
    p = policy("reply", 60, 2)
    assert throttling.check("jo", "reply").allowed
    assert throttling.check("jo", "reply").allowed
    assert not throttling.check("jo", "reply").allowed
    p.algorithm = "token_bucket"
    p.save()
    switched = throttling.check("jo", "reply")  # a fresh bucket: no WRONGTYPE, no error
    assert switched.allowed and switched.reason == throttling.engine.decision.ADMITTED
    ActionPolicy.objects.filter(pk=p.pk).update(algorithm="sliding_log")
    throttling.engine.policies.cache.invalidate_policies()
    back = throttling.check("jo", "reply")
    assert back.reason == throttling.engine.decision.THROTTLED  # the log kept its history meanwhile


def test_reset_forgets_the_bucket(redis_server, redis_client, policy):
    bucket(policy, "like", 60, 1)
    throttling.check("kim", "like")
    assert not throttling.check("kim", "like").allowed
    throttling.reset("kim", "like")
    assert throttling.check("kim", "like").allowed


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("trial", range(3))
def test_processes_racing_on_a_bucket_admit_exactly_the_limit(redis_server, policy, trial):
    bucket(policy, "like", 3600, 5)
    throttling.peek("warm-up", "like")  # policies cached before the fork
    assert race(f"racer-{trial}", "like", 8, 20) == 5


def test_acquire_waits_for_the_next_token(redis_server, policy):
    bucket(policy, "job", 1, 2)  # one token every 0.5 s
    throttling.check("worker", "job")
    throttling.check("worker", "job")
    started = time.monotonic()
    d = throttling.acquire("worker", "job", timeout=2)
    waited = time.monotonic() - started
    assert d.allowed
    assert 0.35 < waited < 1.0  # it slept the wait, once


def test_acquire_gives_up_at_the_timeout_without_sleeping_past_it(redis_server, policy):
    bucket(policy, "job", 60, 1)
    throttling.check("worker", "job")
    started = time.monotonic()
    d = throttling.acquire("worker", "job", timeout=1.0)
    assert not d.allowed and d.reason == throttling.engine.decision.THROTTLED
    # The wait (60 s) is longer than the timeout: it returns at once instead of sleeping (sleeping
    # to the timeout would take 1 s; the margin is for a loaded machine).
    assert time.monotonic() - started < 0.5


def test_acquire_does_not_busy_loop(redis_server, redis_client, policy):
    policy("job", 1, 1)  # the sliding log waits too
    throttling.check("worker", "job")
    redis_client.config_resetstat()
    d = throttling.acquire("worker", "job", timeout=3)
    assert d.allowed
    calls = int(redis_client.info("commandstats")["cmdstat_evalsha"]["calls"])
    assert calls <= 3  # refused, slept the wait, admitted (one spare for a clock edge)


def test_acquire_refuses_a_negative_timeout(redis_server, policy):
    with pytest.raises(ValueError):
        throttling.acquire("worker", "job", timeout=-1)


@pytest.mark.parametrize("cost", [True, 0, -1, 1.5, "1"])
def test_a_cost_that_is_not_a_positive_whole_number_is_refused(redis_server, policy, cost):
    bucket(policy, "like", 60, 5)
    with pytest.raises(ValueError):
        throttling.check("lee", "like", cost=cost)


def test_threads_each_hold_their_own_connection_and_stay_exact(redis_server, policy):
    bucket(policy, "like", 3600, 40)
    throttling.peek("warm-up", "like")  # policies cached before the threads start
    admitted, errors = [], []

    def decide():
        try:
            admitted.append(sum(throttling.check("crowd", "like").allowed for _ in range(10)))
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    workers = [threading.Thread(target=decide) for _ in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    assert errors == [] and sum(admitted) == 40
