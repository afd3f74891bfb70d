"""The refusal page in a real browser: the member edits what they wrote and sends it again after the wait.

THROTTLING_SCREENSHOTS=docs saves docs/refusal-1280.png, docs/refusal-390.png and docs/notice.png.
"""

import os
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from demo_site import settings as demo_settings
from demo_site.models import Post, Reply
from tests.support.browser import chromium
from throttling.models import Penalty

pytestmark = [pytest.mark.browser, pytest.mark.urls("demo_site.urls")]

WRITTEN = "Twenty replies a minute is plenty for a person.\nA script gets no further."
EDITED = "Edited on the refusal page: twenty replies a minute is plenty."


def _screenshot(page, name, width, height=900):
    """The page at `width` px (what the test checks next), saved when THROTTLING_SCREENSHOTS names a folder."""
    page.set_viewport_size({"width": width, "height": height})
    folder = os.environ.get("THROTTLING_SCREENSHOTS")
    if folder:
        page.screenshot(path=os.path.join(folder, name))


@pytest.mark.django_db(transaction=True)
def test_the_member_edits_the_refused_text_and_sends_it_again_after_the_wait(live_server, redis_server, member, policy):
    from playwright.sync_api import sync_playwright

    executable = chromium()
    policy("reply", 3, 1, verb="replied")
    post = Post.objects.create(author=member, title="Limits", body="How many replies a minute?")
    client = Client()
    client.force_login(member)
    session = client.cookies["sessionid"].value
    url = f"{live_server.url}{post.get_absolute_url()}"

    # Playwright's sync API runs an event loop in this thread: all database work is done before or after it.
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.add_cookies([{"name": "sessionid", "value": session, "url": live_server.url}])
            page = context.new_page()
            page.goto(url)
            page.fill("textarea[name=body]", "First!")
            reply = "form[action='%s'] button[type=submit]" % post.get_absolute_url()
            page.click(reply)
            page.fill("textarea[name=body]", WRITTEN)
            with page.expect_response(lambda r: r.request.method == "POST") as answer:
                page.click(reply)
            assert answer.value.status == 429

            # The refusal page: the text, editable, in a form that posts to the same address.
            resend = page.locator("form.throttling-resend")
            assert resend.get_attribute("action") == post.get_absolute_url()
            box = resend.locator("textarea[name=body]")
            assert box.input_value() == WRITTEN and box.is_editable()
            assert resend.locator("input[name=csrfmiddlewaretoken]").count() == 1
            wait = int(page.locator("section.throttled").get_attribute("data-retry-after"))
            assert f"You can send it again in {wait} second" in page.locator("p.when").inner_text()
            assert page.locator("label[for=throttling-field-1]").inner_text() == "Your reply"
            _screenshot(page, "refusal-1280.png", 1280, 640)
            _screenshot(page, "refusal-390.png", 390, 640)
            assert page.evaluate("document.documentElement.scrollWidth") <= 390  # nothing runs off a phone

            box.fill(EDITED)
            page.wait_for_timeout(wait * 1000)  # the wait the page stated, and not a moment longer
            page.click("form.throttling-resend button[type=submit]")
            page.wait_for_url(f"{url}#reply-*")
            assert EDITED in page.locator(".card p").last.inner_text()
        finally:
            browser.close()
    assert list(Reply.objects.filter(post=post).values_list("body", flat=True)) == ["First!", EDITED]


@pytest.mark.django_db
def test_the_warning_notice_as_a_member_sees_it(member, settings, redis_server):
    """The demo's page with the one-time notice of a warning, drawn by Chromium (docs/notice.png)."""
    from playwright.sync_api import sync_playwright

    settings.MIDDLEWARE = demo_settings.MIDDLEWARE
    Post.objects.create(author=member, title="Limits", body="How many replies a minute?")
    start = timezone.now() - timedelta(seconds=5)
    Penalty.objects.create(
        user=member,
        action="reply",
        level=1,
        starts_at=start,
        ends_at=start,
        automatic=True,
        reason_code="offences",
        reason_params={"action": "reply", "offences": 5, "window": 600},
    )
    client = Client()
    client.force_login(member)
    content = client.get("/").content.decode()
    assert content.count("You received a warning for “reply”") == 1
    assert "5 refused attempts at “reply” within 10 minutes after being throttled." in content
    assert "You received a warning" not in client.get("/").content.decode()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_content(content)
            notice = page.locator(".messages li.throttling-notice")
            assert notice.is_visible()
            colour = notice.evaluate("li => getComputedStyle(li).backgroundColor")
            assert colour == "rgb(255, 248, 197)"  # the warning's yellow, not the green of good news
            _screenshot(page, "notice.png", 1280, 420)
        finally:
            browser.close()
