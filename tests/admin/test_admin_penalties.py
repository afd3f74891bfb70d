"""The moderators' penalty admin and ladder admin, through the real admin against the suite's Redis."""

import re
from datetime import timedelta

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape, strip_tags

import throttling
import throttling.engine.decision
from tests.support.helpers import messages_of
from throttling import penalties
from throttling.models import OFFENCE_THRESHOLD_HELP, ActionPolicy, Penalty, PenaltyEvent, PenaltyStep

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:throttling_penalty_changelist"
ADD = "admin:throttling_penalty_add"
LADDER = "admin:throttling_penaltystep_changelist"
LADDER_ADD = "admin:throttling_penaltystep_add"
FORGIVENESS_TEXT = "A penalty lifted by staff erases its strike; one that expired still counts until it is {} days old."


def change_url(penalty):
    return reverse("admin:throttling_penalty_change", args=[penalty.pk])


def lift_url(penalty):
    return reverse("admin:throttling_penalty_lift", args=[penalty.pk])


def history_url(user):
    return reverse("admin:throttling_penalty_member", args=[user.pk])


def listed(response):
    return {p.pk for p in response.context["cl"].result_list}


def row_text(response, penalty):
    """The text of the changelist row of `penalty`, cells separated by " | "."""
    for row in re.findall(r"<tr[^>]*>.*?</tr>", response.content.decode(), re.S):
        if f'href="{change_url(penalty)}' in row:
            cells = re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)
            return " | ".join(strip_tags(c).strip() for c in cells)
    raise AssertionError(f"no row for penalty {penalty.pk}")


def make(user, *, action="reply", level=2, start=None, length=timedelta(minutes=15), **fields):
    """A penalty row written directly, without the Redis mirror (for the list and history pages)."""
    start = start or timezone.now()
    return Penalty.objects.create(
        user=user, action=action, level=level, starts_at=start, ends_at=start + length, **fields
    )


def penalised(who, action):
    return throttling.check(who, action).penalty


@pytest.fixture
def staff(django_user_model):
    """Factory: a staff member with only the given permissions of the throttling app."""

    def create(name, *codenames):
        user = django_user_model.objects.create_user(name, password="pw", is_staff=True)
        user.user_permissions.add(
            *Permission.objects.filter(content_type__app_label="throttling", codename__in=codenames)
        )
        return user

    return create


@pytest.fixture
def rows(member, django_user_model):
    """One penalty of each kind, for alice and bob."""
    bob = django_user_model.objects.create_user("bob", email="bob@example.com", password="pw")
    now = timezone.now()
    return {
        "active": make(member, action="reply", level=2, reason="flooding"),
        "ends_in_3_days": make(bob, action="", level=5, length=timedelta(days=3), automatic=True),
        "expired": make(
            member, action="", level=1, start=now - timedelta(days=2), length=timedelta(hours=1), automatic=True
        ),
        "warning": make(bob, action="like", level=1, length=timedelta(0), automatic=True),
        "lifted": make(member, action="post", level=3, length=timedelta(hours=1), lifted_at=now, lift_reason="appeal"),
        "scheduled": make(bob, action="reply", level=2, start=now + timedelta(hours=1)),
    }


# The changelist


def test_changelist_columns_say_scope_level_status_time_left_and_origin(admin_client, rows):
    response = admin_client.get(reverse(CHANGELIST))
    assert response.status_code == 200

    def columns(name):
        # checkbox | member | scope | level | status | starts | ends | time left | origin
        cells = row_text(response, rows[name]).split(" | ")
        return cells[1:5] + cells[7:]

    assert columns("active") == ["alice", "reply", "2. 15 minutes", "active", "15 minutes", "a moderator (manual)"]
    assert columns("ends_in_3_days") == [
        "bob",
        "all actions",
        "5 (custom length)",
        "active",
        "3 days",
        "the ladder (automatic)",
    ]
    assert columns("expired") == ["alice", "all actions", "1 (custom length)", "expired", "—", "the ladder (automatic)"]
    assert columns("warning") == ["bob", "like", "1. Warning", "warning", "—", "the ladder (automatic)"]
    assert columns("lifted") == ["alice", "post", "3. 1 hour", "lifted", "—", "a moderator (manual)"]
    assert columns("scheduled") == ["bob", "reply", "2. 15 minutes", "scheduled", "—", "a moderator (manual)"]
    content = response.content.decode()
    # The member column opens the member's history; the object tools link the report and the ladder.
    assert f'href="{history_url(rows["active"].user)}"' in content
    assert reverse("admin:throttling_report") in content
    assert reverse(LADDER) in content
    assert "never edited or deleted" in content
    assert 'id="searchbar"' in content
    assert response.context["cl"].date_hierarchy == "starts_at"


