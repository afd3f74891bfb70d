"""manage.py throttling_replay: the same figures as throttling.replay() and suggest(), in text or JSON."""

import json
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

import throttling
from tests.support.history import HISTORY, micro, posts_by, random_history, write_history
from tests.support.report import penalty

pytestmark = pytest.mark.django_db


@pytest.fixture
def fortnight(settings, django_user_model):
    settings.THROTTLING_HISTORY = HISTORY
    users = [django_user_model.objects.create_user(f"u{i}") for i in range(30)]
    start = micro(timezone.now() - timedelta(days=13))
    write_history(random_history(8, users, posts_by(users[0], 3), days=12, start=start))
    return users


def run(*args):
    out = StringIO()
    call_command("throttling_replay", *args, stdout=out)
    return out.getvalue()


def test_a_draft_beside_the_policy_as_it_stands(fortnight, policy):
    policy("answer", 60, 4)
    out = run("answer", "--rate", "2/min", "--rate", "20/hour", "--days", "7")
    draft = throttling.replay("answer", ["2/min", "20/hour"], days=7)
    stands = throttling.replay("answer", days=7)
    assert f"answer: {draft.actions:,} actions by {draft.members:,} members" in out
    assert "2 per minute, 20 per hour (sliding log)" in out and "4 per minute (sliding log)" in out
    line = next(line for line in out.splitlines() if line.startswith("actions refused"))
    assert f"{draft.refused:,} (" in line and f"{stands.refused:,} (" in line
    assert "Busiest members:" in out and "Refused per day:" in out
    assert "Suggested" not in out


def test_the_policy_alone_and_the_suggestion(fortnight, policy):
    policy("answer", 60, 4, algorithm="token_bucket")
    out = run("answer", "--suggest", "--members", "0.1")
    assert "as it stands" not in out and "4 per minute (token bucket)" in out
    suggestion = throttling.suggest("answer", members=0.1, days=30)
    assert f"Suggested, each window alone refusing at most 10 % of the {suggestion.members:,} members counted" in out
    assert suggestion.describe() in out
    assert "To replay it: manage.py throttling_replay answer --rate" in out


def test_json_since_until_and_penalised_members(fortnight, policy):
    policy("answer", 60, 2)
    day = timezone.localdate() - timedelta(days=5)
    penalty(fortnight[0], timezone.now() - timedelta(days=5), timedelta(days=1), action="answer", automatic=True)
    data = json.loads(run("answer", "--since", day.isoformat(), "--until", day.isoformat(), "--json", "--suggest"))
    start = timezone.make_aware(datetime.combine(day, datetime.min.time()))
    expected = throttling.replay("answer", since=start, until=start + timedelta(days=1))
    assert (data["draft"]["actions"], data["draft"]["refused"]) == (expected.actions, expected.refused)
    assert data["draft"]["members_refused_penalised"] == expected.members_refused_penalised
    assert data["current"] is None and data["suggestion"]["windows"][0][0] == 60
    assert datetime.fromisoformat(data["since"]) == start


@pytest.mark.parametrize(
    "args, words",
    [
        (["flag"], "No history is configured for the action “flag”"),
        (["answer"], "has no policy: give the windows"),
        (["answer", "--rate", "3/mni"], "is not a unit"),
        (["answer", "--rate", "3/min", "--since", "last week"], "is not a date"),
        (["answer", "--rate", "3/min", "--days", "0"], "--days must be at least 1"),
        (["answer", "--rate", "3/min", "--days", "100000000"], "--days must be at least 1 and at most 36,600"),
        (["answer", "--rate", "3/min", "--since", "2026-03-02", "--until", "2026-03-01"], "is not before --until"),
        (["answer", "--rate", "3/min", "--since", "2999-01-01"], "is in the future"),
        (["answer", "--rate", "3/min", "--suggest", "--members", "2"], "share of members"),
    ],
)
def test_what_cannot_be_replayed_is_a_command_error(fortnight, args, words):
    with pytest.raises(CommandError, match=words):
        run(*args)


def test_an_exact_datetime_until_is_kept(fortnight, policy):
    policy("answer", 60, 2)
    at = datetime(2026, 1, 1, 12, tzinfo=UTC)
    data = json.loads(run("answer", "--since", "2025-12-01", "--until", "2026-01-01 12:00", "--json"))
    assert datetime.fromisoformat(data["until"]) == at


def test_a_history_table_that_does_not_exist_is_a_command_error_in_words(fortnight, policy, monkeypatch):
    from demo_site.models import Reply

    policy("answer", 60, 2)
    monkeypatch.setattr(Reply._meta, "db_table", "throttling_no_such_history")
    with pytest.raises(CommandError, match="The history of “answer” could not be read from the database"):
        run("answer", "--rate", "3/min")


@pytest.mark.parametrize("days", [1, 7, 30])
def test_the_last_days_mean_what_the_admin_means(fortnight, policy, days):
    """Today and the days − 1 before it, from midnight in the site's time zone: the admin's period."""
    from throttling.admin.report.queries import Period

    policy("answer", 60, 2)
    data = json.loads(run("answer", "--days", str(days), "--json"))
    assert datetime.fromisoformat(data["since"]) == Period.last(days).start
    api = throttling.replay("answer", days=days)
    assert (api.since, api.actions, api.refused) == (
        Period.last(days).start,
        data["draft"]["actions"],
        data["draft"]["refused"],
    )


def test_the_last_days_up_to_a_date_end_with_that_day(fortnight, policy):
    policy("answer", 60, 2)
    day = timezone.localdate() - timedelta(days=3)
    data = json.loads(run("answer", "--until", day.isoformat(), "--days", "2", "--json"))
    first = timezone.make_aware(datetime.combine(day - timedelta(days=1), datetime.min.time()))
    end = timezone.make_aware(datetime.combine(day + timedelta(days=1), datetime.min.time()))
    assert (datetime.fromisoformat(data["since"]), datetime.fromisoformat(data["until"])) == (first, end)
