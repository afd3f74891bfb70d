"""Each admin action of the app against each permission level, through the real admin and Redis."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.core.exceptions import PermissionDenied
from django.test import RequestFactory
from django.urls import reverse

import throttling
from throttling import penalties
from throttling.admin.policies.override import MemberOverrideAdmin
from throttling.models import ActionPolicy, MemberOverride, Penalty

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("redis_server")]

# A permission level: the permissions a staff member holds on the model the action is about.
LEVELS = {
    "none": (),
    "view": ("view",),
    "add": ("add",),
    "change": ("change",),
    "lift": ("lift",),
    "view+lift": ("view", "lift"),
}
SELF_GRANT = "You cannot grant yourself an override"


@pytest.fixture
def moderator(django_user_model, client):
    """Factory: a logged-in staff member holding `level` on `model` of the throttling app, nothing else."""

    def make(model, level):
        user = django_user_model.objects.create_user("mod", password="pw", is_staff=True)
        codenames = ["lift_penalty" if p == "lift" else f"{p}_{model}" for p in LEVELS[level]]
        user.user_permissions.add(
            *Permission.objects.filter(content_type__app_label="throttling", codename__in=codenames)
        )
        client.force_login(user)
        return user

    return make


# Revoking an override: the change permission


@pytest.mark.parametrize("level", LEVELS)
def test_revoking_an_override_needs_the_change_permission(client, moderator, member, admin_user, level):
    override = MemberOverride.objects.create(user=member, exempt=True, reason="runs the help desk")
    moderator("memberoverride", level)
    changelist = reverse("admin:throttling_memberoverride_changelist")
    chosen = {"action": "revoke_overrides", "_selected_action": [override.pk]}
    confirm = client.post(changelist, chosen)
    done = client.post(changelist, {**chosen, "confirm": "yes", "reason": "left the team"})
    override.refresh_from_db()
    if level == "change":
        assert b"Reason for revoking" in confirm.content
        assert done.status_code == 302 and override.revoke_reason == "left the team"
        assert not override.in_force
    else:
        assert confirm.status_code == done.status_code == 403
        assert override.revoked_at is None and override.in_force


@pytest.mark.parametrize("level", ["view", "change"])
def test_the_revoke_action_is_offered_only_with_the_change_permission(client, moderator, member, level):
    MemberOverride.objects.create(user=member, exempt=True, reason="runs the help desk")
    moderator("memberoverride", level)
    page = client.get(reverse("admin:throttling_memberoverride_changelist"))
    assert page.status_code == 200
    assert ('value="revoke_overrides"' in page.content.decode()) is (level == "change")


# Lifting a penalty: the lift permission, and seeing the penalty


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("how", ["list action", "lift button"])
def test_lifting_a_penalty_needs_the_lift_permission_and_sight_of_the_penalty(client, moderator, member, level, how):
    penalty = penalties.apply_penalty(member, level=2, duration=timedelta(hours=1), action="reply", reason="flood")
    moderator("penalty", level)
    data = {"confirm": "yes", "reason": "my mistake"}
    if how == "list action":
        url = reverse("admin:throttling_penalty_changelist")
        data |= {"action": "lift_penalties", "_selected_action": [penalty.pk]}
    else:
        url = reverse("admin:throttling_penalty_lift", args=[penalty.pk])
    response = client.post(url, data)
    penalty.refresh_from_db()
    if level == "view+lift":
        assert response.status_code == 302
        assert penalty.lifted_at is not None and throttling.check(member, "reply").penalty is None
    else:
        assert response.status_code == 403
        assert penalty.lifted_at is None and throttling.check(member, "reply").penalty is not None


# Resetting counters: the change permission on policies


@pytest.mark.parametrize("level", LEVELS)
def test_resetting_counters_needs_the_change_permission_on_policies(client, moderator, member, level):
    for _ in range(ActionPolicy.objects.get(action="reply").max_count):
        throttling.check(member, "reply")
    assert not throttling.peek(member, "reply").allowed
    moderator("actionpolicy", level)
    response = client.post(reverse("admin:throttling_actionpolicy_reset"), {"member": "alice", "action": ["reply"]})
    if level == "change":
        assert response.status_code == 302 and throttling.peek(member, "reply").allowed
    else:
        assert response.status_code == 403 and not throttling.peek(member, "reply").allowed


# Adding a penalty or an override: the add permission


@pytest.mark.parametrize("level", LEVELS)
def test_adding_a_penalty_needs_the_add_permission(client, moderator, member, level):
    moderator("penalty", level)
    response = client.post(
        reverse("admin:throttling_penalty_add"),
        {"user": str(member.pk), "action": "reply", "rung": "", "duration": "1 hour", "reason": "spamming links"},
    )
    if level == "add":
        assert response.status_code == 302 and throttling.check(member, "reply").penalty is not None
    else:
        assert response.status_code == 403
        assert not Penalty.objects.exists() and throttling.check(member, "reply").penalty is None


def override_form(user, **fields):
    return {"user": str(user.pk), "action": "", "exempt": "on", "multiplier": "", "reason": "trusted"} | fields


@pytest.mark.parametrize("level", LEVELS)
def test_adding_an_override_needs_the_add_permission(client, moderator, member, level):
    mod = moderator("memberoverride", level)
    response = client.post(reverse("admin:throttling_memberoverride_add"), override_form(member))
    if level == "add":
        assert response.status_code == 302
        override = MemberOverride.objects.get()
        assert (override.user, override.created_by) == (member, mod)
    else:
        assert response.status_code == 403 and not MemberOverride.objects.exists()


# Nobody grants themself an override


@pytest.mark.parametrize("fields", [{}, {"exempt": "", "multiplier": "5", "action": "reply"}])
def test_a_moderator_cannot_grant_themself_an_override(client, moderator, member, policy, fields):
    policy("reply", 60, 1, exempt_staff=False)
    mod = moderator("memberoverride", "add")
    response = client.post(reverse("admin:throttling_memberoverride_add"), override_form(mod, **fields))
    assert response.status_code == 200
    (error,) = response.context["adminform"].form.errors["user"]
    assert SELF_GRANT in error
    assert SELF_GRANT in response.content.decode()
    assert not MemberOverride.objects.exists()
    throttling.check(mod, "reply")
    assert not throttling.check(mod, "reply").allowed
    # Granting it to someone else is what the permission is for.
    assert client.post(reverse("admin:throttling_memberoverride_add"), override_form(member)).status_code == 302


def test_a_superuser_cannot_grant_themself_an_override_either(admin_client, admin_user):
    response = admin_client.post(reverse("admin:throttling_memberoverride_add"), override_form(admin_user))
    assert response.status_code == 200
    assert SELF_GRANT in str(response.context["adminform"].form.errors["user"])
    assert not MemberOverride.objects.exists()


def test_a_save_through_the_admin_refuses_an_override_for_the_moderator(admin_user):
    # Whatever form a site puts in front of it, the admin's save refuses a self-grant.
    model_admin = MemberOverrideAdmin(MemberOverride, None)
    request = RequestFactory().post("/")
    request.user = admin_user
    with pytest.raises(PermissionDenied):
        model_admin.save_model(request, MemberOverride(user=admin_user, exempt=True, reason="me"), None, False)
    assert not MemberOverride.objects.exists()
