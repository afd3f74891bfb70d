"""The policy page's "What would this do?": the form's unsaved draft replayed inline, errors in words,
moderators only. (The background replay through a real worker is in test_admin_worker.py; the page in a
browser in test_browser.py.)"""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

import throttling
from tests.support.history import HISTORY, micro, posts_by, random_history, write_history
from throttling.admin.report.queries import Period
from throttling.models import ActionPolicy

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("redis_server")]

URL = "admin:throttling_actionpolicy_whatif"


def moderates_nobody_but_mia(user):
    return user.username == "mia"


@pytest.fixture
def week(settings, django_user_model):
    """A week of an active forum's replies, ending now, per thread and per member."""
    settings.THROTTLING_HISTORY = HISTORY
    users = [django_user_model.objects.create_user(f"u{i}") for i in range(40)]
    start = micro(timezone.now() - timedelta(days=6))
    rows = random_history(3, users, posts_by(users[0], 4), days=5, start=start)
    write_history(rows)
    return users, rows


def form_data(policy, **changes):
    """What the policy page's form posts: the policy's fields and its extra windows' inline."""
    windows = list(policy.windows.all()) if policy else []
    data = {
        "action": policy.action if policy else "answer",
        "period": str(policy.period if policy else 60),
        "max_count": str(policy.max_count if policy else 3),
        "algorithm": policy.algorithm if policy else "sliding_log",
        "windows-TOTAL_FORMS": str(len(windows)),
        "windows-INITIAL_FORMS": str(len(windows)),
        "days": "7",
    }
    for i, w in enumerate(windows):
        data.update(
            {
                f"windows-{i}-id": str(w.pk),
                f"windows-{i}-period": str(w.period),
                f"windows-{i}-max_count": str(w.max_count),
            }
        )
    data.update(changes)
    return data


def text(response):
    return re.sub(r"\s+", " ", response.content.decode())


def test_the_draft_and_the_policy_as_it_stands_are_replayed_inline(admin_client, week, policy):
    saved = policy("answer", 60, 3, windows=[(3600, 20)])
    url = f"{reverse(URL)}?policy={saved.pk}"
    # The form says 1 a minute and drops the hourly window (unsaved): the draft is what is replayed.
    data = form_data(saved, period="1m", max_count="1", **{"windows-0-DELETE": "on"})
    response = admin_client.post(url, data)
    assert response.status_code == 200
    since = Period.last(7).start
    draft = throttling.replay("answer", [(60, 1)], since=since)
    stands = throttling.replay("answer", since=since)
    assert draft.refused > stands.refused > 0
    page = text(response)
    assert f'<td id="whatif-draft-refused"><strong>{draft.refused:,}</strong>' in page
    assert f'<td id="whatif-current-refused"><strong>{stands.refused:,}</strong>' in page
    assert f'<td id="whatif-draft-members"><strong>{draft.members_refused:,}</strong>' in page
    assert "1 per minute (sliding log)" in page and "3 per minute, 20 per hour (sliding log)" in page
    assert 'data-chart="whatif-refusals-per-day"' in page
    # The busiest members, linked to their penalty history.
    busiest = draft.busiest[0][0]
    assert reverse("admin:throttling_penalty_member", args=[busiest]) in page
    assert page.count('class="busiest-member"') == 10
    # The suggestion, ready for one click.
    suggestion = throttling.suggest("answer", since=since, periods=[60])
    assert f"<strong>{suggestion.describe()}</strong>" in page
    assert 'data-windows="[{&quot;period&quot;: 60, &quot;max&quot;: ' in page
    assert "Trust tiers (0) and member overrides (0) apply as they stand today." in page
    # The draft was never saved.
    saved.refresh_from_db()
    assert (saved.period, saved.max_count, saved.windows.count()) == (60, 3, 1)


def test_a_draft_too_loose_says_whom_it_lets_through_and_the_chart_shows_both(admin_client, week, policy):
    saved = policy("answer", 60, 1)
    url = f"{reverse(URL)}?policy={saved.pk}"
    response = admin_client.post(url, form_data(saved, max_count="100"))
    since = Period.last(7).start
    draft = throttling.replay("answer", [(60, 100)], since=since)
    stands = throttling.replay("answer", since=since)
    assert draft.refused == 0 < stands.refused
    page = text(response)
    freed = len(stands.by_member)
    assert (
        f"{freed} members the policy as it stands refuses would get through with this form: "
        f"{stands.refused:,} more actions admitted." in page
    )
    most, n = max(stands.by_member.items(), key=lambda item: (item[1], -item[0]))
    user = type(week[0][0]).objects.get(pk=most)
    assert f"{user.get_username()}</a>: {n:,} more admitted" in page
    # The chart shows the policy as it stands beside the draft (which refuses nothing here).
    assert 'data-chart="whatif-refusals-per-day"' in page
    assert "refused by the policy as it stands: " in page
    assert "the draft beside the policy as it stands" in page


