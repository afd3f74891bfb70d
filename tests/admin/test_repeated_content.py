"""The policy admin's fieldset of repeated content: typed as people write it, refused in a moderator's words, live at once."""

import re

import pytest
from django.urls import reverse
from django.utils.html import escape

import throttling
from tests.admin.test_admin import ADD, RESET, policy_form
from throttling.models import ActionPolicy
from throttling.models.content import (
    MEMBERS_MESSAGE,
    NEEDS_LIMIT_MESSAGE,
    NEEDS_PERIOD_MESSAGE,
    PERIOD_MESSAGE,
    REPEATS_MESSAGE,
    SITE_WIDE_MESSAGE,
)

pytestmark = pytest.mark.django_db

SPAM = "Cheap meds without a prescription, shipped in discreet packages to any country within five days."


def fieldsets(response):
    return {str(fs.name): list(fs.fields) for fs in response.context["adminform"]}


def test_the_fields_have_a_fieldset_of_their_own(admin_client):
    response = admin_client.get(reverse(ADD))
    assert fieldsets(response)["Repeated content"] == [
        "same_content_max",
        "same_content_members",
        "same_content_period",
    ]
    html = response.content.decode()
    assert "<h2" in html and "Repeated content" in html
    assert "Only hashes of the text are kept, never the text." in html
    assert 'name="same_content_period"' in html


def test_the_page_says_in_words_what_makes_a_wave_with_the_sites_setting(admin_client, settings):
    html = admin_client.get(reverse(ADD)).content.decode()
    assert escape("a post without one only from 12 words") in html
    assert escape("A post with a link, an address or a mention makes a wave however short it is") in html
    settings.THROTTLING_CONTENT_WAVE_WORDS = 20
    assert escape("only from 20 words") in admin_client.get(reverse(ADD)).content.decode()
    settings.LANGUAGE_CODE = "zh-hans"
    settings.THROTTLING_CONTENT_WAVE_WORDS = 1
    html = admin_client.get(reverse(ADD), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "要达到 1 个词才算" in html


def test_a_policy_limiting_repeated_content_is_saved_from_typed_lengths_and_live_at_once(
    admin_client, redis_server, member
):
    assert throttling.check(member, "flag").reason == "unknown_action"  # warms the policy cache
    data = policy_form(same_content_max="1", same_content_members="3", same_content_period="10m")
    response = admin_client.post(reverse(ADD), data)
    assert response.status_code == 302, response.context and response.context["adminform"].form.errors
    flag = ActionPolicy.objects.get(action="flag")
    assert (flag.same_content_max, flag.same_content_members, flag.same_content_period) == (1, 3, 600)
    assert throttling.check(member, "flag", content=SPAM).allowed
    assert throttling.check(member, "flag", content=SPAM).message == "You have already posted this."
    # Shown again as typed.
    page = admin_client.get(reverse("admin:throttling_actionpolicy_change", args=[flag.pk])).content.decode()
    assert re.search(r'name="same_content_period"[^>]*value="10m"', page)


def test_the_reset_page_forgets_a_members_posts_under_a_wave_limit(admin_client, redis_server, member, policy):
    # On one server the member's own posts are kept in the wave's index, among other members'.
    policy("flag", 60, 5, same_content_max=1, same_content_members=3, same_content_period=600)
    assert throttling.check(member, "flag", content=SPAM).allowed
    assert throttling.check(member, "flag", content=SPAM).message == "You have already posted this."
    response = admin_client.post(reverse(RESET), {"member": "alice", "action": ["flag"]})
    assert response.status_code == 302
    assert throttling.check(member, "flag", content=SPAM).allowed


@pytest.mark.parametrize(
    "fields, field, message",
    [
        ({"same_content_max": "1"}, "same_content_period", NEEDS_PERIOD_MESSAGE),
        ({"same_content_members": "5"}, "same_content_period", NEEDS_PERIOD_MESSAGE),
        ({"same_content_period": "10m"}, "same_content_period", NEEDS_LIMIT_MESSAGE),
        ({"same_content_max": "0", "same_content_period": "10m"}, "same_content_max", REPEATS_MESSAGE),
        ({"same_content_max": "-1", "same_content_period": "10m"}, "same_content_max", REPEATS_MESSAGE),
        ({"same_content_max": "21", "same_content_period": "10m"}, "same_content_max", REPEATS_MESSAGE),
        ({"same_content_members": "101", "same_content_period": "10m"}, "same_content_members", MEMBERS_MESSAGE),
        ({"same_content_max": "1", "same_content_period": "2d"}, "same_content_period", PERIOD_MESSAGE),
        ({"same_content_max": "1", "same_content_period": "0"}, "same_content_period", PERIOD_MESSAGE),
        ({"same_content_members": "5", "same_content_period": "10m", "scope": "site"}, "scope", SITE_WIDE_MESSAGE),
    ],
)
def test_a_bad_limit_is_refused_in_a_moderators_words(admin_client, fields, field, message):
    response = admin_client.post(reverse(ADD), policy_form(**fields))
    assert response.status_code == 200
    form = response.context["adminform"].form
    assert form.errors[field] == [str(message)]
    assert escape(str(message)) in response.content.decode()
    assert not ActionPolicy.objects.filter(action="flag").exists()


def test_an_unreadable_period_is_refused_with_an_example(admin_client):
    response = admin_client.post(reverse(ADD), policy_form(same_content_max="1", same_content_period="a while"))
    assert response.status_code == 200
    assert "Type a period such as" in response.context["adminform"].form.errors["same_content_period"][0]


def test_the_table_refuses_what_the_form_would(db):
    from django.db import IntegrityError, transaction

    for fields in ({"same_content_max": 50}, {"same_content_members": 0}, {"same_content_period": 2 * 86400}):
        with pytest.raises(IntegrityError), transaction.atomic():
            ActionPolicy.objects.filter(action="reply").update(**fields)
