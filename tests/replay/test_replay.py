"""throttling.replay(): drafts in pairs and in words, since/until, the policy as it stands, tiers,
overrides and moderators as the engine judges them, site-wide counts, penalised members."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group

import throttling
from demo_site.models import Reply
from tests.replay.reference import reference_decisions
from tests.support.history import HISTORY, US, micro, posts_by, random_history, write_history
from tests.support.report import penalty
from throttling.engine.policies import trust
from throttling.engine.policies.cache import load_overrides, load_policies
from throttling.models import ActionPolicy, ActionWindow, MemberOverride, PolicyTier
from throttling.replayer.members import EXEMPT, Standing
from throttling.replayer.sources import HistoryNotConfigured

pytestmark = pytest.mark.django_db

START = datetime(2026, 1, 5, 9, tzinfo=UTC)


@pytest.fixture
def community(settings, django_user_model):
    """Six members and a moderator, two threads, and a burst each: member i posts i + 1 replies a
    second apart at 9:00 (the moderator 10), half in each thread."""
    settings.THROTTLING_HISTORY = HISTORY
    users = [django_user_model.objects.create_user(f"member{i}") for i in range(6)]
    moderator = django_user_model.objects.create_user("moderator", is_staff=True)
    posts = posts_by(users[0], 2)
    rows = []
    for i, user in enumerate([*users, moderator]):
        for j in range(i + 1 if user is not moderator else 10):
            rows.append((user, posts[j % 2], micro(START) + (j * US)))
    write_history(rows)
    return users, moderator, posts, rows


def keyed(rows, targeted=False):
    return [(u.pk, p.pk if targeted else None, t) for u, p, t in rows]


def test_rates_in_words_are_the_same_windows_as_pairs(community):
    in_words = throttling.replay("answer", ["3/min", "20/hour"])
    in_pairs = throttling.replay("answer", [(60, 3), (3600, 20)])
    assert in_words.windows == in_pairs.windows == ((60, 3), (3600, 20))
    assert (in_words.refused, in_words.by_member) == (in_pairs.refused, in_pairs.by_member)
    assert throttling.replay("answer", "3/min").windows == ((60, 3),)
    assert throttling.replay("answer", (60, 3)).windows == ((60, 3),)


@pytest.mark.parametrize(
    "windows, algorithm, words",
    [
        (["3/mni"], None, "is not a unit"),
        (["3/min", "5/minute"], None, "Two windows have a period of 1 minute;"),
        ([(60, 2000)], "sliding_log", "between 1 and 1,000"),
        ([(0, 3)], None, "between 1 second and 366 days"),
        ([(60, 3)], "leaky", "is not an algorithm"),
        ([], None, "at least one window"),
        ([(60, "3")], None, "is not a window"),
    ],
)
def test_a_draft_a_policy_could_not_hold_is_refused_in_words(community, windows, algorithm, words):
    with pytest.raises(ValueError, match=words):
        throttling.replay("answer", windows, algorithm=algorithm)


def test_a_bucket_takes_more_than_a_log_may(community):
    assert throttling.replay("answer", [(60, 2000)], algorithm="token_bucket").refused == 0


def test_an_action_without_history_or_without_policy_says_so(community):
    with pytest.raises(HistoryNotConfigured, match="No history is configured for the action “flag”"):
        throttling.replay("flag", ["3/min"])
    with pytest.raises(ValueError, match="has no policy: give the windows"):
        throttling.replay("answer")


def test_since_and_until_replay_only_that_stretch_with_counts_starting_empty(community, settings):
    users, *_ = community
    since, until = START + timedelta(seconds=2), START + timedelta(seconds=5)
    part = throttling.replay("answer", ["2/min"], since=since, until=until)
    # The same as a history holding only those rows.
    Reply.objects.exclude(created__gte=since, created__lt=until).delete()
    whole = throttling.replay("answer", ["2/min"])
    assert (part.actions, part.refused, part.by_member) == (whole.actions, whole.refused, whole.by_member)
    assert part.actions == 1 + 2 + 3 + 3 + 3  # in seconds 2, 3 and 4: members 2 to 5 and the moderator
    assert (part.since, part.until) == (since, until)


def test_dates_are_whole_days_in_the_sites_time_zone(community):
    day = START.date()
    assert throttling.replay("answer", ["2/min"], since=day, until=day).actions == len(community[3])
    assert throttling.replay("answer", ["2/min"], until=day - timedelta(days=1)).actions == 0


def test_the_policy_as_it_stands_is_replayed_without_a_draft(community, policy):
    policy("answer", 3600, 4, windows=[(60, 2)], algorithm="token_bucket")
    stands = throttling.replay("answer")
    assert (stands.windows, stands.algorithm) == (((3600, 4), (60, 2)), "token_bucket")
    same = throttling.replay("answer", [(3600, 4), (60, 2)], algorithm="token_bucket")
    assert (stands.refused, stands.by_member) == (same.refused, same.by_member)
    # A draft of windows keeps the policy's algorithm; a draft of the algorithm keeps its windows.
    assert throttling.replay("answer", ["1/min"]).algorithm == "token_bucket"
    assert throttling.replay("answer", algorithm="sliding_log").windows == ((3600, 4), (60, 2))


def test_a_window_above_the_cap_is_replayed_at_the_cap_as_the_engine_decides_it(community, policy):
    p = policy("answer", 60, 3)
    ActionWindow.objects.create(policy=p, period=3600, max_count=5)
    ActionWindow.objects.filter(policy=p).update(max_count=5000)  # around the form and save()
    assert throttling.replay("answer").windows == ((60, 3), (3600, 1000))


def test_moderators_are_left_out_when_the_policy_exempts_staff(community, policy):
    users, moderator, _, rows = community
    policy("answer", 60, 2)
    result = throttling.replay("answer")
    assert moderator.pk not in result.by_member
    assert result.exempt_members == 1
    assert result.by_member == {u.pk: i + 1 - 2 for i, u in enumerate(users) if i + 1 > 2}
    ActionPolicy.objects.filter(action="answer").update(exempt_staff=False)
    assert throttling.replay("answer").by_member[moderator.pk] == 8


def test_tiers_and_overrides_scale_each_members_windows_as_they_stand(community, policy):
    users, moderator, _, rows = community
    p = policy("answer", 60, 2, windows=[(3600, 4)])
    trusted = Group.objects.create(name="trusted")
    users[5].groups.add(trusted)
    users[4].groups.add(trusted)
    PolicyTier.objects.create(policy=p, position=0, group=trusted, multiplier=Decimal("2"))
    PolicyTier.objects.create(policy=p, position=1, new_member_days=7, multiplier=Decimal("0.5"))
    MemberOverride.objects.create(user=users[3], action="answer", exempt=True, reason="Runs the FAQ.")
    MemberOverride.objects.create(user=users[4], multiplier=Decimal("3"), reason="Bulk answers.")
    MemberOverride.objects.create(
        user=users[2], multiplier=Decimal("10"), reason="Expired.", expires_at=START - timedelta(days=1)
    )
    decisions = []
    result = throttling.replay("answer", each=lambda *row: decisions.append(row))
    # Every member joined today: the newcomers' tier halves the windows of all but the trusted
    # member (×2 first) and the member with an override (×3, which beats every tier).
    scaled = {
        users[5].pk: ((60, 4), (3600, 8)),
        users[4].pk: ((60, 6), (3600, 12)),
        **{u.pk: ((60, 1), (3600, 2)) for u in (users[0], users[1], users[2])},
    }
    counted = [r for r in keyed(rows) if r[0] in scaled]
    expected = reference_decisions(counted, None, "sliding_log", multipliers=scaled)
    replayed = [(m, micro(when), a) for m, _, when, a in decisions if m in scaled]
    assert sorted(replayed) == sorted((m, t, a) for m, _, t, a in expected)
    assert any(not a for *_, a in replayed) and any(a for *_, a in replayed)
    assert users[3].pk not in result.by_member and moderator.pk not in result.by_member
    assert result.exempt_members == 2


def test_standing_judges_every_member_as_the_engine_does(community, policy):
    users, moderator, *_ = community
    p = policy("answer", 60, 2)
    group = Group.objects.create(name="regulars")
    users[1].groups.add(group)
    PolicyTier.objects.create(policy=p, position=0, group=group, new_member_days=30, multiplier=Decimal("1.5"))
    PolicyTier.objects.create(policy=p, position=1, group=group, multiplier=Decimal("4"))
    MemberOverride.objects.create(user=users[2], exempt=True, reason="Staff account.")
    MemberOverride.objects.create(user=users[3], multiplier=Decimal("2"), reason="All actions.")
    MemberOverride.objects.create(user=users[3], action="answer", multiplier=Decimal("0.5"), reason="This one.")
    users[0].date_joined = START - timedelta(days=400)
    users[0].save()
    spec = load_policies()["answer"]
    standing = Standing(spec)
    overrides = load_overrides()
    trust.groups.clear()  # the engine's memory of members' groups, from another test's rows
    for user in [*users, moderator]:
        engine = trust.EXEMPT if user.is_staff else trust.standing(spec, user, overrides)
        assert standing.of(user.pk) == engine, user
    assert standing.of(users[2].pk) is EXEMPT and standing.of(users[3].pk) == 0.5


def test_a_site_wide_policy_counts_everyone_together_per_target(community, policy):
    users, moderator, _, rows = community
    policy("thread-answer", 60, 5, scope="site")
    decisions = []
    result = throttling.replay("thread-answer", each=lambda *row: decisions.append(row))
    counted = [("site", p, t) for m, p, t in keyed([r for r in rows if r[0] != moderator], targeted=True)]
    expected = reference_decisions(counted, ((60, 5),), "sliding_log")
    assert sorted((tg, micro(w), a) for m, tg, w, a in decisions if m != moderator.pk) == sorted(
        (tg, t, a) for _, tg, t, a in expected
    )
    assert result.refused == sum(1 for *_, a in expected if not a) > 0
    assert result.members == 7 and result.actions == len(rows)


def test_refusals_by_day_busiest_members_and_penalised_members(community, policy):
    users, moderator, _, rows = community
    policy("answer", 60, 3)
    penalty(users[5], START - timedelta(hours=1), timedelta(hours=3), action="answer", automatic=True)
    penalty(users[4], START, timedelta(0), action="", automatic=True)  # a warning, on all actions
    penalty(users[3], START, timedelta(hours=1), action="answer", lifted_at=START)  # lifted: not counted
    penalty(users[2], START, timedelta(hours=1), action="post")  # another action
    result = throttling.replay("answer", since=START - timedelta(hours=2), until=START + timedelta(hours=2))
    assert result.by_day == {START.date(): 3 + 2 + 1}
    assert result.members_refused == 3 and result.members_refused_penalised == 2
    assert result.busiest[0] == (moderator.pk, 10, 0)
    assert result.busiest[1:4] == [(users[5].pk, 6, 3), (users[4].pk, 5, 2), (users[3].pk, 4, 1)]


def test_a_random_month_replays_in_a_pass_that_reads_each_row_once(
    settings, django_user_model, django_assert_max_num_queries
):
    settings.THROTTLING_HISTORY = HISTORY
    users = [django_user_model.objects.create_user(f"u{i}") for i in range(30)]
    rows = random_history(11, users, posts_by(users[0], 3), days=30)
    write_history(rows)
    # Policies, overrides, staff, penalties, then the rows in chunks: never a query per member.
    with django_assert_max_num_queries(12):
        result = throttling.replay("thread-answer", ["2/min", "10/hour"])
    assert result.actions == len(rows) > 5000
