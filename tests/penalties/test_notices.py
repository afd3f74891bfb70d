"""Members see their penalties: each one, a warning included, once on their next page (messages, the
context variable or the template tag), with one indexed query per signed-in page and none for visitors."""

import copy
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from tests.support.penalties import cross
from throttling import penalties
from throttling.common.words import local_time
from throttling.models import Penalty

pytestmark = pytest.mark.urls("tests.support.urlconfs.notices")

NOTICES = "throttling.notices.PenaltyNoticeMiddleware"


@pytest.fixture
def noticed(settings):
    """The site of the README: the notice middleware after Django's messages, and the context processor."""
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, NOTICES]
    templates = copy.deepcopy(settings.TEMPLATES)
    templates[0]["OPTIONS"]["context_processors"].append("throttling.notices.context_processor")
    settings.TEMPLATES = templates
    return settings


def _messages(client):
    return [line.split("|", 1) for line in client.get("/messages/").content.decode().splitlines()]


def _penalty(member, duration, *, action="reply", ago=timedelta(minutes=1), **fields):
    start = timezone.now() - ago
    return Penalty.objects.create(
        user=member, action=action, level=1, starts_at=start, ends_at=start + duration, **fields
    )


@pytest.mark.worker
def test_a_warning_the_ladder_applies_is_shown_once_on_the_next_page(
    noticed, celery_worker, ladder, member, policy, redis_client, browser
):
    policy("reply", 60, 1, offence_threshold=3)
    assert _messages(browser) == []
    warning = cross(member, "reply", redis_client)  # a real worker applied the first rung
    assert warning.is_warning and warning.automatic and warning.noticed_at is None

    [(tags, text)] = _messages(browser)
    assert tags == "throttling-notice warning"
    assert text.startswith(
        "You received a warning for “reply”: nothing is blocked this time, but doing it again may restrict "
        "your account. Reason: "
    )
    assert "refused attempts at “reply” within 10 minutes after being throttled." in text
    assert _messages(browser) == []  # once, not twice
    assert Penalty.objects.get(pk=warning.pk).noticed_at is not None

    # The next rung restricts: shown once too, with its end.
    block = cross(member, "reply", redis_client)
    [(tags, text)] = _messages(browser)
    assert f"Your account is restricted for “reply” until {local_time(block.ends_at)}." in text
    assert _messages(browser) == []


@pytest.mark.django_db
def test_an_expired_restriction_and_an_all_actions_one_are_told_in_their_own_words(noticed, member, browser):
    _penalty(member, timedelta(seconds=30), ago=timedelta(minutes=5), reason="Flooding.")
    block = _penalty(member, timedelta(days=1), action="")
    texts = [text for _tags, text in _messages(browser)]
    assert texts[0].startswith("Your account was restricted for “reply” until ")
    assert texts[0].endswith(" Reason: Flooding.")
    assert texts[1] == f"Your account is restricted for all actions until {local_time(block.ends_at)}."


@pytest.mark.django_db
def test_a_lifted_penalty_is_not_shown_and_a_scheduled_one_waits_for_its_start(noticed, member, browser, ladder):
    block = penalties.apply_penalty(member, level=2, duration=timedelta(minutes=15), action="reply")
    penalties.lift(block, reason="appeal")
    later = _penalty(member, timedelta(hours=1), ago=-timedelta(hours=1))
    assert _messages(browser) == []
    assert Penalty.objects.get(pk=block.pk).noticed_at is not None  # gone from the index
    assert Penalty.objects.get(pk=later.pk).noticed_at is None


@pytest.mark.django_db
def test_the_template_tag_and_the_context_variable_show_each_notice_once(settings, member, browser):
    templates = copy.deepcopy(settings.TEMPLATES)
    templates[0]["OPTIONS"]["context_processors"].append("throttling.notices.context_processor")
    settings.TEMPLATES = templates
    first = _penalty(member, timedelta(0), reason="Too fast.")
    page = browser.get("/tag/").content.decode()
    assert f'<p class="throttling-notice warning" role="status" data-penalty="{first.pk}">' in page
    assert "You received a warning for “reply”" in page and "Reason: Too fast." in page
    assert "throttling-notice" not in browser.get("/tag/").content.decode()

    second = _penalty(member, timedelta(hours=1), action="post")
    page = browser.get("/variable/").content.decode()
    assert "<p class='restricted'>Your account is restricted for “post” until" in page
    assert "<p class" not in browser.get("/variable/").content.decode()
    assert Penalty.objects.get(pk=second.pk).noticed_at is not None


@pytest.mark.django_db
def test_messages_take_the_notices_so_the_tag_does_not_repeat_them(noticed, member, browser):
    _penalty(member, timedelta(0))
    page = browser.get("/tag/")
    assert "throttling-notice" not in page.content.decode()  # handed to the messages framework
    assert len(_messages(browser)) == 1


@pytest.mark.django_db
def test_one_indexed_query_per_signed_in_page_and_none_for_visitors(
    noticed, member, browser, django_assert_num_queries
):
    browser.get("/messages/")  # the session and the user, loaded once for the counts below
    # The session and the user (2), then one query for unseen penalties.
    with django_assert_num_queries(3) as captured:
        browser.get("/variable/")
    [notices_sql] = [q["sql"] for q in captured.captured_queries if "throttling_penalty" in q["sql"]]
    assert '"noticed_at" IS NULL' in notices_sql
    with django_assert_num_queries(0):
        Client().get("/variable/")


@pytest.mark.django_db
def test_the_partial_index_covers_exactly_the_unseen_penalties():
    index = {i.name: i for i in Penalty._meta.indexes}["throttling_penalty_unnoticed"]
    assert index.fields == ["user"]
    assert str(index.condition) == "(AND: ('noticed_at__isnull', True))"
