""" "What would this do?" in a real browser, on the demo's month of history, at 1280 and 390 px.

THROTTLING_SCREENSHOTS=docs saves docs/choosing-limits-1280.png and docs/choosing-limits-390.png.
"""

import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse

import throttling
from demo_site import settings as demo_settings
from tests.support.browser import (
    PASSWORD,
    headless_chromium,
    page_errors,
    page_width,
    past_the_window,
    screenshot,
    sign_in,
)
from tests.support.helpers import ensure_default_ladder
from throttling.admin.report.queries import Period

pytestmark = pytest.mark.browser


def _top_of(panel, height):
    """The clip of the panel's top `height` px in the whole page, scrolled into view first."""
    panel.scroll_into_view_if_needed()
    box = panel.evaluate("el => { const r = el.getBoundingClientRect(); return [r.x, r.y + scrollY, r.width]; }")
    return {"x": box[0], "y": box[1], "width": box[2], "height": height}


@pytest.mark.django_db(transaction=True)
def test_a_moderator_replays_a_draft_and_takes_the_suggestion(
    live_server, redis_server, settings, django_user_model, policy
):
    from playwright.sync_api import expect

    settings.THROTTLING_HISTORY = demo_settings.THROTTLING_HISTORY
    ensure_default_ladder()
    django_user_model.objects.create_superuser("moderator", "mod@example.com", PASSWORD)
    reply = policy("reply", 60, 6, windows=[(3600, 60)], verb="replied")
    call_command("demo_history", stdout=io.StringIO())
    since = Period.last(30).start
    draft = throttling.replay("reply", [(60, 3), (3600, 60)], since=since)
    stands = throttling.replay("reply", since=since)
    change = reverse("admin:throttling_actionpolicy_change", args=[reply.pk])

    with headless_chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = page_errors(page)
        sign_in(page, live_server.url, change)

        # A draft, not saved: 3 a minute instead of 6.
        page.fill("#id_max_count", "3")
        panel = page.locator("#throttling-whatif")
        panel.locator("button[data-days='30']").click()
        expect(panel.locator("#whatif-draft-refused")).to_contain_text(f"{draft.refused:,}", timeout=30_000)
        expect(panel.locator("#whatif-current-refused")).to_contain_text(f"{stands.refused:,}")
        assert draft.refused > stands.refused > 0
        chart = panel.locator('svg[data-chart="whatif-refusals-per-day"]')
        assert chart.is_visible() and chart.locator("rect.bar").count() > 0
        assert panel.locator("tr.busiest-member").count() == 10
        first = panel.locator("tr.busiest-member a").first
        assert first.get_attribute("href").startswith("/admin/throttling/penalty/member/")
        screenshot(panel, "choosing-limits-1280.png")

        # One click copies the suggestion into the form: the main limit and the extra windows.
        windows = json.loads(panel.locator("button.whatif-apply").get_attribute("data-windows"))
        assert [w["period"] for w in windows] == [60, 3600, 86400]
        panel.locator("button.whatif-apply").click()
        expect(panel.locator(".whatif-applied")).to_contain_text("Copied into the form")
        assert page.input_value("#id_period") == "1m" and page.input_value("#id_max_count") == str(windows[0]["max"])
        assert page.input_value("#id_windows-0-period") == "1h"
        assert page.input_value("#id_windows-0-max_count") == str(windows[1]["max"])
        assert page.input_value("#id_windows-1-period") == "1d"
        assert page.input_value("#id_windows-1-max_count") == str(windows[2]["max"])
        assert not errors

        # Saved as copied, the policy holds the suggestion.
        with page.expect_navigation():
            page.click("input[name=_save]")
        assert page.locator(".messagelist .success").count() == 1

        # A phone: the panel reads top to bottom, nothing past the window.
        page.goto(f"{live_server.url}{change}")
        page.set_viewport_size({"width": 390, "height": 844})
        page.fill("#id_max_count", "4")
        panel = page.locator("#throttling-whatif")
        panel.locator("button[data-days='7']").click()
        expect(panel.locator("#whatif-draft-refused")).to_be_visible(timeout=30_000)
        assert page_width(page) <= 390
        assert past_the_window(page, "#throttling-whatif") == []
        assert panel.locator('svg[data-narrow-chart="whatif-refusals-per-day"]').is_visible() or (
            panel.locator(".report-empty").is_visible()
        )
        screenshot(page, "choosing-limits-390.png", full_page=True, clip=_top_of(panel, 1400))
        assert not errors

    reply.refresh_from_db()
    saved = [(reply.period, reply.max_count), *((w.period, w.max_count) for w in reply.windows.order_by("period"))]
    assert saved == [(w["period"], w["max"]) for w in windows]
