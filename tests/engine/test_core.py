"""The sliding-log decision against a real Redis: windows, waits, members, TTL, offences."""

import time

import pytest

import throttling
import throttling.common.words
import throttling.engine.keys
import throttling.engine.refusal_memory

pytestmark = [pytest.mark.django_independent, pytest.mark.django_db]


def redis_now(client):
    sec, usec = client.time()
    return sec + usec / 1e6


def entry_times(client, key):
    return [score / 1e6 for _, score in client.zrange(key, 0, -1, withscores=True)]


def decided(client, who, action):
    """(Redis time before, the decision, Redis time after): the decision's own time lies between."""
    before = redis_now(client)
    decision = throttling.check(who, action)
    return before, decision, redis_now(client)


def within(wait, low, high, slack=0.002):
    """`wait` lies in [low, high], less a rounding `slack` (waits are whole milliseconds or finer)."""
    return max(0.0, low) - slack <= wait <= high + slack


def test_admits_max_count_then_refuses(redis_server, policy):
    policy("reply", 60, 3)
    decisions = [throttling.check("alice", "reply") for _ in range(5)]
    assert [d.allowed for d in decisions] == [True, True, True, False, False]
    assert [d.remaining for d in decisions] == [2, 1, 0, 0, 0]
    assert all(d.limit == 3 for d in decisions)
    assert decisions[0].retry_after == 0
    assert 59 < decisions[3].retry_after <= 60
    # Another identity has its own log.
    assert throttling.check("bob", "reply").allowed


def test_sliding_window_boundary_and_exact_retry_after(redis_server, redis_client, policy):
    period = 2
    policy("reply", period, 2)
    first = throttling.check("alice", "reply")
    time.sleep(0.3)
    second = throttling.check("alice", "reply")
    assert first.allowed and second.allowed
    t0, t1 = entry_times(redis_client, first.log_key)

    # Exact: the wait until the oldest entry leaves, from when Redis decided (between `before` and
    # `after` by its own clock, so a stalled test process cannot make it look wrong).
    before, refused, after = decided(redis_client, "alice", "reply")
    assert not refused.allowed
    assert within(refused.retry_after, t0 + period - after, t0 + period - before)
    round_trip = after - before

    # Shortly before the oldest entry leaves the window: still refused, with the rest of the wait.
    # This one is answered from the process's local refusals, which count the wait down from when
    # Redis's refusal arrived: later than Redis decided by at most that refusal's round trip.
    time.sleep(max(0, t0 + period - 0.3 - redis_now(redis_client)))
    before, late, after = decided(redis_client, "alice", "reply")
    assert after < t0 + period, "the test process stalled past the window's end"
    assert not late.allowed
    assert within(late.retry_after, t0 + period - after, t0 + period - before + round_trip)

    # Just after: one slot is free again, and only one (t1 is still inside).
    time.sleep(max(0, t0 + period + 0.05 - redis_now(redis_client)))
    assert throttling.check("alice", "reply").allowed
    before, again, after = decided(redis_client, "alice", "reply")
    assert not again.allowed
    assert within(again.retry_after, t1 + period - after, t1 + period - before)


@pytest.mark.slow
def test_admissions_spread_over_time_never_exceed_the_limit(redis_server, redis_client, policy):
    period, max_count = 1, 4
    policy("like", period, max_count)
    admitted = []
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        before = redis_now(redis_client)
        if throttling.check("dave", "like").allowed:
            # The script stamped the entry somewhere between these two reads of Redis's clock.
            admitted.append((before, redis_now(redis_client)))
        time.sleep(0.005)
    assert len(admitted) >= 2 * max_count  # it slides: quota comes back every period
    for i, (earliest, _latest) in enumerate(admitted):
        # Admissions certainly inside one period starting at this one: never more than the limit.
        assert sum(1 for _e, latest in admitted[i:] if latest < earliest + period) <= max_count


def test_time_comes_from_redis_not_the_web_server(redis_server, redis_client, policy, monkeypatch):
    policy("reply", 60, 2)
    # A web node whose clock is a day ahead must not change any window.
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + 86400)
    d = throttling.check("erin", "reply")
    stamped = entry_times(redis_client, d.log_key)[0]
    assert stamped == pytest.approx(redis_now(redis_client), abs=1)
    assert throttling.check("erin", "reply").allowed
    refused = throttling.check("erin", "reply")
    assert not refused.allowed and 59 < refused.retry_after <= 60


