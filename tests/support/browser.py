"""What the browser tests share: the system Chromium, signing in, the checks of a page's width, screenshots,
and a month of a community's offences and penalties.

THROTTLING_SCREENSHOTS=some/folder saves the screenshots the tests take there (docs/ holds the ones the
documentation shows).
"""

import os
import shutil
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.support.report import day_start, penalty
from throttling.engine.identity import member_identity
from throttling.models import OffenceRecord

CHARTS = ("offences-per-day", "offences-per-action", "penalties-per-day")
ACTIONS = ("reply", "post", "like", "flag", "message")

# The moderator's password in the pages the tests sign in to.
PASSWORD = "a long password"
# Every page a person reads is checked on a screen and on a phone: (width, height) in px.
SIZES = ((1280, 900), (390, 844))
NO_SANDBOX = ("--no-sandbox",)
# Chromium quieter than by default: for the tests that open many pages at both sizes.
QUIET_CHROMIUM = (
    *NO_SANDBOX,
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)

# Elements inside `within` that end right of the window and are not inside a box that scrolls sideways
# on its own: the page would have to scroll to show them, or they are cut off.
_OUTSIDE = """within => [...document.querySelectorAll(within + ' *')].filter(el => {
    if (!el.getClientRects().length || el.getBoundingClientRect().right <= innerWidth + 0.5) return false;
    for (let up = el.parentElement; up && up.id !== 'content'; up = up.parentElement) {
        if (['auto', 'scroll'].includes(getComputedStyle(up).overflowX)) return false;
    }
    return true;
}).map(el => `${el.tagName}.${el.className.baseVal ?? el.className} ${el.textContent.trim().slice(0, 30)}`)
"""


def chromium():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail(
            "The browser test needs Chromium on PATH: install Debian's package with "
            "`apt-get update && apt-get install -y chromium` (`make test` does this when run as root)."
        )
    return path


@contextmanager
def headless_chromium(args=NO_SANDBOX):
    """The system Chromium, headless, driven by Playwright: the browser, closed on the way out.

    Playwright's sync API runs an event loop in this thread: a test does its database work before it
    enters, or after it leaves.
    """
    from playwright.sync_api import sync_playwright

    executable = chromium()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=list(args))
        try:
            yield browser
        finally:
            browser.close()


def session_of(member):
    """The value of a session cookie that signs `member` in (database work: before the browser starts)."""
    from django.test import Client

    client = Client()
    client.force_login(member)
    return client.cookies["sessionid"].value


def signed_in_page(browser, base, session, width=1280, height=900):
    """A page of a browser context that sends the session cookie `session` (see session_of) to `base`."""
    context = browser.new_context(viewport={"width": width, "height": height})
    context.add_cookies([{"name": "sessionid", "value": session, "url": base}])
    return context.new_page()


def page_errors(page):
    """The errors the page's scripts throw from now on, collected as they happen."""
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return errors


def sign_in(page, base, next_url, username="moderator", password=PASSWORD):
    """Sign in through the admin's login form, and land on `next_url`."""
    page.goto(f"{base}{reverse('admin:login')}?next={next_url}")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}{next_url}")


def open_admin_page(page, base, url, name):
    """Open an admin page (`name` in what a failure says); None for the override list's confirmation of
    "Revoke selected overrides", which only its action opens."""
    if url is not None:
        response = page.goto(f"{base}{url}")
        assert response.status == 200, (name, url, response.status)
        return
    page.goto(f"{base}{reverse('admin:throttling_memberoverride_changelist')}")
    page.locator("input[name=_selected_action]").first.check()
    page.select_option("select[name=action]", "revoke_overrides")
    with page.expect_navigation():
        page.locator("#changelist-form button[name=index]").first.click()
    assert "revoke-confirmation" in page.locator("body").get_attribute("class"), name


def page_width(page):
    """How wide the page is laid out: wider than the window, and it scrolls sideways."""
    return page.evaluate("document.documentElement.scrollWidth")


def past_the_window(page, within="#content"):
    """The elements inside `within` (a CSS selector) that end right of the window, outside any box that
    scrolls: "tag.class text" of each."""
    return page.evaluate(_OUTSIDE, within)


def screenshot(what, name, **options):
    """`what` (a page or an element) saved as `name` when THROTTLING_SCREENSHOTS names a folder."""
    folder = os.environ.get("THROTTLING_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        what.screenshot(path=os.path.join(folder, name), **options)


def community(django_user_model, moderator):
    """A month of offences by members and anonymous visitors, and penalties of every kind."""
    names = ("alice", "bob", "carol", "dave", "erin", "frank")
    members = [django_user_model.objects.create_user(name) for name in names]
    rows = []

    def offence(identity, action, hour, count, user=None):
        return OffenceRecord(identity=identity, action=action, hour=hour, count=count, user=user)

    for day in range(30):
        for m, user in enumerate(members):
            for a, action in enumerate(ACTIONS):
                n = (day * 7 + m * 5 + a * 3) % 11 - m - a
                if n > 0:
                    n += 4 if day % 9 == 2 else 0  # a bad day now and then
                    rows.append(offence(member_identity(user.pk), action, day_start(day, 9 + a), n, user))
        for v in range(3):
            rows.append(offence(f"ip:198.51.100.{v + 10}", "post", day_start(day, 20), (day + v) % 5 + 1))
    OffenceRecord.objects.bulk_create(rows)
    now, hour = timezone.now(), timedelta(hours=1)
    for day in range(0, 30, 2):
        user = members[day % 3]
        # From yesterday back: today's 10:00 to 14:00 would put these in force (or ahead) for part of
        # the day, and the report would list one more penalty in force than the three below.
        start = day_start(day + 1, 10)
        penalty(user, start, timedelta(0), level=1, action="reply", automatic=True)
        if day % 4 == 0:
            penalty(user, start + hour, timedelta(minutes=15), action="reply", automatic=True)
        if day % 6 == 0:
            penalty(members[3], start + 3 * hour, hour, level=3, action="post")
    penalty(members[0], now - 2 * hour, 24 * hour, level=4, action="reply", automatic=True)
    penalty(members[1], now - 24 * hour, 7 * 24 * hour, level=5, automatic=True)
    penalty(members[3], now - timedelta(minutes=20), hour, level=3, action="post", reason="Spam links.")
    start = day_start(5, 14)
    penalty(
        members[4],
        start,
        hour,
        level=3,
        action="like",
        automatic=True,
        lifted_at=start + timedelta(minutes=10),
        lifted_by=moderator,
        lift_reason="The shared link was fine.",
    )
