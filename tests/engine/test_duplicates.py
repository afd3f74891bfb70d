"""Repeated content decided in the same script call as the rate: per member, across members, all-or-nothing."""

import asyncio
import time

import pytest
from django.test.utils import override_settings

import throttling
from bench.content_corpus import BASES, REQUIRED_SAME
from tests.support.helpers import Monitor, deciding_connections
from throttling.engine.decision import ADMITTED, DUPLICATE, REPEATED, SHADOW, THROTTLED, WAVE
from throttling.engine.keys import log_keys, seen_keys, wave_keys

pytestmark = pytest.mark.django_db

SPAM = BASES["cash"]["text"]
VARIANT = BASES["cash"]["variants"][REQUIRED_SAME[0]]
OTHER = BASES["bike"]["text"]


def test_a_member_posting_the_same_text_again_is_refused_with_its_wait(redis_server, policy):
    policy("reply", 60, 10, same_content_max=1, same_content_period=600)
    first = throttling.check("alice", "reply", content=SPAM)
    again = throttling.check("alice", "reply", content=SPAM)
    assert first.allowed and first.reason == ADMITTED
    assert not again.allowed
    assert again.reason == DUPLICATE and again.duplicate == REPEATED
    assert again.message == "You have already posted this."
    # The wait is until the first post leaves the period.
    assert 599 < again.retry_after <= 600
    assert again.offences == 1
    # Other text, and another member, are not affected.
    assert throttling.check("alice", "reply", content=OTHER).allowed
    assert throttling.check("bob", "reply", content=SPAM).allowed


@pytest.mark.parametrize("kind", REQUIRED_SAME)
def test_near_duplicates_count_as_the_same(redis_server, policy, kind):
    policy("reply", 60, 10, same_content_max=1, same_content_period=600)
    for name, base in BASES.items():
        assert throttling.check(f"m-{name}", "reply", content=base["text"]).allowed
        refused = throttling.check(f"m-{name}", "reply", content=base["variants"][kind])
        assert refused.reason == DUPLICATE, name
        for other in base["different"]:
            assert throttling.check(f"m-{name}", "reply", content=other).allowed, name


def test_max_counts_repeats_within_the_period(redis_server, policy):
    policy("reply", 60, 10, same_content_max=2, same_content_period=1)
    started = time.monotonic()
    assert throttling.check("alice", "reply", content=SPAM).allowed
    time.sleep(0.3)
    assert throttling.check("alice", "reply", content=SPAM).allowed
    third = throttling.check("alice", "reply", content=SPAM)
    took = time.monotonic() - started
    assert third.reason == DUPLICATE
    # The oldest of the two leaves the period first: a second after it was posted, less the time
    # since (at least the sleep; on a loaded machine more, so it is read rather than assumed).
    assert 1.0 - took - 0.002 <= third.retry_after <= 0.7 + 0.002
    time.sleep(third.retry_after + 0.05)
    assert throttling.check("alice", "reply", content=SPAM).allowed


def test_a_wave_of_members_is_stopped_after_members(redis_server, policy):
    policy("reply", 60, 10, same_content_members=3, same_content_period=600)
    variants = [SPAM, *BASES["cash"]["variants"].values()]
    decisions = [throttling.check(f"spammer-{i}", "reply", content=variants[i % len(variants)]) for i in range(6)]
    assert [d.allowed for d in decisions] == [True, True, True, False, False, False]
    refused = decisions[3]
    assert refused.reason == DUPLICATE and refused.duplicate == WAVE
    assert refused.message == "This was just posted by several members; it looks like spam."
    assert 599 < refused.retry_after <= 600
    assert refused.offences == 1
    # A member already in the wave is not its next member: without a limit per member they may post it again.
    assert throttling.check("spammer-0", "reply", content=SPAM).allowed
    # Unrelated posts of the same members go through.
    assert throttling.check("spammer-4", "reply", content=OTHER).allowed


