"""The raid pages of the admin in a real browser (headless Debian Chromium, Playwright), at 1280 and 390 px.

THROTTLING_SCREENSHOTS=some/directory saves a screenshot of each page at each width there.
"""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

import throttling
from tests.support.browser import PASSWORD, headless_chromium, page_errors, page_width, screenshot, sign_in
from throttling import raids
from throttling.models import Block, SurgeTrigger

pytestmark = pytest.mark.browser

WIDTHS = (1280, 390)
BAD_IMPORT = "203.0.113.0/24 spam wave\n203.0.113.0/33 typo\nspammers.example.org spam\n198.51.100.0/24"


# The reason column's heading and cells of a list that end right of what can be seen without
# scrolling: the window, or the list's own scrolling box, whichever is narrower.
REASONS_CUT_OFF = """() => {
    const results = document.querySelector('#changelist .results');
    const right = Math.min(innerWidth, results ? results.getBoundingClientRect().right : innerWidth);
    return [...document.querySelectorAll(
        '#result_list .column-reason_short, #result_list .field-reason_short, #result_list .column-reason, #result_list .field-reason'
    )].filter(cell => cell.getBoundingClientRect().right > right + 0.5 || cell.getBoundingClientRect().width < 40)
      .map(cell => cell.textContent.trim());
}"""


def raid(django_user_model, policy):
    """What a moderator sees during a raid: blocks of every kind, a surge on, a trigger, alerts."""
    moderator = django_user_model.objects.create_superuser("moderator", "mod@example.org", PASSWORD)
    member = django_user_model.objects.create_user("sockpuppet-with-a-rather-long-name@example.org")
    post = policy("post", 600, 3)
    SurgeTrigger.objects.create(policy=post, threshold=500, period=60, multiplier=Decimal("0.5"), minutes=30)
    now = timezone.now()
    for network, severity, multiplier, actions, reason, ends in (
        ("203.0.113.0/24", "refuse", None, "", "Sign-up wave from a hosting provider", None),
        ("2001:db8:bad:cafe::/64", "refuse", None, "post,reply", "Same text posted from a hundred addresses", 2),
        ("198.51.100.0/24", "shadow", None, "", "Trying a block of this provider before enforcing it", 24),
        ("192.0.2.0/28", "tighten", Decimal("0.3"), "post", "Noisy office network", None),
        ("192.0.2.77", "loosen", Decimal("3"), "", "A school behind one address", None),
    ):
        Block.objects.create(
            network=network,
            severity=severity,
            multiplier=multiplier,
            actions=actions,
            reason=reason,
            expires_at=now + timedelta(hours=ends) if ends else None,
            created_by=moderator,
        )
    Block.objects.create(user=member, severity="refuse", reason="Sockpuppet of a banned account", created_by=moderator)
    throttling.start_surge(0.5, 120, "Raid on the announcements board", by=moderator)
    raids.tell("block_refused", target="203.0.113.0/24", action="post", reason="Sign-up wave from a hosting provider")
    return moderator


@pytest.mark.django_db(transaction=True)
def test_the_raid_pages_fit_both_widths_and_show_the_banner(live_server, redis_server, django_user_model, policy):
    raid(django_user_model, policy)
    pages = {
        "blocks": reverse("admin:throttling_block_changelist"),
        "block-add": reverse("admin:throttling_block_add"),
        "import": reverse("admin:throttling_block_import"),
        "surges": reverse("admin:throttling_surge_changelist"),
        "surge-add": reverse("admin:throttling_surge_add"),
        "surge-end": reverse("admin:throttling_surge_end"),
        "triggers": reverse("admin:throttling_surgetrigger_changelist"),
        "alerts": reverse("admin:throttling_alert_changelist"),
        "policies": reverse("admin:throttling_actionpolicy_changelist"),
    }

    with headless_chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = page_errors(page)
        sign_in(page, live_server.url, pages["blocks"])
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            for name, url in pages.items():
                page.goto(f"{live_server.url}{url}")
                banner = page.locator("#surge-banner")
                assert banner.is_visible(), (name, width)
                assert "Every limit is multiplied by 0.5 until" in banner.inner_text()
                assert banner.bounding_box()["width"] <= width, (name, width)
                # Nothing scrolls sideways on a phone; on a screen every column of a list shows.
                assert page_width(page) <= width, (name, width)
                if name in ("blocks", "surges"):
                    # The reason, free text a moderator wrote, is read in full on a phone too.
                    assert page.locator("#result_list .column-reason_short, #result_list .column-reason").count() == 1
                    assert page.evaluate(REASONS_CUT_OFF) == [], (name, width)
                screenshot(page, f"{name}-{width}.png", full_page=True)
            page.goto(f"{live_server.url}{pages['blocks']}")
            assert page.locator("#result_list tbody tr").count() == 6
            assert page.locator("#result_list tbody tr").first.is_visible()
            # The import with bad lines: each named, what was pasted kept.
            page.goto(f"{live_server.url}{pages['import']}")
            page.fill("textarea[name=lines]", BAD_IMPORT)
            page.click("input[type=submit]")
            errors_shown = page.locator(".field-lines .errorlist li")
            assert errors_shown.count() == 3
            assert "Line 2:" in errors_shown.nth(0).inner_text()
            assert page.locator("textarea[name=lines]").input_value() == BAD_IMPORT
            assert page_width(page) <= width
            screenshot(page, f"import-errors-{width}.png", full_page=True)
        assert not errors
    assert Block.objects.count() == 6  # the bad import created nothing
