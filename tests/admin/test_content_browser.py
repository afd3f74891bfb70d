"""The policy page's fieldset of repeated content, and the 429 of a repeated post, in a real browser at 1280 and 390 px.

THROTTLING_SCREENSHOTS=some/dir saves the pages it looked at (content-<page>-<width>.png).
"""

import pytest
from django.urls import reverse

from bench.content_corpus import BASES
from tests.support.browser import (
    PASSWORD,
    headless_chromium,
    page_errors,
    screenshot,
    session_of,
    sign_in,
    signed_in_page,
)

pytestmark = [pytest.mark.browser, pytest.mark.urls("tests.support.urlconfs.content")]

SPAM = BASES["cash"]["text"]


def _no_sideways_scroll(page):
    return page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth + 1")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width", [1280, 390])
def test_the_fieldset_and_the_refusal_read_well(live_server, redis_server, django_user_model, policy, width):
    django_user_model.objects.create_superuser("moderator", "mod@example.com", PASSWORD)
    member_session = session_of(django_user_model.objects.create_user("member", password=PASSWORD))
    reply = policy(
        "reply", 60, 6, windows=[(3600, 60)], same_content_max=1, same_content_members=5, same_content_period=600
    )
    change = reverse("admin:throttling_actionpolicy_change", args=[reply.pk])

    with headless_chromium() as browser:
        page = browser.new_page(viewport={"width": width, "height": 900})
        errors = page_errors(page)
        sign_in(page, live_server.url, change)
        heading = page.locator("h2", has_text="Repeated content")
        assert heading.is_visible()
        fieldset = page.locator("fieldset.module", has=heading)
        for name in ("same_content_max", "same_content_members", "same_content_period"):
            field = page.locator(f"#id_{name}")
            assert field.is_visible(), name
            box = field.bounding_box()
            assert box["width"] > 40 and box["x"] + box["width"] <= width, (name, box)
        assert page.locator("#id_same_content_period").input_value() == "10m"
        assert "Only hashes of the text are kept" in fieldset.inner_text()
        assert _no_sideways_scroll(page)
        screenshot(fieldset, f"content-fieldset-{width}.png")

        # A moderator's mistake is said beside the field.
        page.fill("#id_same_content_period", "2d")
        page.click("input[name=_continue]")
        error = page.locator(".field-same_content_period .errorlist")
        assert "between 1 second and 1 day" in error.inner_text()

        # The signed-in member's repeated post: the 429 page says it, and gives the text back to edit.
        member = signed_in_page(browser, live_server.url, member_session, width=width)
        member.goto(f"{live_server.url}/content/form/")
        for _ in range(2):
            member.fill("textarea", SPAM)
            with member.expect_navigation():
                member.click("button[type=submit]")
        assert member.locator("h1").inner_text() == "Already posted"
        assert member.title() == "Already posted"
        assert "You have already posted this." in member.content()
        assert "amazing site" in member.locator("textarea").input_value()
        assert _no_sideways_scroll(member)
        screenshot(member, f"content-refusal-{width}.png", full_page=True)
        assert errors == []