def test_short_posts_are_only_a_members_exact_repeat(redis_server, policy):
    policy("reply", 60, 10, same_content_max=1, same_content_members=2, same_content_period=600)
    # Everybody says thanks: never a wave.
    assert all(throttling.check(f"m{i}", "reply", content="Thanks!").allowed for i in range(6))
    # The same member saying it again is a repeat (punctuation and case aside) ...
    assert throttling.check("m0", "reply", content="thanks!!!").reason == DUPLICATE
    # ... but only an exact one.
    assert throttling.check("m0", "reply", content="Thanks a lot!").allowed


def test_short_posts_need_a_limit_per_member(redis_server, redis_client, policy):
    policy("reply", 60, 10, same_content_members=2, same_content_period=600)
    assert all(throttling.check("m0", "reply", content="+1").allowed for _ in range(3))
    assert redis_client.keys("*seen*") == [] and redis_client.keys("*wave*") == []


def test_all_or_nothing_a_post_refused_by_the_rate_writes_no_content(redis_server, redis_client, policy):
    policy("reply", 60, 1, same_content_max=1, same_content_members=2, same_content_period=600)
    assert throttling.check("alice", "reply", content=OTHER).allowed
    refused = throttling.check("alice", "reply", content=SPAM)
    assert refused.reason == THROTTLED
    throttling.reset("alice", "reply")
    # Its content was never recorded: posting it now is the first time.
    assert throttling.check("alice", "reply", content=SPAM).allowed
    assert throttling.check("bob", "reply", content=SPAM).allowed


def test_all_or_nothing_a_post_refused_for_its_content_takes_no_quota(redis_server, redis_client, policy):
    policy("reply", 60, 3, same_content_max=1, same_content_period=600)
    assert throttling.check("alice", "reply", content=SPAM).allowed
    for _ in range(3):
        assert throttling.check("alice", "reply", content=SPAM).reason == DUPLICATE
    assert redis_client.zcard(log_keys("s:alice", "reply")[0]) == 1
    assert throttling.check("alice", "reply", content=OTHER).remaining == 1


def test_a_wave_refusal_writes_nothing_to_the_wave(redis_server, redis_client, policy):
    policy("reply", 60, 10, same_content_members=1, same_content_period=600)
    assert throttling.check("first", "reply", content=SPAM).allowed
    before = {k: redis_client.hgetall(k) for k in wave_keys("reply")}
    assert throttling.check("second", "reply", content=SPAM).duplicate == WAVE
    assert {k: redis_client.hgetall(k) for k in wave_keys("reply")} == before
    assert not redis_client.exists(log_keys("s:second", "reply")[0])


def test_refund_forgets_the_content(redis_server, redis_client, policy):
    policy("reply", 60, 10, same_content_max=1, same_content_members=2, same_content_period=600)
    first = throttling.check("alice", "reply", content=SPAM)
    assert throttling.refund(first)
    assert first.content == ()
    # Nothing but the generation's header (fields "#" and "~") is left, for her or for the wave.
    assert all(
        set(redis_client.hkeys(key)) <= {b"#", b"~"} for key in (*seen_keys("s:alice", "reply"), *wave_keys("reply"))
    )
    assert throttling.check("bob", "reply", content=SPAM).allowed
    assert throttling.check("alice", "reply", content=SPAM).allowed
    assert throttling.check("carol", "reply", content=SPAM).duplicate == WAVE
    assert not throttling.refund(first)  # once


def test_refund_of_a_repeat_keeps_the_post_before(redis_server, policy):
    policy("reply", 60, 10, same_content_max=2, same_content_members=2, same_content_period=600)
    assert throttling.check("alice", "reply", content=SPAM).allowed
    second = throttling.check("alice", "reply", content=SPAM)
    assert throttling.refund(second)
    # Her first post still counts, towards her repeats and the wave.
    assert throttling.check("alice", "reply", content=SPAM).allowed
    assert throttling.check("alice", "reply", content=SPAM).duplicate == REPEATED
    assert throttling.check("bob", "reply", content=SPAM).allowed
    assert throttling.check("carol", "reply", content=SPAM).duplicate == WAVE


