"""The policy admin and the counter-reset page, driven through the real admin against a real Redis."""

import re

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.auth.models import AnonymousUser, Permission
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils.html import escape

import throttling
from tests.support.helpers import messages_of
from throttling.models import LOG_CAP_MESSAGE, MAX_COUNT_MESSAGE, PERIOD_MESSAGE, ActionPolicy, ActionWindow
from throttling.models.fields import action_validator

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:throttling_actionpolicy_changelist"
ADD = "admin:throttling_actionpolicy_add"
RESET = "admin:throttling_actionpolicy_reset"
DUPLICATE_WINDOW = "This policy already has a window of that period."
SAME_AS_MAIN = "The policy’s main limit already uses this period; choose another."


def policy_form(action="flag", period=60, max_count=5, windows=(), initial_windows=0, **fields):
    data = {
        "action": action,
        "verb": "flagged",
        "description": "",
        "period": str(period),
        "max_count": str(max_count),
        "algorithm": "sliding_log",
        "enabled": "on",
        "on_backend_failure": "default",
        "windows-TOTAL_FORMS": str(len(windows)),
        "windows-INITIAL_FORMS": str(initial_windows),
        "windows-MIN_NUM_FORMS": "0",
        "windows-MAX_NUM_FORMS": "1000",
        "mode": "enforce",
        "scope": "member",
        "tiers-TOTAL_FORMS": "0",
        "tiers-INITIAL_FORMS": "0",
        "tiers-MIN_NUM_FORMS": "0",
        "tiers-MAX_NUM_FORMS": "1000",
    }
    for i, window in enumerate(windows):
        for name, value in window.items():
            data[f"windows-{i}-{name}"] = str(value)
    data.update(fields)
    return data


def actions_listed(response):
    return [p.action for p in response.context["cl"].result_list]


def has_full_quota(who, action):
    # Compared with someone who never acted, so this holds whether peek() reports
    # what is left now or what a check would leave.
    decision, fresh = throttling.peek(who, action), throttling.peek("never-acted", action)
    return decision.allowed and decision.remaining == fresh.remaining and fresh.limit == decision.limit


def exhaust(who, action):
    for _ in range(ActionPolicy.objects.get(action=action).max_count):
        assert throttling.check(who, action).allowed
    assert not throttling.check(who, action).allowed


# The changelist


def test_changelist_shows_default_policies_with_all_their_limits(admin_client):
    response = admin_client.get(reverse(CHANGELIST))
    assert response.status_code == 200
    assert sorted(actions_listed(response)) == ["like", "post", "reply"]
    content = response.content.decode()
    assert "6 per minute, 60 per hour" in content  # reply: main and extra window
    assert "3 per 10 minutes, 20 per day" in content  # post
    assert reverse(RESET) in content  # the object-tools link


def test_changelist_queries_do_not_grow_with_policies(admin_client, policy):
    def count():
        with CaptureQueriesContext(connection) as queries:
            assert admin_client.get(reverse(CHANGELIST)).status_code == 200
        return len(queries)

    before = count()
    for i in range(5):
        policy(f"extra-{i}", 60, 5, windows=[(3600, 20), (86400, 100)])
    assert count() == before


def test_search_matches_action_description_and_verb(admin_client, policy):
    policy("send-message", 60, 3, verb="messaged", description="Private messages between members")
    url = reverse(CHANGELIST)
    assert actions_listed(admin_client.get(url, {"q": "messaged"})) == ["send-message"]
    assert actions_listed(admin_client.get(url, {"q": "private"})) == ["send-message"]
    assert actions_listed(admin_client.get(url, {"q": "lik"})) == ["like"]


