"""The replay against a deliberately simple reference, decision by decision, on random histories.

Calm members, bursty regulars and spammers (runs a few seconds apart, some in the same second) over
two days, per member and per thread, under one window or several, for both algorithms. The reference
(tests/replay/reference.py) is itself checked against the Redis scripts in test_reference_redis.py.
"""

import pytest

import throttling
from tests.replay.reference import reference_decisions
from tests.support.history import HISTORY, micro, posts_by, random_history, write_history

pytestmark = pytest.mark.django_db

WINDOW_SETS = [
    [(60, 3)],
    [(1, 1)],
    # A refill of a third of a second and more: levels a float cannot hold exactly, which the
    # bucket's tolerance must absorb exactly as the script's does.
    [(3, 2)],
    [(7, 3), (60, 10)],
    [(10, 1), (3600, 20)],
    [(3600, 4), (600, 2)],
    [(5, 2), (60, 6), (86400, 40)],
]


@pytest.fixture
def history(settings, django_user_model):
    settings.THROTTLING_HISTORY = HISTORY

    def make(seed, members=40, whole_seconds=False):
        users = django_user_model.objects.bulk_create(django_user_model(username=f"m{i}") for i in range(members))
        users = list(django_user_model.objects.filter(username__startswith="m").order_by("pk"))
        posts = posts_by(users[0], 5)
        rows = random_history(seed, users, posts, whole_seconds=whole_seconds)
        write_history(rows)
        return [(u.pk, p.pk, t) for u, p, t in rows]

    return make


def replayed(action, windows, algorithm):
    decisions = []

    def each(member, target, when, admitted):
        decisions.append((member, target, micro(when), admitted))

    result = throttling.replay(action, windows, algorithm=algorithm, each=each)
    return result, decisions


@pytest.mark.parametrize("algorithm", ["sliding_log", "token_bucket"])
@pytest.mark.parametrize("seed, whole_seconds", [(1, False), (2, False), (3, True), (4, True)])
def test_replay_decides_every_action_as_the_reference(history, algorithm, seed, whole_seconds):
    rows = history(seed, whole_seconds=whole_seconds)
    for windows in WINDOW_SETS:
        for action, targeted in (("answer", False), ("thread-answer", True)):
            result, decisions = replayed(action, windows, algorithm)
            keyed = [(m, p if targeted else None, t) for m, p, t in rows]
            expected = reference_decisions(keyed, windows, algorithm)
            assert len(decisions) == len(rows) == result.actions
            assert sorted(decisions) == sorted(expected), (action, windows)
            refused = sum(1 for *_, admitted in expected if not admitted)
            assert result.refused == refused
            # Every run both admits and refuses: the comparison says something.
            assert 0 < refused < len(rows), (action, windows, refused)
            by_member = {}
            for member, *_, admitted in expected:
                if not admitted:
                    by_member[member] = by_member.get(member, 0) + 1
            assert result.by_member == by_member
            assert result.members_refused == len(by_member)
            assert result.members == len({m for m, _, _ in rows})


@pytest.mark.parametrize("algorithm", ["sliding_log", "token_bucket"])
def test_per_target_counts_differ_from_per_member_counts(history, algorithm):
    # The same rows, one count per member or one per thread: a history that names a target is
    # counted per target, so fewer actions are refused.
    history(7)
    per_member = throttling.replay("answer", [(60, 3)], algorithm=algorithm)
    per_thread = throttling.replay("thread-answer", [(60, 3)], algorithm=algorithm)
    assert per_member.actions == per_thread.actions
    assert per_thread.refused < per_member.refused