def test_peek_judges_the_content_and_records_nothing(redis_server, redis_client, policy):
    policy("reply", 60, 10, same_content_max=1, same_content_members=1, same_content_period=600)
    assert throttling.peek("alice", "reply", content=SPAM).allowed
    assert redis_client.keys("*seen*") == [] and redis_client.keys("*wave*") == []
    assert throttling.check("alice", "reply", content=SPAM).allowed
    mine = throttling.peek("alice", "reply", content=SPAM)
    theirs = throttling.peek("bob", "reply", content=SPAM)
    assert (mine.duplicate, theirs.duplicate) == (REPEATED, WAVE)
    assert mine.offences == 0 and theirs.offences == 0


def test_the_token_bucket_judges_content_too(redis_server, policy):
    policy(
        "reply", 60, 10, algorithm="token_bucket", same_content_max=1, same_content_members=2, same_content_period=60
    )
    first = throttling.check("alice", "reply", content=SPAM)
    assert first.allowed and first.remaining == 9
    refused = throttling.check("alice", "reply", content=SPAM)
    assert refused.duplicate == REPEATED
    # The refused post took no token.
    assert throttling.check("alice", "reply", content=OTHER).remaining == 8
    assert throttling.check("bob", "reply", content=SPAM).allowed
    assert throttling.check("carol", "reply", content=SPAM).duplicate == WAVE
    assert throttling.refund(first)
    assert throttling.check("dave", "reply", content=SPAM).allowed


def test_a_shadow_policy_refuses_nothing_but_says_what_it_would_have(redis_server, policy):
    policy("reply", 60, 10, mode="shadow", same_content_max=1, same_content_period=600)
    assert throttling.check("alice", "reply", content=SPAM).allowed
    again = throttling.check("alice", "reply", content=SPAM)
    assert again.allowed and again.reason == SHADOW and again.duplicate == REPEATED
    assert again.retry_after == 0


def test_offences_of_repeated_content_escalate(redis_server, policy, django_user_model):
    member = django_user_model.objects.create_user("spammer", password="pw")
    policy("reply", 60, 100, same_content_max=1, same_content_period=600, offence_threshold=3)
    assert throttling.check(member, "reply", content=SPAM).allowed
    refusals = [throttling.check(member, "reply", content=SPAM) for _ in range(3)]
    assert [d.offences for d in refusals] == [1, 2, 3]
    assert [d.escalated for d in refusals] == [False, False, True]


@override_settings(THROTTLING_POLICY_REFRESH=3600)
def test_one_evalsha_per_decision_with_content(redis_server, policy):
    policy("reply", 60, 100, same_content_max=1, same_content_members=3, same_content_period=600)
    throttling.check("warm-up", "reply", content=OTHER)
    texts = [SPAM, *BASES["cash"]["variants"].values(), OTHER]
    with Monitor(redis_server.url) as monitor:
        decisions = [throttling.check(f"m{i % 4}", "reply", content=t) for i, t in enumerate(texts * 2)]
    assert {d.reason for d in decisions} == {ADMITTED, DUPLICATE}
    assert {d.duplicate for d in decisions} == {"", REPEATED, WAVE}
    assert monitor.sent_by(deciding_connections()) == ["EVALSHA"] * len(decisions)


def test_repeated_content_is_not_answered_from_memory(redis_server, policy):
    """A refusal for repeated content depends on the text: the next, different post is decided by Redis."""
    policy("reply", 60, 10, same_content_max=1, same_content_period=600)
    assert throttling.check("alice", "reply", content=SPAM).allowed
    assert throttling.check("alice", "reply", content=SPAM).reason == DUPLICATE
    assert throttling.check("alice", "reply", content=OTHER).allowed


