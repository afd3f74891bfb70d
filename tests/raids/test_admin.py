"""The admin against a raid: blocks one by one and in bulk, the surge banner on every page of the app."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import AnonymousUser, Permission
from django.core.exceptions import ValidationError
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone

import throttling
from tests.support.helpers import messages_of
from throttling import raids
from throttling.models import Alert, Block, Surge, SurgeTrigger

pytestmark = pytest.mark.django_db

IMPORT = "admin:throttling_block_import"
GOOD = """# raid of the 26th
203.0.113.0/24 spam wave
2001:db8:bad::/48   spam wave, IPv6

198.51.100.7
"""


def test_pasted_lines_become_blocks_with_who_and_why(redis_server, admin_client, admin_user, policy):
    policy("reply", 60, 5)
    response = admin_client.post(
        reverse(IMPORT),
        {"lines": GOOD, "severity": "refuse", "actions": "reply", "lasts": "2 days", "default_reason": "known spammer"},
    )
    assert response.status_code == 302, response.content.decode()
    assert ("success", "Imported 3 blocks.") in messages_of(response)
    blocks = {b.network: b for b in Block.objects.all()}
    assert set(blocks) == {"203.0.113.0/24", "2001:db8:bad::/48", "198.51.100.7/32"}
    assert blocks["2001:db8:bad::/48"].reason == "spam wave, IPv6"
    assert blocks["198.51.100.7/32"].reason == "known spammer"
    assert {b.created_by for b in blocks.values()} == {admin_user}
    assert {b.actions for b in blocks.values()} == {"reply"}
    assert all(b.expires_at is not None for b in blocks.values())
    # Live at once.
    request = RequestFactory().post("/", REMOTE_ADDR="198.51.100.7")
    request.user = AnonymousUser()
    assert throttling.check(request, "reply").reason == "blocked"


def test_bad_lines_are_each_named_and_nothing_is_imported(admin_client):
    text = "\n".join(
        [
            "203.0.113.0/24 spam wave",
            "203.0.113.0/33 typo",
            "",
            "spammers.example.org spam",
            "203.0.113.0/24 the same range again",
            "198.51.100.0/24",
            "::ffff:192.0.2.0/120 mapped",
            "10.1.2.3/8 host bits",
            "0.0.0.0/0 everyone",
        ]
    )
    response = admin_client.post(reverse(IMPORT), {"lines": text, "severity": "refuse"})
    html = response.content.decode()
    assert response.status_code == 200
    assert "Nothing was imported." in html
    errors = response.context["form"].errors["lines"]
    assert errors == [
        "Line 2: “203.0.113.0/33” is not an IPv4 or IPv6 address or range (write it as 203.0.113.0/24 or 2001:db8::/48).",
        "Line 4: “spammers.example.org” is not an IPv4 or IPv6 address or range (write it as 203.0.113.0/24 or 2001:db8::/48).",
        "Line 5: 203.0.113.0/24 is already on line 1.",
        "Line 6: 198.51.100.0/24 has no reason; write one after it, or fill in the default reason.",
        "Line 7: “::ffff:192.0.2.0/120” is an IPv4 range written as IPv6: write it as IPv4, e.g. 192.0.2.0/24.",
        "Line 8: “10.1.2.3/8” has bits set after its prefix: did you mean 10.0.0.0/8?",
        "Line 9: “0.0.0.0/0” is wider than a block may be (an IPv4 /8 at most, THROTTLING_BLOCK_WIDEST): "
        "it would hold far more visitors than a raid's.",
    ]
    assert "spammers.example.org spam" in html  # what was pasted comes back to be mended
    assert not Block.objects.exists()


def test_the_import_checks_the_severity_and_its_multiplier(admin_client):
    response = admin_client.post(reverse(IMPORT), {"lines": "203.0.113.0/24 x", "severity": "tighten"})
    assert response.context["form"].errors["multiplier"] == [
        "Tightening multiplies every limit by a number below 1, e.g. 0.5 halves it."
    ]
    response = admin_client.post(
        reverse(IMPORT), {"lines": "203.0.113.0/24 x", "severity": "loosen", "multiplier": "3", "actions": "Post"}
    )
    assert "“Post” is not an action name" in response.context["form"].errors["actions"][0]
    assert not Block.objects.exists()


def test_import_blocks_in_code_raises_with_every_problem(redis_server):
    with pytest.raises(ValidationError) as caught:
        raids.import_blocks("203.0.113.0/24 a\nnope b\n10.0.0.0/8", severity="refuse")
    assert caught.value.messages == [
        "Line 2: “nope” is not an IPv4 or IPv6 address or range (write it as 203.0.113.0/24 or 2001:db8::/48).",
        "Line 3: 10.0.0.0/8 has no reason; write one after it, or fill in the default reason.",
    ]
    assert not Block.objects.exists()
    made = raids.import_blocks("203.0.113.0/24 a\n10.0.0.0/8", severity="shadow", default_reason="trial")
    assert [(b.network, b.reason, b.severity) for b in made] == [
        ("203.0.113.0/24", "a", "shadow"),
        ("10.0.0.0/8", "trial", "shadow"),
    ]


def test_a_block_is_checked_before_it_is_saved(admin_client, member):
    add = reverse("admin:throttling_block_add")
    cases = [
        ({"network": "203.0.113.0/24", "user": member.get_username()}, "Give an address range or a member, not both."),
        ({}, "Give an address range or a member."),
        ({"network": "203.0.113.0/24", "severity": "tighten", "multiplier": "1.5"}, "below 1"),
        ({"network": "203.0.113.0/24", "severity": "refuse", "multiplier": "0.5"}, "leave it empty"),
        ({"network": "203.0.113.0/24", "reason": "  "}, "Say why, for the record (members never see it)."),
    ]
    for fields, message in cases:
        data = {"severity": "refuse", "reason": "spam", "actions": "", **fields}
        response = admin_client.post(add, data)
        assert response.status_code == 200, fields
        assert message in response.content.decode(), fields
    assert not Block.objects.exists()
    response = admin_client.post(add, {"network": "203.0.113.0/24", "severity": "refuse", "reason": "spam"})
    assert response.status_code == 302
    assert Block.objects.get().network == "203.0.113.0/24"


def test_a_block_is_refused_what_no_moderator_means(admin_client, policy):
    policy("reply", 60, 5)
    policy("post", 60, 5)
    add = reverse("admin:throttling_block_add")
    past = timezone.localtime() - timedelta(hours=1)
    cases = [
        ({"network": "10.1.2.3/8"}, "did you mean 10.0.0.0/8?"),
        ({"network": "0.0.0.0/0"}, "wider than a block may be"),
        ({"network": "::/0"}, "wider than a block may be"),
        ({"network": "203.0.113.0/24", "actions": "reply, replyy"}, "No policy has the action “replyy”"),
        (
            {"network": "203.0.113.0/24", "expires_at_0": past.date().isoformat(), "expires_at_1": past.time()},
            "That time has passed",
        ),
    ]
    for fields, message in cases:
        data = {"severity": "refuse", "reason": "spam", "actions": "", **fields}
        response = admin_client.post(add, data)
        assert response.status_code == 200, fields
        assert message in response.content.decode(), fields
    assert not Block.objects.exists()


def test_the_member_of_a_block_is_picked_by_name(admin_client, django_user_model):
    alice = django_user_model.objects.create_user("alice")
    add = reverse("admin:throttling_block_add")
    page = admin_client.get(add).content.decode()
    assert (
        'name="user"' in page and "vManyToManyRawIdAdminField" not in page and "vForeignKeyRawIdAdminField" not in page
    )
    response = admin_client.post(add, {"user": "nobody", "severity": "refuse", "reason": "spam", "actions": ""})
    assert "No member is named “nobody”." in response.content.decode()
    response = admin_client.post(add, {"user": "alice", "severity": "refuse", "reason": "spam", "actions": ""})
    assert response.status_code == 302
    block = Block.objects.get()
    assert block.user == alice
    # Its page shows the name again, not a number.
    change = admin_client.get(reverse("admin:throttling_block_change", args=[block.pk])).content.decode()
    assert 'value="alice"' in change


def test_a_staff_member_without_permissions_may_not_import_or_end_surges(redis_server, client, django_user_model):
    clerk = django_user_model.objects.create_user("clerk", is_staff=True)
    client.force_login(clerk)
    assert client.get(reverse(IMPORT)).status_code == 403
    assert client.post(reverse("admin:throttling_surge_end"), {"reason": "x"}).status_code == 403
    clerk.user_permissions.add(Permission.objects.get(codename="add_block"))
    assert client.get(reverse(IMPORT)).status_code == 200


def test_a_policy_gets_a_surge_trigger(admin_client, policy):
    p = policy("post", 60, 5)
    data = {"policy": p.pk, "threshold": 500, "period": 60, "multiplier": "0.5", "minutes": 30, "enabled": "on"}
    response = admin_client.post(reverse("admin:throttling_surgetrigger_add"), data)
    assert response.status_code == 302, response.context and response.context["errors"]
    trigger = SurgeTrigger.objects.get()
    assert (trigger.policy, trigger.threshold, trigger.period, trigger.multiplier) == (p, 500, 60, Decimal("0.5"))
    # One per policy, and a surge tightens.
    again = admin_client.post(reverse("admin:throttling_surgetrigger_add"), {**data, "multiplier": "2"})
    html = again.content.decode()
    assert "Surge trigger with this Policy already exists." in html
    assert "A surge tightens: give a multiplier from 0.01 to 0.99" in html


def test_the_alerts_are_listed_for_the_record(redis_server, admin_client):
    raids.tell("block_refused", target="203.0.113.0/24", action="post", reason="spam wave")
    page = admin_client.get(reverse("admin:throttling_alert_changelist")).content.decode()
    assert "The block of 203.0.113.0/24 refused its first request, at “post”. Its reason: spam wave" in page
    assert admin_client.get(reverse("admin:throttling_alert_add")).status_code == 403
    assert Alert.objects.count() == 1


def test_the_lists_of_blocks_and_surges_filter_what_is_in_force(redis_server, admin_client):
    now = timezone.now()
    Block.objects.create(network="203.0.113.0/24", reason="in force")
    Block.objects.create(network="198.51.100.0/24", reason="expired", expires_at=now - timedelta(hours=1))
    Surge.objects.create(multiplier=Decimal("0.5"), reason="on", ends_at=now + timedelta(minutes=30))
    Surge.objects.create(multiplier=Decimal("0.5"), reason="over", ends_at=now - timedelta(minutes=1))
    Surge.objects.create(
        multiplier=Decimal("0.5"), reason="ended early", ends_at=now + timedelta(minutes=30), ended_at=now
    )

    def listed(name, **query):
        return sorted(row.reason for row in admin_client.get(reverse(name), query).context["cl"].result_list)

    assert listed("admin:throttling_block_changelist", in_force="yes") == ["in force"]
    assert listed("admin:throttling_block_changelist", in_force="no") == ["expired"]
    assert listed("admin:throttling_block_changelist") == ["expired", "in force"]
    assert listed("admin:throttling_surge_changelist", on="yes") == ["on"]
    assert listed("admin:throttling_surge_changelist", on="no") == ["ended early", "over"]
    assert listed("admin:throttling_surge_changelist") == ["ended early", "on", "over"]


def app_pages(member, policy):
    """Every kind of page of the app's admin, with what each needs to exist."""
    p = policy("reply", 60, 5)
    block = Block.objects.create(network="203.0.113.0/24", reason="spam")
    names = [
        ("admin:app_list", ["throttling"]),
        ("admin:throttling_actionpolicy_changelist", []),
        ("admin:throttling_actionpolicy_change", [p.pk]),
        ("admin:throttling_actionpolicy_add", []),
        ("admin:throttling_actionpolicy_delete", [p.pk]),
        ("admin:throttling_actionpolicy_history", [p.pk]),
        ("admin:throttling_actionpolicy_reset", []),
        ("admin:throttling_block_changelist", []),
        ("admin:throttling_block_change", [block.pk]),
        ("admin:throttling_block_import", []),
        ("admin:throttling_surge_changelist", []),
        ("admin:throttling_surge_add", []),
        ("admin:throttling_surgetrigger_changelist", []),
        ("admin:throttling_surgetrigger_add", []),
        ("admin:throttling_alert_changelist", []),
        ("admin:throttling_penalty_changelist", []),
        ("admin:throttling_penalty_add", []),
        ("admin:throttling_report", []),
        ("admin:throttling_penalty_member", [member.pk]),
        ("admin:throttling_penaltystep_changelist", []),
        ("admin:throttling_memberoverride_changelist", []),
        ("admin:throttling_memberoverride_add", []),
    ]
    return [reverse(name, args=args) for name, args in names]


def test_every_page_of_the_app_says_a_surge_is_on_and_no_other_page_does(redis_server, admin_client, member, policy):
    pages = app_pages(member, policy)
    for url in pages:
        response = admin_client.get(url)
        assert response.status_code == 200, url
        assert 'id="surge-banner"' not in response.content.decode(), url
    throttling.start_surge(0.5, 120, "raid on the announcements board")
    for url in [*pages, reverse("admin:throttling_surge_end")]:
        html = admin_client.get(url).content.decode()
        assert html.count('id="surge-banner"') == 1, url
        assert "Every limit is multiplied by 0.5 until" in html, url
        assert "Reason: raid on the announcements board" in html, url
        assert reverse("admin:throttling_surge_end") in html, url
    for url in (
        reverse("admin:index"),
        reverse("admin:auth_user_changelist"),
        reverse("admin:app_list", args=["auth"]),
    ):
        assert 'id="surge-banner"' not in admin_client.get(url).content.decode(), url