@pytest.mark.parametrize(
    "query, expected",
    [
        ({"active": "yes"}, {"active", "ends_in_3_days"}),
        ({"active": "no"}, {"expired", "warning", "lifted", "scheduled"}),
        ({"ending": "24h"}, {"active"}),
        ({"ending": "7d"}, {"active", "ends_in_3_days"}),
        ({"level": "1"}, {"expired", "warning"}),
        ({"level": "2"}, {"active", "scheduled"}),
        ({"scope": "*"}, {"ends_in_3_days", "expired"}),
        ({"scope": "reply"}, {"active", "scheduled"}),
        ({"origin": "automatic"}, {"ends_in_3_days", "expired", "warning"}),
        ({"origin": "manual"}, {"active", "lifted", "scheduled"}),
        ({"lifted": "yes"}, {"lifted"}),
        ({"lifted": "no"}, {"active", "ends_in_3_days", "expired", "warning", "scheduled"}),
        ({"q": "bob@example"}, {"ends_in_3_days", "warning", "scheduled"}),
        ({"q": "alic"}, {"active", "expired", "lifted"}),
        ({"active": "yes", "q": "alice"}, {"active"}),
    ],
)
def test_filters_and_search(admin_client, rows, query, expected):
    response = admin_client.get(reverse(CHANGELIST), query)
    assert response.status_code == 200
    assert listed(response) == {rows[name].pk for name in expected}


def test_filter_choices_name_rungs_and_show_blank_scope_as_all_actions(admin_client, rows):
    response = admin_client.get(reverse(CHANGELIST))
    filters = {
        spec.title: [choice["display"] for choice in spec.choices(response.context["cl"])]
        for spec in response.context["cl"].filter_specs
    }
    assert filters["scope"][1:] == ["all actions", "like", "post", "reply"]
    assert filters["level"][1:] == ["1. Warning", "2. 15 minutes", "3. 1 hour", "5. 7 days"]
    assert filters["end time"][1:] == ["within 24 hours", "within 7 days"]


def test_changelist_queries_do_not_grow_with_penalties(admin_client, member):
    def count():
        with CaptureQueriesContext(connection) as queries:
            assert admin_client.get(reverse(CHANGELIST)).status_code == 200
        return len(queries)

    make(member)
    before = count()
    for level in range(1, 6):
        make(member, level=level, action="like")
    assert count() == before


# Applying a penalty by hand


def add_form(member, **fields):
    data = {"user": str(member.pk), "action": "reply", "rung": "", "duration": "", "reason": "spamming links"}
    data.update(fields)
    return data


def test_manual_penalty_from_a_rung_is_audited_and_enforced_at_once(admin_client, admin_user, redis_server, member):
    assert penalised(member, "reply") is None
    rung = PenaltyStep.objects.get(level=3)
    response = admin_client.post(reverse(ADD), add_form(member, rung=str(rung.pk)))
    assert response.status_code == 302, response.context and response.context["adminform"].form.errors
    penalty = Penalty.objects.get(user=member)
    assert (penalty.level, penalty.action, penalty.automatic) == (3, "reply", False)
    assert penalty.ends_at - penalty.starts_at == timedelta(hours=1)
    assert penalty.reason == "spamming links"
    event = PenaltyEvent.objects.get(penalty=penalty)
    assert (event.kind, event.actor) == ("applied", admin_user)
    assert LogEntry.objects.filter(object_id=str(penalty.pk), action_flag=ADDITION).exists()
    # Refused by the decision script at once, for that action only.
    info = penalised(member, "reply")
    assert info is not None and info.penalty_id == penalty.pk and info.level == 3
    assert throttling.check(member, "reply").reason == throttling.engine.decision.PENALISED
    assert penalised(member, "like") is None
    assert [level for level, _ in messages_of(response)] == ["success"]


