"""The throttling report in a real browser: headless Debian Chromium driven by Playwright against a live server.

THROTTLING_SCREENSHOTS=docs saves a screenshot of the report page as docs/report.png, and of the 429
page in Chinese on a phone as docs/refusal-zh-390.png.
"""

import pytest
from django.urls import reverse

from tests.support.browser import (
    ACTIONS,
    CHARTS,
    PASSWORD,
    community,
    headless_chromium,
    page_errors,
    page_width,
    screenshot,
    sign_in,
)

pytestmark = pytest.mark.browser


@pytest.mark.django_db(transaction=True)
def test_report_charts_are_drawn_in_chromium(live_server, redis_server, django_user_model):
    moderator = django_user_model.objects.create_superuser("moderator", "mod@example.com", PASSWORD)
    community(django_user_model, moderator)
    report = reverse("admin:throttling_report")

    with headless_chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = page_errors(page)
        sign_in(page, live_server.url, report)
        assert page.locator("h1").inner_text() == "Throttling report"

        for name in CHARTS:
            chart = page.locator(f'svg[data-chart="{name}"]')
            assert chart.count() == 1, name
            assert chart.is_visible(), name
            assert chart.get_attribute("role") == "img"
            box = chart.bounding_box()
            assert box["width"] > 300 and box["height"] > 100, (name, box)
            bars = chart.locator("rect.bar")
            assert bars.count() > 0, name
            drawn = [bars.nth(i).bounding_box() for i in range(bars.count())]
            assert all(b["width"] > 0 and b["height"] > 0 for b in drawn), name
            # Inside the chart: the geometry was computed for the viewBox it is drawn in.
            right, bottom = box["x"] + box["width"] + 0.5, box["y"] + box["height"] + 0.5
            assert all(box["x"] <= b["x"] and b["x"] + b["width"] <= right for b in drawn), name
            assert all(box["y"] <= b["y"] and b["y"] + b["height"] <= bottom for b in drawn), name
            fill = bars.first.evaluate("bar => getComputedStyle(bar).fill")
            assert fill not in ("", "none", "rgb(0, 0, 0)"), (name, fill)

        per_action = page.locator('svg[data-chart="offences-per-action"] rect.bar')
        assert per_action.count() == len(ACTIONS)
        widths = [per_action.nth(i).bounding_box()["width"] for i in range(len(ACTIONS))]
        assert widths == sorted(widths, reverse=True)  # largest first
        assert page.locator("tr.offender").count() == 9  # six members, three addresses
        assert page.locator("tr.in-force").count() == 3
        assert page.locator("#total-lifted").inner_text() == "1"
        assert not errors

        # The report's first screen and a half, as docs/report.png shows it.
        page.set_viewport_size({"width": 1280, "height": 1500})
        screenshot(page, "report.png")

        # A phone: the report reads top to bottom, nothing scrolls sideways.
        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(f"{live_server.url}{report}")
        assert page_width(page) <= 390
        assert page.locator("tr.offender").first.is_visible()
        overflowing = page.evaluate(
            "() => [...document.querySelectorAll('#content-main *')]"
            ".filter(el => el.getBoundingClientRect().right > 391).map(el => el.tagName)"
        )
        assert overflowing == []

        # The penalty list fits a 1280 px screen: every column, "Applied by" included, is on it.
        page.set_viewport_size({"width": 1280, "height": 900})
        page.goto(f"{live_server.url}{reverse('admin:throttling_penalty_changelist')}")
        table = page.locator("#result_list")
        assert table.is_visible()
        assert page_width(page) <= 1280
        right = table.bounding_box()["x"] + table.bounding_box()["width"]
        assert right <= 1280
        headers = [h.strip() for h in table.locator("thead th").all_inner_texts()]
        assert any("Applied by" in h or "applied by" in h.lower() for h in headers), headers


def _refused_reply_page(member, data, language="en"):
    """The 429 page the decorator renders for `member`'s second reply (the policy allows one)."""
    from django.http import HttpResponse
    from django.test import RequestFactory
    from django.utils import translation

    from throttling.decorators import throttle_action

    @throttle_action("reply")
    def reply(request):
        return HttpResponse("saved")

    with translation.override(language):
        for _ in range(2):
            request = RequestFactory().post("/", data)
            request.user = member
            response = reply(request)
        assert response.status_code == 429
        response.render()
    return response.content.decode()


@pytest.mark.django_db
def test_the_429_page_in_chromium_gives_back_what_was_written_on_a_phone_and_a_desktop(redis_server, member, policy):
    """The built-in page, rendered by the decorator, as a browser lays it out."""
    policy("reply", 60, 1, verb="replied")
    html = _refused_reply_page(member, {"body": "A reply I took care over.\nTwo lines.", "password": "hunter2"})

    with headless_chromium() as browser:
        for width in (390, 1280):
            page = browser.new_page(viewport={"width": width, "height": 800})
            page.set_content(html)
            assert page.locator("h1").inner_text() == "Slow down"
            assert "You have replied too often" in page.locator("[role=alert]").inner_text()
            box = page.locator("textarea")
            assert box.is_visible() and box.input_value() == "A reply I took care over.\nTwo lines."
            assert page.locator("label").first.inner_text().startswith("Body")
            assert "hunter2" not in page.content()
            assert page_width(page) <= width
            page.close()


def test_the_429_page_in_chinese_fits_a_phone(redis_server, member, policy):
    """Simplified Chinese wraps differently from English: the page must still fit 390 px."""
    policy("reply", 60, 1, verb="replied")
    html = _refused_reply_page(member, {"body": "我认真写的一条回复。"}, language="zh-hans")
    with headless_chromium() as browser:
        page = browser.new_page(viewport={"width": 390, "height": 800})
        page.set_content(html)
        assert page.locator("h1").inner_text() == "请慢一点"
        assert page.locator("[role=alert]").inner_text().startswith("您回复太频繁了。请在")
        assert page.locator("[name=body]").input_value() == "我认真写的一条回复。"
        assert page_width(page) <= 390
        screenshot(page, "refusal-zh-390.png", full_page=True)
