"""The reference against the engine's Redis scripts themselves, on a short sequence in real time.

The scripts read Redis TIME, so each decision's time is recovered from Redis: an admission's exactly
(the log entry's score, or the time a bucket's state was written with), a refusal's as the interval
between a TIME read just before the call and one just after. A refusal changes nothing, and with no
admission in between the counts only fall as time passes, so the reference refusing at the end of the
interval means it refuses at the script's own time; when it admits at the end but refuses at the
start, the window's edge fell inside the interval and that decision says nothing either way.
"""

import copy
import random
import time

import pytest
import redis

import throttling
from tests.replay.reference import KINDS

pytestmark = [pytest.mark.django_db, pytest.mark.slow, pytest.mark.django_independent]

WINDOWS = [(1, 2), (3, 4)]  # 2 a second and 4 in any 3 seconds: both windows bind in a few seconds


def redis_now(client):
    seconds, micros = client.time()
    return seconds * 1_000_000 + micros


def admitted_at(client, decision, algorithm):
    """The Redis time the script decided an admission at, read back from the state it wrote."""
    if algorithm == "sliding_log":
        return int(client.zscore(decision.log_key, decision.entries[0]))
    return int(client.get(decision.log_key).split(b",")[0])


@pytest.mark.parametrize("algorithm", ["sliding_log", "token_bucket"])
def test_the_reference_decides_as_the_redis_scripts(
    redis_server, policy, settings, member, django_user_model, algorithm
):
    # Every decision must reach the script: no refusal answered from memory, no penalty refusing first.
    settings.THROTTLING_LOCAL_REFUSALS = False
    settings.THROTTLING_PENALTIES = False
    (main_period, main_max), *extra = WINDOWS
    policy("probe", main_period, main_max, windows=extra, algorithm=algorithm)
    bob = django_user_model.objects.create_user("bob")
    client = redis.Redis.from_url(redis_server.url)
    rng = random.Random(26)
    states, seen, unsettled = {}, {"admitted": 0, "refused": 0}, 0

    # At least 6 s, and on until both answers were seen often enough (a loaded machine decides less
    # often in the same time), within 60 s.
    started = time.monotonic()
    while time.monotonic() - started < 6 or (min(seen.values()) <= 15 and time.monotonic() - started < 60):
        who = rng.choice((member, bob))
        target = rng.choice((None, "thread-1", "thread-2"))
        key = (who.pk, target)
        state = states.setdefault(key, KINDS[algorithm](WINDOWS))
        before = redis_now(client)
        decision = throttling.check(who, "probe", target=target)
        after = redis_now(client)
        assert decision.reason in ("admitted", "throttled"), decision
        if decision.allowed:
            at = admitted_at(client, decision, algorithm)
            assert before <= at <= after
            assert state.decide(at), (key, at, "the script admitted, the reference refuses")
            seen["admitted"] += 1
        else:
            if copy.deepcopy(state).decide(after):
                assert copy.deepcopy(state).decide(before) is False, (key, "the script refused, the reference admits")
                unsettled += 1
            seen["refused"] += 1
        time.sleep(rng.choice((0, 0, 0.01, 0.05, 0.15, 0.4)))

    assert seen["admitted"] > 15 and seen["refused"] > 15, seen
    assert unsettled <= 2, unsettled