def test_filters(admin_client):
    ActionPolicy.objects.filter(action="like").update(enabled=False, on_backend_failure="closed")
    ActionPolicy.objects.filter(action="post").update(exempt_staff=False)
    url = reverse(CHANGELIST)
    assert actions_listed(admin_client.get(url, {"enabled__exact": "0"})) == ["like"]
    assert actions_listed(admin_client.get(url, {"exempt_staff__exact": "0"})) == ["post"]
    assert actions_listed(admin_client.get(url, {"on_backend_failure__exact": "closed"})) == ["like"]
    assert sorted(actions_listed(admin_client.get(url, {"on_backend_failure__exact": "default"}))) == [
        "post",
        "reply",
    ]


def test_list_editable_toggles_enabled_and_logs_it(admin_client):
    rows = list(ActionPolicy.objects.order_by("action"))
    data = {
        "form-TOTAL_FORMS": str(len(rows)),
        "form-INITIAL_FORMS": str(len(rows)),
        "_save": "Save",
    }
    for i, row in enumerate(rows):
        data[f"form-{i}-id"] = str(row.pk)
        if row.action != "like":
            data[f"form-{i}-enabled"] = "on"
    response = admin_client.post(reverse(CHANGELIST), data)
    assert response.status_code == 302
    like = ActionPolicy.objects.get(action="like")
    assert not like.enabled
    assert ActionPolicy.objects.get(action="reply").enabled
    assert LogEntry.objects.filter(object_id=str(like.pk), action_flag=CHANGE).exists()


# Adding and editing policies


@pytest.mark.parametrize(
    "fields, field, message",
    [
        ({"max_count": 5000}, "max_count", LOG_CAP_MESSAGE),
        ({"max_count": 2_000_000, "algorithm": "token_bucket"}, "max_count", MAX_COUNT_MESSAGE),
        ({"max_count": 0}, "max_count", MAX_COUNT_MESSAGE),
        ({"max_count": -1}, "max_count", MAX_COUNT_MESSAGE),
        ({"period": 0}, "period", PERIOD_MESSAGE),
        ({"period": 366 * 86400 + 1}, "period", PERIOD_MESSAGE),
        ({"action": "Send Message"}, "action", action_validator.message),
    ],
)
def test_bad_policy_shows_the_models_message_and_creates_nothing(admin_client, fields, field, message):
    response = admin_client.post(reverse(ADD), policy_form(**fields))
    assert response.status_code == 200
    form = response.context["adminform"].form
    assert form.errors[field] == [str(message)]
    assert not form.non_field_errors()  # said once, beside the field
    assert escape(str(message)) in response.content.decode()
    assert ActionPolicy.objects.count() == 3
    assert not LogEntry.objects.exists()


def test_cap_message_explains_memory(admin_client):
    response = admin_client.post(reverse(ADD), policy_form(max_count=5000))
    assert "1,000" in str(MAX_COUNT_MESSAGE)
    assert "memory" in response.content.decode()


@pytest.mark.parametrize(
    "windows, message",
    [
        ([{"period": 3600, "max_count": 20}, {"period": 3600, "max_count": 30}], DUPLICATE_WINDOW),
        ([{"period": 60, "max_count": 20}], SAME_AS_MAIN),
        ([{"period": 0, "max_count": 20}], str(PERIOD_MESSAGE)),
        ([{"period": 3600, "max_count": 5000}], str(LOG_CAP_MESSAGE)),
        ([{"period": 3600, "max_count": 2_000_000}], str(MAX_COUNT_MESSAGE)),
    ],
)
def test_bad_extra_window_is_refused_with_the_models_message(admin_client, windows, message):
    response = admin_client.post(reverse(ADD), policy_form(windows=windows))
    assert response.status_code == 200
    formset = response.context["inline_admin_formsets"][0].formset
    errors = [str(e) for e in formset.non_form_errors()]
    errors += [str(e) for form_errors in formset.errors for field in form_errors.values() for e in field]
    assert message in errors
    assert escape(message) in response.content.decode()
    assert not ActionPolicy.objects.filter(action="flag").exists()
    assert not ActionWindow.objects.filter(policy__action="flag").exists()


