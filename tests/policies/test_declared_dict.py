"""THROTTLING_DEFAULT_POLICIES in its dict form: everything a moderator can set in the admin, declared in code."""

from decimal import Decimal
from io import StringIO

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.test.utils import override_settings

import throttling
from throttling.checks import check_default_policies
from throttling.models import ActionPolicy

REPLY = {
    "rate": "5/m",
    "windows": ["100/d"],
    "verb": "replied",
    "algorithm": "sliding_log",
    "mode": "enforce",
    "scope": "member",
    "tiers": [{"group": "trusted", "multiplier": 2}, {"new_member_days": 7, "multiplier": 0.5}],
    "offence_threshold": 5,
    "same_content": {"max": 1, "period": "10m", "members": 5},
}
DECLARED = {
    "reply-in-forum": REPLY,
    "vote": {"rate": "5000/h", "algorithm": "token_bucket", "mode": "shadow", "scope": "site", "enabled": False},
    "flag": "3/min",
}


def migrate():
    out = StringIO()
    call_command("migrate", verbosity=1, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_migrate_creates_a_row_with_every_declared_value(redis_server, django_user_model):
    with override_settings(THROTTLING_DEFAULT_POLICIES=DECLARED):
        output = migrate()
    assert "Created action policies from THROTTLING_DEFAULT_POLICIES: reply-in-forum, vote, flag." in output
    reply = ActionPolicy.objects.get(action="reply-in-forum")
    assert (reply.period, reply.max_count) == (60, 5)
    assert [(w.period, w.max_count) for w in reply.windows.all()] == [(86400, 100)]
    assert (reply.verb, reply.algorithm, reply.mode, reply.scope, reply.offence_threshold) == (
        "replied",
        "sliding_log",
        "enforce",
        "member",
        5,
    )
    tiers = list(reply.tiers.order_by("position"))
    assert [(t.group.name if t.group else None, t.new_member_days, t.multiplier) for t in tiers] == [
        ("trusted", None, Decimal("2.00")),
        (None, 7, Decimal("0.50")),
    ]
    vote = ActionPolicy.objects.get(action="vote")
    assert (vote.algorithm, vote.mode, vote.scope, vote.enabled, vote.max_count) == (
        "token_bucket",
        "shadow",
        "site",
        False,
        5000,
    )
    assert ActionPolicy.objects.get(action="flag").verb == ""
    assert (reply.same_content_max, reply.same_content_period, reply.same_content_members) == (1, 600, 5)
    assert ActionPolicy.objects.get(action="flag").same_content_period is None

    # The declaration applies: the verb in the refusal, the tier's doubled limit for the trusted group.
    member = django_user_model.objects.create_user("ann")
    trusted = django_user_model.objects.create_user("tim")
    trusted.groups.add(Group.objects.get(name="trusted"))
    member.date_joined = member.date_joined.replace(year=2000)
    member.save()
    refused = [throttling.check(member, "reply-in-forum") for _ in range(6)][-1]
    assert refused.message.startswith("You have replied too often.")
    assert [throttling.check(trusted, "reply-in-forum").allowed for _ in range(11)].count(True) == 10
    # And the repeated-content limit: the same post twice is refused.
    post = "Has anyone tried the new trail above the lake? The map shows a bridge that may be closed."
    newcomer = django_user_model.objects.create_user("nia")
    assert throttling.check(newcomer, "reply-in-forum", content=post).allowed
    assert throttling.check(newcomer, "reply-in-forum", content=post).duplicate == "member"


@pytest.mark.django_db
def test_an_existing_row_is_never_changed_by_the_dict_form(redis_server):
    edited = ActionPolicy.objects.create(action="reply-in-forum", period=3600, max_count=10, verb="posted")
    with override_settings(THROTTLING_DEFAULT_POLICIES=DECLARED):
        migrate()
    row = ActionPolicy.objects.get(action="reply-in-forum")
    assert (row.pk, row.period, row.max_count, row.verb, row.offence_threshold) == (edited.pk, 3600, 10, "posted", None)
    assert not row.tiers.exists() and not row.windows.exists()
    assert not Group.objects.filter(name="trusted").exists()


def test_the_dict_form_passes_the_check(settings):
    settings.THROTTLING_DEFAULT_POLICIES = DECLARED
    assert check_default_policies() == []


@pytest.mark.parametrize(
    "value, expected",
    [
        ({"windows": ["1/d"]}, 'a policy declared as a dict needs a "rate"'),
        ({"rate": "5/m", "verbs": "replied"}, "'verbs' is not something a policy can say; use algorithm, description"),
        (
            {"rate": "5/m", "algorithm": "fixed_window"},
            "algorithm 'fixed_window' is refused: Value 'fixed_window' is not a valid choice.",
        ),
        ({"rate": "5/m", "mode": "loud"}, "mode 'loud' is refused"),
        ({"rate": "5/m", "scope": "planet"}, "scope 'planet' is refused"),
        ({"rate": "5/m", "offence_threshold": -1}, "offence_threshold -1 is refused"),
        ({"rate": "5000/h"}, "'5000/h' is refused: A sliding log allows at most 1,000"),
        ({"rate": "5/m", "windows": "1/fortnight"}, "'1/fortnight' is not a rate"),
        ({"rate": "5/m", "windows": 3}, '"windows" is 3; it must be a list of rates'),
        ({"rate": "5/m", "tiers": {"group": "x"}}, "\"tiers\" is {'group': 'x'}; it must be a list"),
        ({"rate": "5/m", "tiers": ["trusted"]}, "tier 1 is 'trusted'; each tier is a dict"),
        ({"rate": "5/m", "tiers": [{"group": "trusted"}]}, 'tier 1 has no "multiplier"'),
        ({"rate": "5/m", "tiers": [{"multiplier": 2, "groups": "x"}]}, "tier 1 has 'groups'; a tier says group"),
        ({"rate": "5/m", "tiers": [{"group": 3, "multiplier": 2}]}, "tier 1 names the group 3"),
        ({"rate": "5/m", "tiers": [{"multiplier": 500}]}, "tier 1: multiplier Decimal('500') is refused"),
        ({"rate": "5/m", "tiers": [{"multiplier": "lots"}]}, "tier 1: multiplier 'lots' is refused"),
        ({"rate": "5/m", "tiers": [{"new_member_days": 0, "multiplier": 1}]}, "tier 1: new_member_days 0 is refused"),
        ({"rate": "5/m", "same_content": 1}, '"same_content" is 1; it must be a dict such as {"max": 1'),
        ({"rate": "5/m", "same_content": {"max": 1, "time": "1h"}}, "\"same_content\" has 'time'; it says max"),
        ({"rate": "5/m", "same_content": {"max": 1, "period": "a while"}}, "has the period 'a while'; write a length"),
        ({"rate": "5/m", "same_content": {"max": "one", "period": "1h"}}, "has max 'one'; it must be a whole number"),
        (
            {"rate": "5/m", "same_content": {"max": 1}},
            '"same_content" is refused: Give the period in which repeated content counts',
        ),
        (
            {"rate": "5/m", "same_content": {"period": "10m"}},
            "\"same_content\" period '10m' is refused: A period alone limits nothing",
        ),
        ({"rate": "5/m", "same_content": {"max": 50, "period": "10m"}}, '"same_content" max 50 is refused: A member'),
        (
            {"rate": "5/m", "same_content": {"members": 0, "period": "10m"}},
            '"same_content" members 0 is refused: Between 1 and 100',
        ),
        (
            {"rate": "5/m", "same_content": {"max": 1, "period": "2d"}},
            "\"same_content\" period '2d' is refused: The period of repeated content must be between",
        ),
        (
            {"rate": "5/m", "scope": "site", "same_content": {"members": 5, "period": "10m"}},
            "\"same_content\" with the scope 'site' is refused: Repeated content is counted per member",
        ),
    ],
)
def test_e006_says_what_a_dict_gets_wrong_in_a_moderator_s_words(settings, value, expected):
    settings.THROTTLING_DEFAULT_POLICIES = {"reply": value}
    errors = check_default_policies()
    assert errors and all(e.id == "throttling.E006" for e in errors)
    assert any(expected in e.msg for e in errors), [e.msg for e in errors]
    assert all(e.msg.startswith("THROTTLING_DEFAULT_POLICIES['reply']: ") for e in errors)
