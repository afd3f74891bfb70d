"""throttling.suggest(): the smallest maximum per window that refuses at most a share of the members,
read from their peaks in one pass; penalised members counted apart, exempt members left out."""

import math
from datetime import UTC, datetime, timedelta

import pytest

import throttling
from tests.support.history import HISTORY, US, micro, posts_by, random_history, write_history
from tests.support.report import penalty

pytestmark = pytest.mark.django_db

START = datetime(2026, 1, 5, 9, tzinfo=UTC)


@pytest.fixture
def month(settings, django_user_model):
    settings.THROTTLING_HISTORY = HISTORY
    users = [django_user_model.objects.create_user(f"u{i}") for i in range(60)]
    rows = random_history(5, users, posts_by(users[0], 4), days=6, mix=(0.5, 0.3, 0.1, 0.1))
    write_history(rows)
    return users, rows


def refused_members(action, period, n, algorithm, penalised=()):
    result = throttling.replay(action, [(period, n)], algorithm=algorithm)
    return sum(1 for member in result.by_member if member not in penalised)


@pytest.mark.parametrize("algorithm", ["sliding_log", "token_bucket"])
@pytest.mark.parametrize("action", ["answer", "thread-answer"])
@pytest.mark.parametrize("share", [0.0, 0.05, 0.2])
def test_each_suggested_maximum_is_the_smallest_that_refuses_at_most_the_share(month, policy, action, algorithm, share):
    policy(action, 60, 3, windows=[(3600, 30)], algorithm=algorithm)
    suggestion = throttling.suggest(action, members=share)
    assert [p for p, _ in suggestion] == [60, 3600, 86400]  # the policy's, then a day
    allowed = math.floor(share * suggestion.members)
    assert suggestion.members == 60 and suggestion.penalised == 0
    for period, n in suggestion:
        assert refused_members(action, period, n, algorithm) == suggestion.refused[period] <= allowed
        if n > 1:
            # One fewer would refuse more than the share.
            assert refused_members(action, period, n - 1, algorithm) > allowed, (period, n)


def test_a_bucket_suggests_no_more_than_a_log(month, policy):
    policy("answer", 60, 3)
    log = throttling.suggest("answer", algorithm="sliding_log")
    bucket = throttling.suggest("answer", algorithm="token_bucket")
    assert all(b <= lg for (_, b), (_, lg) in zip(bucket, log))
    assert bucket != log  # a bucket absorbs part of a burst with its refill


def test_penalised_spammers_are_counted_apart_and_do_not_set_the_limit(settings, django_user_model, policy):
    settings.THROTTLING_HISTORY = HISTORY
    calm = [django_user_model.objects.create_user(f"calm{i}") for i in range(30)]
    spammer = django_user_model.objects.create_user("spammer")
    posts = posts_by(calm[0], 1)
    rows = [(u, posts[0], micro(START) + i * 3600 * US + k * 20 * US) for i, u in enumerate(calm) for k in range(2)]
    for day in (0, 2):  # a burst on the first day, and another two days later
        rows += [(spammer, posts[0], micro(START + timedelta(days=day)) + k * US) for k in range(30)]
    write_history(rows)
    policy("answer", 60, 5)
    before = throttling.suggest("answer", members=0.01)
    assert before[0] == (60, 30) and before.penalised == 0 and before.members == 31
    penalty(spammer, START + timedelta(minutes=1), timedelta(hours=1), action="answer", automatic=True)
    after = throttling.suggest("answer", members=0.01)
    assert after[0] == (60, 2) and after.penalised == 1 and after.members == 30
    assert after.penalised_peaks[60] == [30]
    # A period the penalty does not reach counts the spammer again (six calm members act in it too).
    later = throttling.suggest("answer", members=0.01, since=START + timedelta(days=1))
    assert later[0] == (60, 30) and later.penalised == 0 and later.members == 7


def test_moderators_are_left_out_of_suggestions(settings, django_user_model, policy):
    settings.THROTTLING_HISTORY = HISTORY
    member = django_user_model.objects.create_user("member")
    staff = django_user_model.objects.create_user("staff", is_staff=True)
    posts = posts_by(member, 1)
    write_history([(member, posts[0], micro(START)), *((staff, posts[0], micro(START) + k) for k in range(40))])
    policy("answer", 60, 5)
    suggestion = throttling.suggest("answer", members=0)
    assert suggestion[0] == (60, 1) and suggestion.exempt == 1 and suggestion.members == 1


def test_periods_and_a_policy_with_three_windows(month, policy):
    policy("answer", 10, 1, windows=[(600, 5), (7 * 86400, 100)])
    assert [p for p, _ in throttling.suggest("answer")] == [10, 600, 7 * 86400]
    assert [p for p, _ in throttling.suggest("answer", periods=[300])] == [300, 60, 3600, 86400]


def test_nonsense_shares_and_site_wide_policies_are_refused_in_words(month, policy):
    policy("answer", 60, 3)
    for share in (1, -0.1, "lots", float("nan")):
        with pytest.raises(ValueError, match="share of members") as caught:
            throttling.suggest("answer", members=share)
        # 1 is refused: the words never say it is allowed.
        assert "from 0 to less than 1" in str(caught.value) and "up to 1" not in str(caught.value)
    policy("thread-answer", 60, 3, scope="site")
    with pytest.raises(ValueError, match="only for per-member policies"):
        throttling.suggest("thread-answer")


def test_a_suggestion_reads_the_history_once_whatever_the_candidates(month, policy, django_assert_max_num_queries):
    policy("answer", 60, 3, algorithm="token_bucket")
    # Policies, overrides, staff, penalties, then the rows in chunks: one pass, never a query per candidate.
    with django_assert_max_num_queries(12):
        suggestion = throttling.suggest("answer")
    assert len(suggestion) == 3