def test_content_is_ignored_without_limits_on_it(redis_server, redis_client, policy):
    policy("reply", 60, 2)
    assert throttling.check("alice", "reply", content=SPAM).allowed
    assert throttling.check("alice", "reply", content=SPAM).allowed
    assert redis_client.keys("*seen*") == [] and redis_client.keys("*wave*") == []


def test_content_must_be_text(redis_server, policy):
    policy("reply", 60, 2, same_content_max=1, same_content_period=60)
    with pytest.raises(TypeError, match="content must be the text"):
        throttling.check("alice", "reply", content=b"bytes")


def test_reset_forgets_a_members_posts(redis_server, policy):
    policy("reply", 60, 10, same_content_max=1, same_content_period=600)
    assert throttling.check("alice", "reply", content=SPAM).allowed
    throttling.reset("alice", "reply")
    assert throttling.check("alice", "reply", content=SPAM).allowed


def test_reset_forgets_a_members_posts_kept_among_a_waves(redis_server, policy):
    """On one server a member's own posts are entries of the wave's index, among other members':
    a reset forgets them as the member's repeats, and leaves the wave counting who posted it."""
    policy("reply", 60, 10, same_content_max=1, same_content_members=2, same_content_period=600)
    assert throttling.check("alice", "reply", content=SPAM).allowed
    assert throttling.check("bob", "reply", content=VARIANT).allowed
    assert throttling.check("alice", "reply", content=SPAM).duplicate == REPEATED
    throttling.reset("alice", "reply")
    # Alice may post it again, once: her repeats are counted afresh from the reset ...
    assert throttling.check("alice", "reply", content=SPAM).allowed
    assert throttling.check("alice", "reply", content=VARIANT).duplicate == REPEATED
    # ... and only hers: Bob's repeat is still his, and the wave still counts both of them.
    assert throttling.check("bob", "reply", content=SPAM).duplicate == REPEATED
    assert throttling.check("carol", "reply", content=SPAM).duplicate == WAVE


def test_areset_forgets_a_members_posts_kept_among_a_waves(redis_server, policy):
    policy("reply", 60, 10, same_content_max=1, same_content_members=3, same_content_period=600)
    throttling.peek("warm-up", "reply")  # policies read here, where the test's rows are

    async def run():
        first = await throttling.acheck("alice", "reply", content=SPAM)
        again = await throttling.acheck("alice", "reply", content=SPAM)
        await throttling.areset("alice", "reply")
        return first, again, await throttling.acheck("alice", "reply", content=SPAM)

    first, again, after = asyncio.run(run())
    assert first.allowed and again.duplicate == REPEATED
    assert after.allowed


def test_nothing_of_the_text_is_stored(redis_server, redis_client, policy):
    policy("reply", 60, 10, same_content_max=1, same_content_members=3, same_content_period=600)
    assert throttling.check("alice", "reply", content=SPAM).allowed
    assert throttling.check("alice", "reply", content="Thanks everyone!").allowed
    stored = b"".join(
        k + v
        for key in (*seen_keys("s:alice", "reply"), *wave_keys("reply"))
        for k, v in redis_client.hgetall(key).items()
    )
    assert len(stored) > 100
    for word in (b"amazing", b"quick-cash", b"thanks", b"everyone", b"dollars"):
        assert word not in stored.lower()


def test_memory_is_bounded_by_the_period(redis_server, redis_client, policy):
    policy("reply", 60, 10, same_content_max=1, same_content_members=3, same_content_period=600)
    assert throttling.check("alice", "reply", content=SPAM).allowed
    assert throttling.check("alice", "reply", content="Thanks everyone!").allowed
    # A generation (two periods) has its hash, which lives a period after the generation's end: one to
    # three periods (the wave's index holds long posts, the member's own index short ones).
    for keys in (seen_keys("s:alice", "reply"), wave_keys("reply")):
        ttls = [redis_client.pttl(key) for key in keys if redis_client.exists(key)]
        assert len(ttls) == 1 and 600_000 < ttls[0] <= 1_800_000