def test_manual_penalty_with_a_custom_duration_on_all_actions(admin_client, redis_server, member):
    make(member, level=1, length=timedelta(0), start=timezone.now() - timedelta(days=1))  # one strike already
    response = admin_client.post(reverse(ADD), add_form(member, action="", duration="2 hours 30 minutes"))
    assert response.status_code == 302
    penalty = Penalty.objects.get(user=member, action="")
    assert penalty.ends_at - penalty.starts_at == timedelta(hours=2, minutes=30)
    assert penalty.level == 2  # the level the ladder gives this member's next strike
    assert penalised(member, "like").penalty_id == penalty.pk
    assert penalised(member, "post").penalty_id == penalty.pk
    assert "2 (custom length)" in admin_client.get(reverse(CHANGELIST)).content.decode()


def test_add_form_prefills_the_member_from_the_history_page(admin_client, member):
    page = admin_client.get(history_url(member))
    add_link = f"{reverse(ADD)}?user={member.pk}"
    assert escape(add_link) in page.content.decode()
    form = admin_client.get(add_link).context["adminform"].form
    assert str(form["user"].value()) == str(member.pk)
    assert [value for value, _ in form.fields["action"].choices] == ["", "like", "post", "reply"]


@pytest.mark.parametrize(
    "fields, field, message",
    [
        ({}, None, "Choose a ladder rung or type a custom duration."),
        ({"rung": "RUNG", "duration": "1 day"}, None, "Choose a ladder rung or type a custom duration, not both."),
        ({"duration": "soon"}, "duration", "Type a length such as “15 minutes”"),
        ({"duration": "15"}, "duration", "Type a length such as “15 minutes”"),
        ({"duration": "-00:15:00"}, "duration", "A duration cannot be negative."),
        ({"duration": "99999 days"}, "duration", "at most 3650 days"),
        ({"duration": "1.5s"}, "duration", "“1.5s” has a fraction of a second"),
        ({"duration": "90.7s"}, "duration", "“90.7s” has a fraction of a second"),
        ({"duration": "1 day", "action": "send-money"}, "action", "“send-money” is not an action with a policy."),
        ({"duration": "1 day", "reason": ""}, "reason", "Say why: the member reads the reason"),
        ({"duration": "1 day", "user": "999999"}, "user", "No member has the id “999999”"),
    ],
)
def test_bad_manual_penalty_is_refused_with_a_clear_message(admin_client, redis_server, member, fields, field, message):
    if fields.get("rung") == "RUNG":
        fields["rung"] = str(PenaltyStep.objects.get(level=2).pk)
    response = admin_client.post(reverse(ADD), add_form(member, **fields))
    assert response.status_code == 200
    form = response.context["adminform"].form
    errors = form.errors[field] if field else form.non_field_errors()
    assert any(message in e for e in errors), errors
    assert escape(message) in response.content.decode()
    assert not Penalty.objects.exists()
    assert penalised(member, "reply") is None


def test_manual_penalty_when_redis_is_down_is_saved_with_a_warning(admin_client, member, own_redis):
    own_redis.kill()
    response = admin_client.post(reverse(ADD), add_form(member, duration="1 day"))
    assert response.status_code == 302
    assert Penalty.objects.filter(user=member).exists()
    levels, texts = zip(*messages_of(response), strict=True)
    assert "warning" in levels
    warning = texts[levels.index("warning")]
    assert "Redis could not be updated" in warning and "manage.py throttling_resync" in warning
    # Back (empty): the resync makes it hold.
    own_redis.start()
    penalties.resync()
    assert penalised(member, "reply") is not None


def test_penalising_staff_warns_that_exempt_policies_do_not_apply(admin_client, redis_server, staff):
    moderator = staff("mod")
    response = admin_client.post(reverse(ADD), add_form(moderator, duration="1 hour"))
    assert response.status_code == 302
    assert any(level == "warning" and "is a moderator" in text for level, text in messages_of(response))


