"""Exact under concurrency: processes racing on one identity admit exactly max_count."""

import time

import pytest

import throttling
import throttling.engine.keys
import throttling.engine.policies.cache
from bench.content_corpus import BASES
from tests.support.traffic import race, race_posts

pytestmark = [pytest.mark.django_independent, pytest.mark.django_db(transaction=True)]

PROCESSES = 8
ATTEMPTS = 20
LIMIT = 5


@pytest.mark.parametrize("trial", range(5))
def test_processes_racing_admit_exactly_the_limit(redis_server, redis_client, policy, trial):
    policy("reply", 60, LIMIT)
    throttling.peek("warm-up", "reply")  # policies are cached before the fork
    identity = f"racer-{trial}"
    assert race(identity, "reply", PROCESSES, ATTEMPTS) == LIMIT
    key, offences = throttling.engine.keys.log_keys(f"s:{identity}", "reply")[:2]
    assert redis_client.zcard(key) == LIMIT
    assert int(redis_client.get(offences)) == PROCESSES * ATTEMPTS - LIMIT


@pytest.mark.parametrize("trial", range(3))
def test_a_wave_racing_from_eight_processes_admits_exactly_members(redis_server, redis_client, policy, trial):
    policy("reply", 60, 100, same_content_max=1, same_content_members=3, same_content_period=600)
    throttling.peek("warm-up", "reply")  # policies are cached before the fork
    members = [f"spammer-{trial}-{i}" for i in range(PROCESSES)]
    assert race_posts(members, "reply", BASES["cash"]["text"], 5) == 3
    admitted = [m for m in members if redis_client.zcard(throttling.engine.keys.log_keys(f"s:{m}", "reply")[0])]
    assert len(admitted) == 3


def test_threads_stay_exact_while_policies_are_invalidated(redis_server, policy):
    """Cache clears from admin saves land between other threads' lookups; no decision may break."""
    import threading

    from django.db import connection

    policy("like", 60, 30)
    errors, admitted = [], []
    stop = threading.Event()

    def decide():
        try:
            admitted.append(sum(throttling.check("crowd", "like").allowed for _ in range(15)))
        except Exception as exc:  # any error here is the bug under test
            errors.append(exc)
        finally:
            # Policy reloads opened this thread's own database connection.
            connection.close()

    def invalidate():
        while not stop.is_set():
            throttling.engine.policies.cache.invalidate_policies(broadcast=False)
            time.sleep(0.0005)

    churn = threading.Thread(target=invalidate)
    churn.start()
    workers = [threading.Thread(target=decide) for _ in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    stop.set()
    churn.join(5)
    assert errors == []
    assert sum(admitted) == 30