def test_a_new_policy_replays_the_typed_action_without_a_policy_as_it_stands(admin_client, week):
    response = admin_client.post(
        reverse(URL), form_data(None, action="thread-answer", days="30", algorithm="token_bucket")
    )
    page = text(response)
    assert "3 per minute (token bucket)" in page
    assert "The policy as it stands" not in page and 'data-replayed="30"' in page


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"action": "flag"}, "No history is configured for the action “flag”"),
        ({"period": "soon"}, "The main limit: Type a period such as"),
        ({"max_count": "many"}, "The main limit: the maximum is not a whole number."),
        ({"period": "", "max_count": ""}, "Fill in the main limit’s period and maximum first."),
        ({"max_count": "5000"}, "5000 per minute: the maximum must be between 1 and 1,000 with this algorithm."),
        (
            {"windows-TOTAL_FORMS": "1", "windows-0-period": "1m", "windows-0-max_count": "4"},
            "Two windows have a period of 1 minute;",
        ),
        ({"action": ""}, "Type the action’s name first"),
    ],
)
def test_what_cannot_be_replayed_is_said_in_words(admin_client, week, changes, words):
    response = admin_client.post(reverse(URL), form_data(None, **changes))
    assert response.status_code == 200
    assert f'<p class="errornote whatif-error">{words}' in text(response).replace("&#x27;", "'")


def test_the_panel_is_on_the_policy_page(admin_client, week, policy):
    saved = policy("answer", 60, 3)
    page = text(admin_client.get(reverse("admin:throttling_actionpolicy_change", args=[saved.pk])))
    assert 'id="throttling-whatif"' in page and f'data-url="{reverse(URL)}?policy={saved.pk}"' in page
    assert "throttling/whatif.js" in page
    # What "the last 7 days" means, as the command and the API read it.
    assert "“The last 7 days” are today and the six days before it, from midnight in the site’s time zone" in page
    assert 'id="throttling-whatif"' in text(admin_client.get(reverse("admin:throttling_actionpolicy_add")))


def test_only_posts_are_replayed_and_unknown_jobs_are_said_to_be_gone(admin_client, week):
    assert admin_client.get(reverse(URL)).status_code == 405
    assert admin_client.post(f"{reverse(URL)}?policy=999999", form_data(None)).status_code == 404
    gone = admin_client.get(reverse(f"{URL}_job", args=["0123abcd"]))
    assert "This replay is over an hour old or unknown; replay again." in text(gone)


LEVELS = {
    # name: (policy permissions, penalty view permission, THROTTLING_MODERATORS, replays?)
    "superuser": None,
    "policy editor": (("change_actionpolicy",), False, None, False),
    "policy viewer": (("view_actionpolicy",), False, None, False),
    "moderator": (("change_actionpolicy",), True, None, True),
    "moderator who may only look": (("view_actionpolicy",), True, None, True),
    "named moderator": (("change_actionpolicy",), False, moderates_nobody_but_mia, True),
    "staff the setting does not name": (("change_actionpolicy",), True, moderates_nobody_but_mia, False),
    "penalty viewer without policies": ((), True, None, False),
}


@pytest.mark.parametrize("level", LEVELS)
def test_moderators_only(client, week, policy, django_user_model, settings, level):
    saved = policy("answer", 60, 3)
    if LEVELS[level] is None:
        user, replays = django_user_model.objects.create_superuser("root", "root@example.com", "pw"), True
    else:
        perms, penalties, moderators, replays = LEVELS[level]
        settings.THROTTLING_MODERATORS = moderators
        user = django_user_model.objects.create_user("mia" if moderators and replays else "sam", is_staff=True)
        codenames = [*perms, *(["view_penalty"] if penalties else [])]
        user.user_permissions.add(
            *Permission.objects.filter(content_type__app_label="throttling", codename__in=codenames)
        )
    client.force_login(user)
    response = client.post(f"{reverse(URL)}?policy={saved.pk}", form_data(saved))
    assert response.status_code == (200 if replays else 403)
    if replays:
        assert 'id="whatif-draft-refused"' in text(response)
    page = client.get(reverse("admin:throttling_actionpolicy_change", args=[saved.pk]))
    if page.status_code == 200:
        assert ('id="throttling-whatif"' in text(page)) is replays
    job = client.get(reverse(f"{URL}_job", args=["0123abcd"]))
    assert job.status_code == (200 if replays else 403)


def test_visitors_who_are_not_staff_are_sent_to_log_in(client, week, member):
    client.force_login(member)
    response = client.post(reverse(URL), form_data(None))
    assert response.status_code == 302 and reverse("admin:login") in response["Location"]
    assert ActionPolicy.objects.filter(action="answer").count() == 0


def test_a_background_replay_that_fails_says_why_on_the_page(admin_client, week):
    from throttling.replayer import jobs

    jobs.save("f00d", {"state": jobs.QUEUED, "done": 0, "total": 5, "arguments": {"action": "flag"}})
    assert jobs.run("f00d") == jobs.FAILED
    page = text(admin_client.get(reverse(f"{URL}_job", args=["f00d"])))
    assert "No history is configured for the action “flag”" in page
    assert jobs.run("f00d") == jobs.FAILED  # a second delivery leaves a finished job alone