def test_editing_main_period_onto_an_existing_window_is_refused(admin_client):
    reply = ActionPolicy.objects.get(action="reply")
    window = reply.windows.get()
    data = policy_form(
        action="reply",
        period=window.period,
        max_count=6,
        windows=[{"id": window.pk, "policy": reply.pk, "period": window.period, "max_count": window.max_count}],
        initial_windows=1,
    )
    response = admin_client.post(reverse("admin:throttling_actionpolicy_change", args=[reply.pk]), data)
    assert response.status_code == 200
    assert escape(SAME_AS_MAIN) in response.content.decode()
    reply.refresh_from_db()
    assert reply.period == 60


def test_valid_add_with_window_is_saved_logged_and_live_at_once(admin_client, redis_server, member):
    assert throttling.check(member, "flag").reason == "unknown_action"  # warms the policy cache
    response = admin_client.post(
        reverse(ADD), policy_form(period=60, max_count=5, windows=[{"period": 3600, "max_count": 3}])
    )
    assert response.status_code == 302, response.context and response.context["adminform"].form.errors
    flag = ActionPolicy.objects.get(action="flag")
    assert flag.windows_display() == "5 per minute, 3 per hour"
    assert LogEntry.objects.filter(object_id=str(flag.pk), action_flag=ADDITION).exists()
    # The hourly window binds first: 3 admitted, then refused, in the same process, no restart.
    decisions = [throttling.check(member, "flag") for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert decisions[-1].limit == 3


def test_edit_is_live_at_once_and_keeps_history(admin_client, redis_server, member):
    reply = ActionPolicy.objects.get(action="reply")
    window = reply.windows.get()
    for _ in range(2):
        assert throttling.check(member, "reply").allowed
    data = policy_form(
        action="reply",
        period=60,
        max_count=3,
        windows=[{"id": window.pk, "policy": reply.pk, "period": 3600, "max_count": 60}],
        initial_windows=1,
    )
    response = admin_client.post(reverse("admin:throttling_actionpolicy_change", args=[reply.pk]), data)
    assert response.status_code == 302
    assert LogEntry.objects.filter(object_id=str(reply.pk), action_flag=CHANGE).exists()
    # Two of the new three are already used.
    assert throttling.check(member, "reply").allowed
    refused = throttling.check(member, "reply")
    assert not refused.allowed and refused.limit == 3


def test_the_period_is_labelled_like_the_fields_beside_it_in_english_and_chinese(admin_client):
    from django.utils import translation

    html = admin_client.get(reverse(ADD)).content.decode()
    assert re.search(r'for="id_period">Period:</label>', html)
    assert re.search(r'for="id_max_count">Maximum in the period:</label>', html)
    with translation.override("zh-hans"):
        chinese = admin_client.get(reverse(ADD), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert re.search(r'for="id_period">周期[:：]</label>', chinese)


def test_action_window_has_no_admin_of_its_own(admin_client):
    from django.contrib import admin

    assert ActionWindow not in admin.site._registry
    assert ActionPolicy in admin.site._registry


# Resetting counters


def test_reset_page_resets_a_members_quota_and_logs_it(admin_client, redis_server, member):
    exhaust(member, "reply")
    exhaust(member, "like")
    response = admin_client.post(reverse(RESET), {"member": "alice", "action": ["reply"]})
    assert response.status_code == 302
    assert has_full_quota(member, "reply")
    assert not throttling.peek(member, "like").allowed  # not chosen, not reset
    exhaust(member, "reply")  # all six are admitted again
    reply = ActionPolicy.objects.get(action="reply")
    entry = LogEntry.objects.get(object_id=str(reply.pk), action_flag=CHANGE)
    assert "alice" in entry.change_message and "reply" in entry.change_message
    assert entry.user.username == "admin"
    assert messages_of(response) == [("success", "The counters of member “alice” were reset for 1 action: reply.")]


def test_reset_all_actions(admin_client, redis_server, member):
    exhaust(member, "reply")
    exhaust(member, "post")
    response = admin_client.post(reverse(RESET), {"member": "alice", "action": ["*"]})
    assert response.status_code == 302
    assert has_full_quota(member, "reply")
    assert has_full_quota(member, "post")
    assert LogEntry.objects.filter(action_flag=CHANGE).count() == 3  # one per policy
    assert "all actions" in messages_of(response)[0][1]


def test_reset_by_ip_address_frees_that_visitor_only(admin_client, redis_server):
    def visitor(address):
        request = RequestFactory().post("/", REMOTE_ADDR=address)
        request.user = AnonymousUser()
        return request

    exhaust(visitor("203.0.113.7"), "reply")
    exhaust(visitor("203.0.113.8"), "reply")
    response = admin_client.post(reverse(RESET), {"member": " 203.0.113.7 ", "action": ["reply"]})
    assert response.status_code == 302
    assert has_full_quota(visitor("203.0.113.7"), "reply")
    assert not throttling.peek(visitor("203.0.113.8"), "reply").allowed
    assert "203.0.113.7" in messages_of(response)[0][1]


def test_reset_by_ipv6_address_frees_its_network(admin_client, redis_server):
    request = RequestFactory().post("/", REMOTE_ADDR="2001:db8:1:2::10")
    request.user = AnonymousUser()
    exhaust(request, "reply")
    # Visitors are counted per /64, so another address of the same network resets it.
    response = admin_client.post(reverse(RESET), {"member": "2001:db8:1:2::99", "action": ["reply"]})
    assert response.status_code == 302
    assert has_full_quota(request, "reply")
    assert "2001:db8:1:2::/64" in messages_of(response)[0][1]


def test_reset_of_an_identity_string_warns_that_no_username_matched(admin_client, redis_server):
    exhaust("api-key:42", "reply")
    response = admin_client.post(reverse(RESET), {"member": "api-key:42", "action": ["reply"]})
    assert response.status_code == 302
    assert has_full_quota("api-key:42", "reply")
    levels = [level for level, _ in messages_of(response)]
    assert levels == ["success", "warning"]


@pytest.mark.parametrize(
    "data, field",
    [
        ({"member": "", "action": ["reply"]}, "member"),
        ({"member": "alice"}, "action"),
        ({"member": "alice", "action": ["*", "reply"]}, "action"),
        ({"member": "alice", "action": ["no-such-action"]}, "action"),
    ],
)
def test_reset_form_errors(admin_client, redis_server, member, data, field):
    exhaust(member, "reply")
    response = admin_client.post(reverse(RESET), data)
    assert response.status_code == 200
    assert field in response.context["form"].errors
    assert not throttling.peek(member, "reply").allowed
    assert not LogEntry.objects.exists()


def test_changelist_action_preselects_the_chosen_policies(admin_client):
    chosen = ActionPolicy.objects.filter(action__in=["like", "reply"])
    response = admin_client.post(
        reverse(CHANGELIST),
        {"action": "reset_counters", "_selected_action": [str(p.pk) for p in chosen]},
    )
    assert response.status_code == 302
    assert response.url == reverse(RESET) + "?action=like&action=reply"
    page = admin_client.get(response.url)
    assert page.status_code == 200
    assert page.context["form"]["action"].value() == ["like", "reply"]
    checkbox = r'<input type="checkbox"[^>]*value="([^"]+)"[^>]*checked'
    assert re.findall(checkbox, page.content.decode()) == ["like", "reply"]
    checked = [w.data["value"] for w in page.context["form"]["action"] if w.data["selected"]]
    assert checked == ["like", "reply"]


def test_non_staff_is_sent_to_login_and_nothing_is_reset(client, redis_server, member):
    client.force_login(member)
    exhaust(member, "reply")
    response = client.post(reverse(RESET), {"member": "alice", "action": ["reply"]})
    assert response.status_code == 302
    assert response.url.startswith(reverse("admin:login"))
    assert not throttling.peek(member, "reply").allowed


def test_staff_without_change_permission_is_refused(client, redis_server, member, django_user_model):
    moderator = django_user_model.objects.create_user("mod", password="pw", is_staff=True)
    moderator.user_permissions.add(Permission.objects.get(codename="view_actionpolicy"))
    client.force_login(moderator)
    exhaust(member, "reply")
    assert client.get(reverse(RESET)).status_code == 403
    assert client.post(reverse(RESET), {"member": "alice", "action": ["reply"]}).status_code == 403
    assert not throttling.peek(member, "reply").allowed
    assert reverse(RESET) not in client.get(reverse(CHANGELIST)).content.decode()

    # With the change permission the same moderator may reset.
    moderator.user_permissions.add(Permission.objects.get(codename="change_actionpolicy"))
    response = client.post(reverse(RESET), {"member": "alice", "action": ["reply"]})
    assert response.status_code == 302
    assert has_full_quota(member, "reply")


def test_redis_outage_during_reset_shows_an_error_not_a_500(admin_client, member, own_redis):
    exhaust(member, "reply")
    own_redis.kill()
    response = admin_client.post(reverse(RESET), {"member": "alice", "action": ["reply"]})
    assert response.status_code == 200
    [(level, text)] = messages_of(response)
    assert level == "error"
    assert "could not be reset" in text and "Redis is unavailable" in text
    assert escape("could not be reset") in response.content.decode()
    assert not LogEntry.objects.exists()
    # Back up (empty, as after a crash): the page works again.
    own_redis.start()
    response = admin_client.post(reverse(RESET), {"member": "alice", "action": ["*"]})
    assert response.status_code == 302
    assert LogEntry.objects.exists()


@pytest.mark.parametrize(
    "typed, seconds", [("90s", 90), ("10m", 600), ("1h", 3600), ("7d", 604800), ("1h 30m", 5400), ("45", 45)]
)
def test_periods_are_typed_as_people_write_them_and_stored_in_seconds(admin_client, typed, seconds):
    response = admin_client.post(reverse(ADD), policy_form(period=typed, windows=[{"period": "1d", "max_count": 50}]))
    assert response.status_code == 302, response.context and response.context["adminform"].form.errors
    flag = ActionPolicy.objects.get(action="flag")
    assert flag.period == seconds
    assert list(flag.windows.values_list("period", flat=True)) == [86400]
    # Shown back the same way for editing.
    page = admin_client.get(reverse("admin:throttling_actionpolicy_change", args=[flag.pk])).content.decode()
    assert 'value="1d"' in page


def test_an_unreadable_period_is_refused_with_an_example(admin_client):
    response = admin_client.post(reverse(ADD), policy_form(period="soon"))
    assert response.status_code == 200
    (error,) = response.context["adminform"].form.errors["period"]
    assert "“90s”" in error and "“10m”" in error
    assert not ActionPolicy.objects.filter(action="flag").exists()


@pytest.mark.parametrize("typed", ["1.5s", "90.7s", "0.5 seconds", "1m 0.25s", "00:01:30.700000"])
def test_a_fractional_period_is_refused_with_a_message_not_rounded(admin_client, typed):
    fraction = f"“{typed}” has a fraction of a second"
    response = admin_client.post(reverse(ADD), policy_form(period=typed))
    assert response.status_code == 200
    (error,) = response.context["adminform"].form.errors["period"]
    assert fraction in error
    response = admin_client.post(reverse(ADD), policy_form(windows=[{"period": typed, "max_count": 50}]))
    assert response.status_code == 200
    assert fraction in str(response.context["inline_admin_formsets"][0].formset.errors)
    assert not ActionPolicy.objects.filter(action="flag").exists()


def test_a_fraction_of_a_larger_unit_that_makes_whole_seconds_is_taken(admin_client):
    response = admin_client.post(reverse(ADD), policy_form(period="1.5m"))
    assert response.status_code == 302
    assert ActionPolicy.objects.get(action="flag").period == 90
