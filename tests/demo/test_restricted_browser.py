"""A restricted member's post page in a real browser: no reply form, but when they may reply again, on a
desktop and on a phone. Screenshots of both are saved when THROTTLING_SCREENSHOTS names a folder."""

from datetime import timedelta

import pytest

from demo_site import settings as demo_settings
from demo_site.models import Post
from tests.support.browser import headless_chromium, page_width, screenshot, session_of, signed_in_page
from throttling import penalties
from throttling.common.words import local_time

pytestmark = [pytest.mark.browser, pytest.mark.urls("demo_site.urls")]


@pytest.mark.django_db(transaction=True)
def test_a_restricted_member_reads_when_they_may_reply_again_instead_of_a_form(
    live_server, redis_server, member, policy, ladder, settings
):
    settings.LANGUAGES = demo_settings.LANGUAGES  # the demo's language menu, as the demo has it

    policy("reply", 60, 5, verb="replied")
    post = Post.objects.create(author=member, title="Limits", body="How many replies a minute?")
    block = penalties.apply_penalty(member, level=2, duration=timedelta(minutes=15), action="reply", reason="Spam.")
    session = session_of(member)

    with headless_chromium() as browser:
        page = signed_in_page(browser, live_server.url, session)
        page.goto(f"{live_server.url}{post.get_absolute_url()}")
        for width in (1280, 390):
            page.set_viewport_size({"width": width, "height": 900})
            screenshot(page, f"restricted-{width}.png", full_page=True)
            assert page.locator("textarea[name=body]").count() == 0
            assert page.locator("button[type=submit]", has_text="Post reply").count() == 0
            closed = page.locator("#reply-closed")
            assert closed.is_visible()
            assert closed.inner_text() == (
                f"You can reply again from {local_time(block.ends_at)}, when the restriction ends."
            )
            assert page_width(page) <= width