def _hmgets(redis_client, decide):
    """(what `decide()` returned, the HMGET commands Redis ran for it, scripts included)."""
    redis_client.config_resetstat()
    result = decide()
    return result, int(redis_client.info("commandstats").get("cmdstat_hmget", {}).get("calls", 0))


def _until(redis_client, moment):
    """Sleeps until Redis time (seconds) reaches `moment`."""
    seconds, micros = redis_client.time()
    time.sleep(max(0.0, moment - (seconds + micros / 1e6)))


def test_a_post_of_the_last_generation_counts_and_is_read_only_while_it_can(redis_server, redis_client, policy):
    """A generation is two periods; once it has a post, the other generation's hash is read only in the
    first period of a generation, the only time it can hold a post of the period."""
    policy("reply", 60, 10, same_content_max=1, same_content_period=1)
    _, plain = _hmgets(redis_client, lambda: throttling.peek("warm-up", "reply"))  # its penalties' read
    seconds, micros = redis_client.time()
    boundary = (int(seconds + micros / 1e6) // 2 + 1) * 2  # the next generation starts here
    if boundary - (seconds + micros / 1e6) < 0.5:
        boundary += 2
    _until(redis_client, boundary - 0.4)
    assert throttling.check("alice", "reply", content=SPAM).allowed
    _until(redis_client, boundary + 0.1)
    again, reads = _hmgets(redis_client, lambda: throttling.check("alice", "reply", content=SPAM))
    assert again.duplicate == REPEATED and reads - plain == 2  # found in the last generation's hash
    _until(redis_client, boundary + 1.1)
    # Nothing was written in this generation yet (a refusal writes nothing), so its hash has no
    # header to say the other one is done with: that one is read once more.
    later, reads = _hmgets(redis_client, lambda: throttling.check("alice", "reply", content=SPAM))
    assert later.allowed and reads - plain == 2
    # The post wrote the generation's header in her index: past its first period, one hash is read.
    other, reads = _hmgets(redis_client, lambda: throttling.check("alice", "reply", content=OTHER))
    assert other.allowed and reads - plain == 1


def test_async_decisions_judge_content_the_same_way(redis_server, policy):
    policy("reply", 60, 10, same_content_max=1, same_content_members=2, same_content_period=600)
    throttling.peek("warm-up", "reply")  # policies read here, where the test's rows are

    async def run():
        first = await throttling.acheck("alice", "reply", content=SPAM)
        peeked = await throttling.apeek("alice", "reply", content=SPAM)
        again = await throttling.acheck("alice", "reply", content=SPAM)
        bob = await throttling.acheck("bob", "reply", content=SPAM)
        carol = await throttling.acheck("carol", "reply", content=SPAM)
        refunded = await throttling.arefund(bob)
        dave = await throttling.acheck("dave", "reply", content=SPAM)
        return first, peeked, again, bob, carol, refunded, dave

    first, peeked, again, bob, carol, refunded, dave = asyncio.run(run())
    assert first.allowed and bob.allowed and refunded and dave.allowed
    assert (peeked.duplicate, again.duplicate, carol.duplicate) == (REPEATED, REPEATED, WAVE)
    assert again.offences == 1 and peeked.offences == 0


def test_acquire_waits_for_the_period_to_end(redis_server, policy):
    policy("reply", 60, 10, same_content_max=1, same_content_period=1)
    assert throttling.check("alice", "reply", content=SPAM).allowed
    started = time.monotonic()
    decision = throttling.acquire("alice", "reply", timeout=3, content=SPAM)
    assert decision.allowed
    assert time.monotonic() - started >= 0.5


def test_the_member_reads_the_refusal_in_their_language(redis_server, policy):
    from django.utils import translation

    policy("reply", 60, 10, same_content_max=1, same_content_members=1, same_content_period=600)
    assert throttling.check("alice", "reply", content=SPAM).allowed
    mine, wave = throttling.check("alice", "reply", content=SPAM), throttling.check("bob", "reply", content=SPAM)
    with translation.override("zh-hans"):
        assert mine.message == "您已经发布过这条内容。"
        assert wave.message == "多名成员刚刚发布过这条内容，它看起来像垃圾信息。"


def _redis_seconds(client):
    return client.time()[0]


def _period_placing(now, parity, *, past_first, base):
    """A period (s) from `base` up whose generation (two periods) at Redis time `now` has `parity`
    and stays, for the next 20 s, past its first period (`past_first`) or in it."""
    for period in range(base, base * 100):
        gen, into = divmod(now, 2 * period)
        inside = period + 1 <= into < 2 * period - 20 if past_first else 1 <= into < period - 20
        if gen % 2 == parity and inside:
            return period
    raise AssertionError("no period places the generation")  # pragma: no cover


@pytest.mark.parametrize("parity", ["same", "other"])
def test_editing_the_period_forgets_nothing_still_in_it(redis_server, redis_client, policy, parity):
    """The generations are numbered by the period: an edit renumbers them, and a post is read by its
    time whichever hash holds it, placed (by choosing the periods against Redis time) where a
    decision past its generation's first period would not read the other hash."""
    from throttling.engine.policies.cache import invalidate_policies
    from throttling.models import ActionPolicy

    def edit(seconds):
        ActionPolicy.objects.filter(action="reply").update(same_content_period=seconds)
        invalidate_policies()

    now = _redis_seconds(redis_client)
    first = _period_placing(now, 0, past_first=True, base=600)
    policy("reply", 60, 10, same_content_max=1, same_content_members=2, same_content_period=first)
    assert throttling.check("alice", "reply", content=SPAM).allowed
    assert throttling.check("bob", "reply", content=SPAM).allowed
    shorter = _period_placing(now, 0 if parity == "same" else 1, past_first=True, base=60)
    edit(shorter)
    assert throttling.check("alice", "reply", content=SPAM).duplicate == REPEATED
    assert throttling.check("carol", "reply", content=SPAM).duplicate == WAVE
    # Another post writes the first entries of the new numbering: the posts before it are still read.
    assert throttling.check("dave", "reply", content=OTHER).allowed
    assert throttling.check("alice", "reply", content=SPAM).duplicate == REPEATED
    assert throttling.check("carol", "reply", content=SPAM).duplicate == WAVE
    # A longer period keeps what it must: every hash that holds Alice's post lives as long as the period.
    edit(86400)
    assert throttling.check("erin", "reply", content=OTHER).allowed
    assert throttling.check("alice", "reply", content=SPAM).duplicate == REPEATED
    assert 86300 < throttling.check("carol", "reply", content=SPAM).retry_after <= 86400
    holding = [key for key in wave_keys("reply") if any(b"alice@" in v for v in redis_client.hvals(key))]
    assert holding
    assert all(redis_client.pttl(key) > 86300 * 1000 for key in holding)


def test_past_a_generations_first_period_the_other_hash_is_not_read(redis_server, redis_client, policy):
    """With the period unchanged, a decision reads the other generation's hash in the first period of
    its generation only: one HMGET fewer past it (commandstats count the script's own commands)."""
    now = _redis_seconds(redis_client)
    past = _period_placing(now, 1, past_first=True, base=60)
    inside = _period_placing(now, 1, past_first=False, base=60)
    policy("reply", 60, 10, same_content_max=1, same_content_members=2, same_content_period=past)
    policy("post", 60, 10, same_content_max=1, same_content_members=2, same_content_period=inside)

    def reads(action):
        assert throttling.check("alice", action, content=SPAM).allowed
        decision, count = _hmgets(redis_client, lambda: throttling.check("bob", action, content=OTHER))
        assert decision.allowed
        return count

    assert reads("reply") == reads("post") - 1
