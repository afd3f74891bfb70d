"""THROTTLING_MODERATORS: the community's own moderators are exempt where staff are, and use the moderation
pages (penalties, lifting, overrides, the report); throttling.E010 refuses a value that names nobody."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission
from django.urls import reverse

import throttling
from throttling import penalties
from throttling.checks import check_moderators
from throttling.engine.decision import EXEMPT, THROTTLED
from throttling.models import MemberOverride, Penalty

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("redis_server")]

NOT_A_FUNCTION = 42


def moderates_help_desk(user):
    """A site's own rule: members of the "Moderators" group."""
    return user.groups.filter(name="Moderators").exists()


@pytest.fixture
def forum_moderator(django_user_model):
    """A member of the forum's Moderators group: not Django staff, no permission on the throttling models."""
    user = django_user_model.objects.create_user("mia", password="pw")
    user.groups.add(Group.objects.create(name="Moderators"))
    return user


def _decisions(user, n=3):
    return [throttling.check(user, "reply").reason for _ in range(n)]


def test_by_default_staff_are_exempt_and_a_forum_moderator_is_not(policy, forum_moderator, django_user_model):
    policy("reply", 60, 1)
    staff = django_user_model.objects.create_user("sam", is_staff=True)
    assert _decisions(staff) == [EXEMPT] * 3
    assert _decisions(forum_moderator) == ["admitted", THROTTLED, THROTTLED]


@pytest.mark.parametrize(
    "moderators", [moderates_help_desk, "tests.admin.test_moderators.moderates_help_desk", "throttling.moderate"]
)
def test_the_setting_names_who_is_exempt(settings, policy, forum_moderator, django_user_model, moderators):
    if moderators == "throttling.moderate":
        from django.contrib.contenttypes.models import ContentType

        from throttling.models import ActionPolicy

        permission = Permission.objects.create(
            codename="moderate", name="Moderates", content_type=ContentType.objects.get_for_model(ActionPolicy)
        )
        forum_moderator.groups.get().permissions.add(permission)
    settings.THROTTLING_MODERATORS = moderators
    policy("reply", 60, 1)
    assert _decisions(forum_moderator) == [EXEMPT] * 3
    # Django staff who are not the community's moderators are limited like anyone.
    staff = django_user_model.objects.create_user("sam", is_staff=True)
    assert _decisions(staff) == ["admitted", THROTTLED, THROTTLED]
    # A policy that does not exempt staff limits moderators too.
    policy("reply", 60, 1, exempt_staff=False)
    assert _decisions(forum_moderator, 2) == ["admitted", THROTTLED]


def test_a_changed_setting_applies_at_once(settings, policy, forum_moderator):
    policy("reply", 60, 1)
    settings.THROTTLING_MODERATORS = moderates_help_desk
    assert _decisions(forum_moderator, 1) == [EXEMPT]
    settings.THROTTLING_MODERATORS = lambda user: False
    assert _decisions(forum_moderator, 2) == ["admitted", THROTTLED]


# The moderation pages


@pytest.fixture
def staff_moderator(forum_moderator, client, settings):
    """The forum's moderator with is_staff (the admin site lets in only staff) and no model permission."""
    settings.THROTTLING_MODERATORS = moderates_help_desk
    forum_moderator.is_staff = True
    forum_moderator.save()
    client.force_login(forum_moderator)
    return forum_moderator


def test_a_moderator_by_the_setting_reviews_lifts_and_overrides_without_model_permissions(
    staff_moderator, client, member, ladder
):
    block = penalties.apply_penalty(member, level=2, duration=timedelta(minutes=15), action="reply")
    assert client.get(reverse("admin:index")).content.count(b"/admin/throttling/penalty/") >= 1
    assert client.get(reverse("admin:throttling_penalty_changelist")).status_code == 200
    assert client.get(reverse("admin:throttling_penalty_change", args=[block.pk])).status_code == 200
    assert client.get(reverse("admin:throttling_penalty_member", args=[member.pk])).status_code == 200
    assert client.get(reverse("admin:throttling_report")).status_code == 200
    lifted = client.post(reverse("admin:throttling_penalty_lift", args=[block.pk]), {"confirm": "1", "reason": "ok"})
    assert lifted.status_code == 302
    assert Penalty.objects.get(pk=block.pk).lifted_by == staff_moderator
    added = client.post(
        reverse("admin:throttling_memberoverride_add"),
        {"user": member.pk, "action": "reply", "exempt": "on", "reason": "runs the help desk"},
    )
    assert added.status_code == 302 and MemberOverride.objects.get(user=member).created_by == staff_moderator


def test_staff_who_are_not_moderators_by_the_setting_are_kept_out(settings, client, django_user_model, member):
    settings.THROTTLING_MODERATORS = moderates_help_desk
    staff = django_user_model.objects.create_user("sam", is_staff=True)
    staff.user_permissions.add(*Permission.objects.filter(content_type__app_label="throttling"))
    client.force_login(staff)
    assert client.get(reverse("admin:throttling_penalty_changelist")).status_code == 403
    assert client.get(reverse("admin:throttling_report")).status_code == 403
    assert client.get(reverse("admin:throttling_memberoverride_changelist")).status_code == 403
    # Policies and the ladder keep Django's permissions: editing limits is another role.
    assert client.get(reverse("admin:throttling_actionpolicy_changelist")).status_code == 200


# throttling.E010


@pytest.mark.parametrize(
    "value",
    [None, "forum.moderate", moderates_help_desk, "tests.admin.test_moderators.moderates_help_desk"],
)
def test_e010_accepts_a_permission_or_a_function(settings, value):
    settings.THROTTLING_MODERATORS = value
    assert check_moderators() == []


@pytest.mark.parametrize(
    "value, says",
    [
        (42, "THROTTLING_MODERATORS is 42; it must be None, a permission name"),
        ("", "THROTTLING_MODERATORS is ''; it must be None"),
        ("moderate", "THROTTLING_MODERATORS is 'moderate': neither a permission name"),
        ("forum.perms.moderate", "neither a permission name “app_label.codename” nor the dotted path"),
        ("tests.admin.test_moderators.NOT_A_FUNCTION", "which names 42: not a function of the user"),
    ],
)
def test_e010_refuses_what_names_nobody(settings, value, says):
    settings.THROTTLING_MODERATORS = value
    [error] = check_moderators()
    assert error.id == "throttling.E010"
    assert says in error.msg
    assert "forum.moderate" in error.hint
