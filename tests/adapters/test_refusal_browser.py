"""The refusal page in a real browser: the member edits what they wrote and sends it again after the wait.

THROTTLING_SCREENSHOTS=docs saves docs/refusal-1280.png, docs/refusal-390.png and docs/notice.png (and the
page of fields to fill in again, refill-1280.png and refill-390.png).
"""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from demo_site import settings as demo_settings
from demo_site.models import Post, Reply
from tests.support.browser import headless_chromium, page_width, screenshot, session_of, signed_in_page
from throttling.models import Penalty

pytestmark = [pytest.mark.browser, pytest.mark.urls("demo_site.urls")]

WRITTEN = "Twenty replies a minute is plenty for a person.\nA script gets no further."
EDITED = "Edited on the refusal page: twenty replies a minute is plenty."


def _screenshot(page, name, width, height=900):
    """The page at `width` px (what the test checks next), saved when THROTTLING_SCREENSHOTS names a folder."""
    page.set_viewport_size({"width": width, "height": height})
    screenshot(page, name)


@pytest.mark.django_db(transaction=True)
def test_the_member_edits_the_refused_text_and_sends_it_again_after_the_wait(live_server, redis_server, member, policy):
    policy("reply", 3, 1, verb="replied")
    post = Post.objects.create(author=member, title="Limits", body="How many replies a minute?")
    session = session_of(member)
    url = f"{live_server.url}{post.get_absolute_url()}"

    # Playwright's sync API runs an event loop in this thread: all database work is done before or after it.
    with headless_chromium() as browser:
        page = signed_in_page(browser, live_server.url, session)
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
        assert page_width(page) <= 390  # nothing runs off a phone

        box.fill(EDITED)
        page.wait_for_timeout(wait * 1000)  # the wait the page stated, and not a moment longer
        page.click("form.throttling-resend button[type=submit]")
        page.wait_for_url(f"{url}#reply-*")
        assert EDITED in page.locator(".card p").last.inner_text()
    assert list(Reply.objects.filter(post=post).values_list("body", flat=True)) == ["First!", EDITED]


@pytest.mark.django_db
def test_the_warning_notice_as_a_member_sees_it(member, settings, redis_server):
    """The demo's page with the one-time notice of a warning, drawn by Chromium (docs/notice.png)."""
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

    with headless_chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_content(content)
        notice = page.locator(".messages li.throttling-notice")
        assert notice.is_visible()
        colour = notice.evaluate("li => getComputedStyle(li).backgroundColor")
        assert colour == "rgb(255, 248, 197)"  # the warning's yellow, not the green of good news
        _screenshot(page, "notice.png", 1280, 420)


@pytest.mark.django_db
def test_the_fields_to_fill_in_again_at_1280_and_390_px(member, redis_server, policy):
    """A refusal that could not keep a password and a file: the page names them, with empty boxes."""
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.http import HttpResponse

    from tests.support.refusals import refused_page
    from throttling.decorators import throttle_action

    view = throttle_action("reply")(lambda request: HttpResponse("saved"))
    data = {
        "message": WRITTEN,
        "room": "7",
        "password": "not kept",
        "picture": SimpleUploadedFile("cat.png", b"meow", content_type="image/png"),
    }
    content = refused_page(member, policy, view, data, path="/rooms/7/post/").content.decode()
    with headless_chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_content(content)
        refill = page.locator("form.throttling-resend p.refill")
        assert refill.inner_text() == "Fill these in again, they were not kept: Password, Picture."
        assert page.locator("input[name=password]").input_value() == ""
        assert page.locator("input[name=picture]").get_attribute("type") == "file"
        assert page.locator("textarea[name=message]").input_value() == WRITTEN
        assert page.locator("input[name=room]").get_attribute("type") == "hidden"
        for width in (1280, 390):
            page.set_viewport_size({"width": width, "height": 900})
            screenshot(page, f"refill-{width}.png", full_page=True)
            assert page_width(page) <= width
            box = page.locator("input[name=password]").bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= width