# The change page is read-only


def test_change_page_shows_the_penalty_its_events_and_the_members_standing(
    admin_client, admin_user, redis_server, member
):
    penalty = penalties.apply_penalty(
        member, level=2, duration=timedelta(minutes=15), action="reply", reason="flood", by=admin_user
    )
    response = admin_client.get(change_url(penalty))
    assert response.status_code == 200
    content = response.content.decode()
    assert 'name="_save"' not in content  # nothing to save
    assert 'name="ends_at"' not in content and 'name="level"' not in content
    [events] = response.context["inline_admin_formsets"]
    assert [(e.kind, e.actor_display) for e in events.formset.queryset] == [("applied", "admin")]
    assert "what happened to this penalty" in content.lower()
    assert escape(lift_url(penalty)) in content
    assert history_url(member) in content
    # This penalty is the one strike counted, so the next strike gets the second rung.
    assert "level 2 (15 minutes), on the abused action only" in content  # said once
    assert escape(FORGIVENESS_TEXT.format(180)) in content


def test_penalty_cannot_be_edited_or_deleted_through_the_admin(admin_client, admin_user, redis_server, member):
    penalty = penalties.apply_penalty(
        member, level=2, duration=timedelta(minutes=15), action="reply", reason="flood", by=admin_user
    )
    ends_at = penalty.ends_at
    data = {
        "user": str(member.pk),
        "action": "",
        "level": "6",
        "starts_at_0": "2000-01-01",
        "starts_at_1": "00:00:00",
        "ends_at_0": "2000-01-01",
        "ends_at_1": "00:00:01",
        "reason": "edited",
        "lifted_at_0": "2000-01-01",
        "lifted_at_1": "00:00:00",
    }
    assert admin_client.post(change_url(penalty), data).status_code == 403
    assert (
        admin_client.post(reverse("admin:throttling_penalty_delete", args=[penalty.pk]), {"post": "yes"}).status_code
        == 403
    )
    penalty.refresh_from_db()
    assert (penalty.level, penalty.action, penalty.ends_at, penalty.reason, penalty.lifted_at) == (
        2,
        "reply",
        ends_at,
        "flood",
        None,
    )
    assert penalised(member, "reply").penalty_id == penalty.pk
    actions = admin_client.get(reverse(CHANGELIST)).context["action_form"].fields["action"].choices
    assert [name for name, _ in actions if name] == ["lift_penalties"]


# Lifting


def select(*chosen, **extra):
    return {"action": "lift_penalties", "_selected_action": [str(p.pk) for p in chosen], **extra}


def test_lift_action_asks_for_a_reason_then_lifts_and_frees_the_member(admin_client, admin_user, redis_server, member):
    penalty = penalties.apply_penalty(member, level=2, duration=timedelta(hours=1), action="reply", reason="flood")
    assert penalised(member, "reply") is not None

    page = admin_client.post(reverse(CHANGELIST), select(penalty))
    assert page.status_code == 200
    assert "admin/throttling/penalty/lift_confirmation.html" in [t.name for t in page.templates]
    assert "erases its strike" in page.content.decode()

    refused = admin_client.post(reverse(CHANGELIST), select(penalty, confirm="yes", reason="  "))
    assert refused.status_code == 200
    assert "Say why the penalty is lifted" in refused.content.decode()
    penalty.refresh_from_db()
    assert penalty.lifted_at is None and penalised(member, "reply") is not None

    response = admin_client.post(reverse(CHANGELIST), select(penalty, confirm="yes", reason="appeal accepted"))
    assert response.status_code == 302
    penalty.refresh_from_db()
    assert penalty.lifted_at is not None
    assert (penalty.lifted_by, penalty.lift_reason) == (admin_user, "appeal accepted")
    lifted = PenaltyEvent.objects.get(penalty=penalty, kind="lifted")
    assert (lifted.actor, lifted.details) == (admin_user, "appeal accepted")
    assert LogEntry.objects.filter(object_id=str(penalty.pk), action_flag=CHANGE).exists()
    assert penalised(member, "reply") is None
    assert messages_of(response) == [("success", "Lifted 1 penalty.")]
    assert penalties.standing(member)[0] == 0  # the strike is erased