def test_every_admission_is_its_own_entry(redis_server, redis_client, policy):
    policy("like", 60, 1000)
    decisions = [throttling.check("frank", "like") for _ in range(500)]
    assert all(d.allowed for d in decisions)
    members = redis_client.zrange(decisions[0].log_key, 0, -1, withscores=True)
    assert len(members) == 500
    assert len({m for m, _ in members}) == 500
    # Many share a millisecond, which a timestamp member would have collapsed.
    millis = [int(score // 1000) for _, score in members]
    assert len(set(millis)) < len(millis)
    assert max(len(m) for m, _ in members) <= 64


def test_cost_takes_several_entries(redis_server, redis_client, policy):
    policy("post", 60, 5)
    d = throttling.check("gina", "post", cost=3)
    assert d.allowed and d.remaining == 2
    assert redis_client.zcard(d.log_key) == 3
    refused = throttling.check("gina", "post", cost=3)
    assert not refused.allowed and refused.remaining == 2
    assert throttling.check("gina", "post", cost=2).allowed
    # More than a window holds is a refusal (limits are data a moderator edits), never an exception.
    assert throttling.check("gina", "post", cost=6).reason == "too_costly"
    with pytest.raises(ValueError):
        throttling.check("gina", "post", cost=0)


def test_multi_window_is_all_or_nothing(redis_server, redis_client, policy):
    # 2 per second and 3 per minute: the third within a minute is refused by the
    # long window alone, and must not be written into the log the short one reads.
    policy("reply", 60, 3, windows=[(1, 2)])
    a, b = throttling.check("hal", "reply"), throttling.check("hal", "reply")
    refused_short = throttling.check("hal", "reply")
    assert a.allowed and b.allowed and not refused_short.allowed
    assert refused_short.limit == 2 and refused_short.retry_after <= 1
    assert redis_client.zcard(a.log_key) == 2
    time.sleep(1.05)
    assert throttling.check("hal", "reply").allowed
    refused_long = throttling.check("hal", "reply")
    assert not refused_long.allowed
    assert refused_long.limit == 3 and refused_long.retry_after > 55
    assert redis_client.zcard(a.log_key) == 3  # nothing recorded for the refusals


def test_remaining_reports_the_binding_window(redis_server, policy):
    policy("reply", 60, 10, windows=[(5, 2)])
    d = throttling.check("ida", "reply")
    assert (d.limit, d.remaining) == (2, 1)


def test_peek_never_records(redis_server, redis_client, policy):
    policy("reply", 60, 2)
    for _ in range(10):
        p = throttling.peek("jo", "reply")
        assert p.allowed and p.remaining == 2  # nothing taken, nothing recorded
    assert redis_client.keys("*{s:jo}*") == []
    throttling.check("jo", "reply")
    throttling.check("jo", "reply")
    refused = throttling.peek("jo", "reply")
    assert not refused.allowed and refused.retry_after > 0
    assert refused.offences == 0  # peeking is not an offence


def test_refused_attempts_are_offences_not_entries(redis_server, redis_client, policy):
    policy("reply", 60, 2)
    for _ in range(2):
        throttling.check("kim", "reply")
    decisions = [throttling.check("kim", "reply") for _ in range(4)]
    assert [d.offences for d in decisions] == [1, 2, 3, 4]
    log_key, offence_key = throttling.engine.keys.log_keys("s:kim", "reply")[:2]
    assert redis_client.zcard(log_key) == 2
    # Refusals after the first were answered from memory; the background thread adds their offences.
    throttling.engine.refusal_memory.local_refusals.flush()
    assert int(redis_client.get(offence_key)) == 4
    assert 0 < redis_client.ttl(offence_key) <= 600  # THROTTLING_OFFENCE_WINDOW


def test_ttl_is_the_longest_window_and_memory_is_small(redis_server, redis_client, policy):
    policy("reply", 60, 5, windows=[(3600, 20)])
    for _ in range(5):
        d = throttling.check("lee", "reply")
    assert redis_client.ttl(d.log_key) == 3600
    assert redis_client.memory_usage(d.log_key) <= 400
    assert d.reset_after == pytest.approx(3600, abs=1)


def test_idle_identity_costs_no_memory(redis_server, redis_client, policy):
    policy("like", 1, 5)
    d = throttling.check("max", "like")
    assert redis_client.exists(d.log_key)
    time.sleep(1.1)
    assert not redis_client.exists(d.log_key)


def test_reset_forgets_one_action_or_all(redis_server, policy):
    policy("reply", 60, 1)
    policy("like", 60, 1)
    for action in ("reply", "like"):
        throttling.check("ned", action)
        assert not throttling.peek("ned", action).allowed
    throttling.reset("ned", "reply")
    assert throttling.peek("ned", "reply").allowed
    assert not throttling.peek("ned", "like").allowed
    throttling.reset("ned")
    assert throttling.peek("ned", "like").allowed


def test_refund_gives_entries_back(redis_server, policy):
    policy("post", 60, 3)
    d = throttling.check("olga", "post", cost=2)
    assert throttling.peek("olga", "post").remaining == 1
    assert throttling.refund(d) is True
    assert throttling.peek("olga", "post").remaining == 3
    # A refused decision recorded nothing, so there is nothing to refund.
    throttling.check("olga", "post", cost=3)
    assert throttling.refund(throttling.check("olga", "post")) is False


def test_is_action_allowed_records_like_check(redis_server, policy):
    policy("like", 60, 2)
    assert throttling.is_action_allowed("pat", "like")
    assert throttling.is_action_allowed("pat", "like")
    assert not throttling.is_action_allowed("pat", "like")


def test_disabled_policy_admits_without_redis(redis_server, redis_client, policy):
    policy("reply", 60, 1, enabled=False)
    assert all(throttling.check("quinn", "reply").allowed for _ in range(5))
    assert redis_client.keys("*{s:quinn}*") == []


def test_message_names_the_action_and_the_wait(redis_server, policy):
    policy("reply", 60, 1, verb="replied")
    throttling.check("ray", "reply")
    refused = throttling.check("ray", "reply")
    assert refused.message == "You have replied too often. Try again in 60 seconds."
    assert throttling.common.words.wait_in_words(0.2) == "1 second"
    assert throttling.common.words.wait_in_words(150) == "3 minutes"
    assert throttling.common.words.wait_in_words(3 * 3600) == "3 hours"
    assert throttling.common.words.wait_in_words(3 * 86400 + 1) == "4 days"


def test_a_key_prefix_change_applies_to_the_next_decision(redis_server, redis_client, policy, settings):
    """What a decision sends is remembered per member (decide._shapes); a changed setting is not
    answered from that memory."""
    from throttling.engine.keys import log_keys

    policy("reply", 60, 3)
    throttling.check("alice", "reply")
    before = log_keys("s:alice", "reply")[0]
    settings.THROTTLING_KEY_PREFIX = "elsewhere"
    throttling.check("alice", "reply")
    after = log_keys("s:alice", "reply")[0]
    assert after.startswith("elsewhere:") and after != before
    assert redis_client.zcard(before) == 1 and redis_client.zcard(after) == 1


def test_remembered_decision_shapes_are_bounded(redis_server, policy):
    from throttling.engine.deciding import plan as decide
    from throttling.engine.keys import log_keys
    from throttling.engine.policies.cache import policies

    policy("reply", 60, 3)
    spec = policies.get("reply")
    for n in range(decide._SHAPES_MAX + 10):
        planned = decide.plan(spec, f"s:visitor-{n}", None, 1, True)
        assert planned.keys[0] == log_keys(f"s:visitor-{n}", "reply")[0]
    assert 0 < len(decide._shapes) <= decide._SHAPES_MAX


def _tokens_in_child(queue):
    queue.put([throttling.engine.keys.tokens.next() for _ in range(3)])


def test_a_forked_child_draws_tokens_of_its_own():
    import multiprocessing

    tokens = throttling.engine.keys.tokens
    before = tokens.next()
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_tokens_in_child, args=(queue,))
    child.start()
    theirs = queue.get(timeout=10)
    child.join(10)
    ours = [tokens.next() for _ in range(3)]
    assert not set(theirs) & set(ours + [before])
    assert theirs[0][:-1] != before[:-1]  # another prefix, not only the next counts