def test_lifting_skips_penalties_already_lifted(admin_client, redis_server, member):
    first = penalties.apply_penalty(member, level=2, duration=timedelta(hours=1), action="reply", reason="a")
    second = penalties.apply_penalty(member, level=3, duration=timedelta(hours=2), action="like", reason="b")
    penalties.lift(first, reason="earlier")
    page = admin_client.post(reverse(CHANGELIST), select(first, second))
    assert page.status_code == 200
    assert [p.pk for p, _status, _url in page.context["penalties"]] == [second.pk]
    response = admin_client.post(reverse(CHANGELIST), select(first, second, confirm="yes", reason="both"))
    assert response.status_code == 302
    assert messages_of(response) == [
        ("success", "Lifted 1 penalty."),
        ("warning", "1 penalty was already lifted and was left as it was."),
    ]
    first.refresh_from_db()
    assert first.lift_reason == "earlier"  # not lifted again
    assert penalised(member, "like") is None

    admin_client.get(reverse(CHANGELIST))  # shows (and so uses up) those messages
    # Only lifted ones chosen: nothing to confirm.
    again = admin_client.post(reverse(CHANGELIST), select(first))
    assert again.status_code == 302
    assert messages_of(again) == [("warning", "1 penalty was already lifted and was left as it was.")]


def test_lifting_needs_the_lift_permission(client, staff, redis_server, member):
    penalty = penalties.apply_penalty(member, level=2, duration=timedelta(hours=1), action="reply", reason="flood")
    moderator = staff("mod", "view_penalty", "add_penalty")
    client.force_login(moderator)

    changelist = client.get(reverse(CHANGELIST))
    assert changelist.status_code == 200
    assert "lift_penalties" not in changelist.content.decode()
    assert client.post(reverse(CHANGELIST), select(penalty)).status_code == 403
    assert client.post(reverse(CHANGELIST), select(penalty, confirm="yes", reason="x")).status_code == 403
    assert client.get(lift_url(penalty)).status_code == 403
    assert client.post(lift_url(penalty), {"confirm": "yes", "reason": "x"}).status_code == 403
    assert escape(lift_url(penalty)) not in client.get(change_url(penalty)).content.decode()
    penalty.refresh_from_db()
    assert penalty.lifted_at is None and penalised(member, "reply") is not None

    moderator.user_permissions.add(Permission.objects.get(codename="lift_penalty"))
    assert "lift_penalties" in client.get(reverse(CHANGELIST)).content.decode()
    response = client.post(lift_url(penalty), {"confirm": "yes", "reason": "my mistake"})
    assert response.status_code == 302
    assert PenaltyEvent.objects.get(penalty=penalty, kind="lifted").actor == moderator
    assert penalised(member, "reply") is None


def test_lift_button_of_one_penalty(admin_client, redis_server, member):
    penalty = penalties.apply_penalty(member, level=2, duration=timedelta(hours=1), action="", reason="flood")
    page = admin_client.get(lift_url(penalty))
    assert page.status_code == 200
    assert page.context["single"].pk == penalty.pk
    response = admin_client.post(lift_url(penalty), {"confirm": "yes", "reason": "wrong member"})
    assert response.status_code == 302 and response.url == change_url(penalty)
    assert penalised(member, "reply") is None
    # Lifted: the change page no longer offers it, and the URL only says so.
    assert escape(lift_url(penalty)) not in admin_client.get(change_url(penalty)).content.decode()
    again = admin_client.post(lift_url(penalty), {"confirm": "yes", "reason": "again"})
    assert again.status_code == 302
    assert PenaltyEvent.objects.filter(penalty=penalty, kind="lifted").count() == 1


def test_lift_when_redis_is_down_is_recorded_with_a_warning(admin_client, member, own_redis):
    penalty = penalties.apply_penalty(member, level=2, duration=timedelta(hours=1), action="reply", reason="flood")
    assert penalised(member, "reply") is not None
    own_redis.stop()
    response = admin_client.post(lift_url(penalty), {"confirm": "yes", "reason": "appeal"})
    assert response.status_code == 302
    penalty.refresh_from_db()
    assert penalty.lifted_at is not None
    levels = [level for level, _ in messages_of(response)]
    assert levels == ["success", "warning"]
    assert "throttling_resync" in messages_of(response)[1][1]


# A member's history


def test_member_history_counts_strikes_and_shows_the_next_rung(admin_client, admin_user, member):
    now = timezone.now()
    make(member, level=1, length=timedelta(0), start=now - timedelta(days=3), automatic=True)  # counted
    make(member, level=2, start=now - timedelta(days=2), automatic=True)  # expired: still counted
    make(member, level=3, start=now - timedelta(days=1), lifted_at=now, lifted_by=admin_user, lift_reason="appeal")
    make(member, level=2, start=now - timedelta(days=400), automatic=True)  # forgiven
    response = admin_client.get(history_url(member))
    assert response.status_code == 200
    history = response.context["member_history"]
    assert history["strike_count"] == 2
    assert [row["counted"] for row in history["rows"]] == [False, True, True, False]  # newest first
    content = strip_tags(response.content.decode())
    assert "2 strikes are still counted" in content
    assert "Rung reached: level 2 (15 minutes)" in " ".join(content.split())
    assert "level 3 (1 hour), on the abused action only" in content
    assert FORGIVENESS_TEXT.format(180) in " ".join(content.split())
    assert "lifted (by admin: appeal)" in " ".join(content.split())


@override_settings(THROTTLING_FORGIVENESS_DAYS=1)
def test_member_history_follows_the_forgiveness_setting(admin_client, member):
    make(member, level=4, start=timezone.now() - timedelta(days=2), length=timedelta(days=1))
    response = admin_client.get(history_url(member))
    assert response.context["member_history"]["strike_count"] == 0
    content = " ".join(strip_tags(response.content.decode()).split())
    assert FORGIVENESS_TEXT.format(1) in content
    assert "level 1 (warning only), on the abused action only" in content  # "Warning" said once


def test_member_history_of_a_clean_member_and_of_nobody(admin_client, member):
    response = admin_client.get(history_url(member))
    assert "This member has never been penalised." in response.content.decode()
    assert admin_client.get(reverse("admin:throttling_penalty_member", args=[999999])).status_code == 404
    assert admin_client.get(reverse("admin:throttling_penalty_member", args=["abc"])).status_code == 404


def test_member_history_lists_the_newest_penalties_of_a_long_record(admin_client, member, monkeypatch):
    from throttling.admin.penalties.penalty import PenaltyAdmin

    monkeypatch.setattr(PenaltyAdmin, "history_rows", 2)
    now = timezone.now()
    oldest, middle, newest = (make(member, start=now - timedelta(days=d)) for d in (3, 2, 1))
    response = admin_client.get(history_url(member))
    assert [row["penalty"].pk for row in response.context["member_history"]["rows"]] == [newest.pk, middle.pk]
    assert "The newest 2 of 3 penalties" in response.content.decode()
    assert response.context["member_history"]["strike_count"] == 3


def test_member_history_needs_permission_to_see_penalties(client, staff, member):
    client.force_login(staff("mod", "view_actionpolicy"))
    assert client.get(history_url(member)).status_code == 403


# The ladder


def rung_form(level, name, duration, all_actions=False):
    data = {"level": str(level), "name": name, "duration": duration}
    if all_actions:
        data["all_actions"] = "on"
    return data


def test_ladder_lists_rungs_in_words_and_explains_itself(admin_client):
    response = admin_client.get(reverse(LADDER))
    assert response.status_code == 200
    assert [s.level for s in response.context["cl"].result_list] == [1, 2, 3, 4, 5, 6]
    content = response.content.decode()
    for words in ("warning only", "15 minutes", "1 hour", "7 days", "30 days"):
        assert words in content
    assert "the nth strike within 180 days gets rung n" in " ".join(strip_tags(content).split())
    assert "ladder-problems" not in content


def test_ladder_accepts_durations_as_people_type_them(admin_client):
    response = admin_client.post(reverse(LADDER_ADD), rung_form(7, "90 days", "12w 6d", all_actions=True))
    assert response.status_code == 302, response.context and response.context["adminform"].form.errors
    assert PenaltyStep.objects.get(level=7).duration == timedelta(days=90)
    step = PenaltyStep.objects.get(level=3)
    page = admin_client.get(reverse("admin:throttling_penaltystep_change", args=[step.pk]))
    assert 'value="1h"' in page.content.decode()


@pytest.mark.parametrize(
    "level, duration, message",
    [
        (
            7,
            "1 day",
            "Level 7 cannot be shorter than level 6 (30 days): penalties must not get milder as strikes add up.",
        ),
        (3, "10 minutes", "Level 3 cannot be shorter than level 2 (15 minutes)"),
        (3, "2 days", "Level 3 cannot be longer than level 4 (1 day)"),
        (0, "1 day", "Levels start at 1."),
        (2, "1 hour", "The ladder already has a rung at this level."),
        (7, "whenever", "Type a length such as"),
        (7, "40 days 0.5s", "“40 days 0.5s” has a fraction of a second"),
    ],
)
def test_ladder_refuses_a_rung_that_breaks_the_order(admin_client, level, duration, message):
    before = list(PenaltyStep.objects.values_list("level", "duration"))
    if level == 3:  # editing the existing third rung
        step = PenaltyStep.objects.get(level=3)
        url = reverse("admin:throttling_penaltystep_change", args=[step.pk])
    else:
        url = reverse(LADDER_ADD)
    response = admin_client.post(url, rung_form(level, "x", duration))
    assert response.status_code == 200
    errors = [e for field_errors in response.context["adminform"].form.errors.values() for e in field_errors]
    assert any(message in e for e in errors), errors
    assert escape(message) in response.content.decode()
    assert list(PenaltyStep.objects.values_list("level", "duration")) == before


def test_ladder_problems_are_shown_as_a_banner(admin_client):
    PenaltyStep.objects.filter(level=3).delete()
    PenaltyStep.objects.filter(level=5).update(duration=timedelta(hours=1))  # below level 4's day
    response = admin_client.get(reverse(LADDER))
    problems = response.context["ladder_problems"]
    assert problems == penalties.ladder_problems(penalties.current_ladder())
    assert len(problems) == 2
    content = response.content.decode()
    assert "ladder-problems" in content
    assert escape("Levels should be numbered 1, 2, 3 … without gaps; they are 1, 2, 4, 5, 6.") in content
    assert escape("Level 5 (7 days) is shorter than level 4 (1 day).") in content


def test_empty_ladder_banner(admin_client):
    PenaltyStep.objects.all().delete()
    assert "never penalised" in admin_client.get(reverse(LADDER)).content.decode()


# Repeat-offender settings of a policy


def test_policy_form_has_the_repeat_offender_fields(admin_client):
    reply = ActionPolicy.objects.get(action="reply")
    url = reverse("admin:throttling_actionpolicy_change", args=[reply.pk])
    page = admin_client.get(url)
    content = page.content.decode()
    assert "Repeat offenders" in content
    assert escape(str(OFFENCE_THRESHOLD_HELP)) in content
    data = {
        "action": "reply",
        "verb": "replied",
        "description": "",
        "period": "60",
        "max_count": "6",
        "algorithm": "sliding_log",
        "enabled": "on",
        "on_backend_failure": "default",
        "offence_threshold": "3",
        "offence_window": "120",
        "mode": "enforce",
        "scope": "member",
        "windows-TOTAL_FORMS": "0",
        "windows-INITIAL_FORMS": "0",
        "windows-MIN_NUM_FORMS": "0",
        "windows-MAX_NUM_FORMS": "1000",
        "tiers-TOTAL_FORMS": "0",
        "tiers-INITIAL_FORMS": "0",
        "tiers-MIN_NUM_FORMS": "0",
        "tiers-MAX_NUM_FORMS": "1000",
    }
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.context and response.context["adminform"].form.errors
    reply.refresh_from_db()
    assert (reply.offence_threshold, reply.offence_window) == (3, 120)
    data["offence_window"] = "0"
    response = admin_client.post(url, data)
    assert response.status_code == 200
    assert "between 1 second and 30 days" in response.content.decode()
