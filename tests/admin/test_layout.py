"""Every list and change page of the throttling admin fits a 1280 px screen and a phone, in Chromium.

At 1280 × 900 no column of a table is cut off or needs scrolling; at 390 × 844 (a phone) the page
never scrolls sideways (a Django result list or tabular inline may scroll inside its own box, as
Django's admin does), and the report's chart labels are drawn at 11 px or more, each on one line.
A full-page screenshot of every page at both sizes is saved when THROTTLING_SCREENSHOTS names a folder.
"""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone

from tests.support.browser import (
    PASSWORD,
    QUIET_CHROMIUM,
    SIZES,
    community,
    headless_chromium,
    open_admin_page,
    page_errors,
    page_width,
    past_the_window,
    screenshot,
    sign_in,
)
from tests.support.report import penalty
from throttling import penalties
from throttling.models import ActionPolicy, ActionWindow, MemberOverride, PenaltyStep, PolicyTier

pytestmark = pytest.mark.browser

LONG_NAME = "margaret.hamilton-whitfield@example.org"  # a username nothing can break but the layout
# A moderator's reason with a link longer than a phone is wide, and nowhere to break it.
LONG_REASON = "Posted https://example.org/promotions/SpringSaleEverythingMustGoTodayOnlyClickHere0123456789 twice."

# Column headings of the visible tables that end right of what can be seen without scrolling:
# the window, or the box that scrolls (a result list, an inline), whichever is narrower.
HIDDEN_COLUMNS = """() => [...document.querySelectorAll('#content table')].filter(t => t.getClientRects().length)
  .flatMap(table => {
    let right = innerWidth;
    for (let up = table.parentElement; up && up.id !== 'content'; up = up.parentElement) {
        if (getComputedStyle(up).overflowX !== 'visible') right = Math.min(right, up.getBoundingClientRect().right);
    }
    const headings = table.tHead ? [...table.tHead.rows].flatMap(row => [...row.cells]) : [];
    return headings.filter(th => th.getBoundingClientRect().right > right + 0.5)
        .map(th => `${table.id || table.className}: ${th.textContent.trim() || th.className}`);
  })"""

# The labels of the report's charts as drawn: rendered font size (the SVG's scale included), whether
# the label lies inside its chart, and the lines it takes (text in SVG never wraps, HTML labels might).
CHART_LABELS = """() => {
    const labels = [];
    for (const svg of document.querySelectorAll('.report-chart svg')) {
        if (!svg.getClientRects().length) continue;
        const box = svg.getBoundingClientRect(), scale = svg.getScreenCTM().a;
        for (const text of svg.querySelectorAll('text')) {
            const r = text.getBoundingClientRect();
            labels.push({
                chart: svg.dataset.chart || svg.dataset.narrowChart, text: text.textContent,
                px: parseFloat(getComputedStyle(text).fontSize) * scale,
                inside: r.left >= box.left - 0.5 && r.right <= box.right + 0.5 && r.top >= box.top - 0.5
                    && r.bottom <= box.bottom + 0.5,
                lines: 1, left: r.left, right: r.right, top: r.top,
                axis: text.parentElement.classList.contains('x-axis'),
            });
        }
    }
    for (const item of document.querySelectorAll('.report-legend li')) {
        // The lines of its text: the tops of the text's boxes, a line's height apart.
        const walker = document.createTreeWalker(item, NodeFilter.SHOW_TEXT), tops = [];
        while (walker.nextNode()) {
            const range = document.createRange();
            range.selectNodeContents(walker.currentNode);
            tops.push(...[...range.getClientRects()].map(r => r.top));
        }
        const px = parseFloat(getComputedStyle(item).fontSize);
        const lines = tops.sort((a, b) => a - b).filter((top, i) => i === 0 || top - tops[i - 1] > px / 2).length;
        labels.push({chart: 'legend', text: item.textContent.trim(), px, inside: true, lines});
    }
    return labels;
}"""


def layout_data(django_user_model):
    """The report's month of offences and penalties, a long username, policies with windows and
    tiers, overrides, and a penalty with its audit trail: what the admin pages show in real use."""
    moderator = django_user_model.objects.create_superuser("moderator", "mod@example.com", PASSWORD)
    community(django_user_model, moderator)
    long_name = django_user_model.objects.create_user(LONG_NAME, LONG_NAME)
    now = timezone.now()
    for weeks in range(1, 4):
        penalty(
            long_name,
            now - timedelta(weeks=weeks),
            timedelta(minutes=15),
            action="thread-reply",
            automatic=True,
            reason="Posted https://example.org/a/long/link/that/goes/on/and/on?utm_source=spam in every thread",
        )
    applied = penalties.apply_penalty(
        long_name, level=4, duration=timedelta(days=3), action="thread-reply", reason=LONG_REASON, by=moderator
    )
    ActionPolicy.objects.filter(action__in=["reply", "post", "thread-reply"]).delete()
    reply = ActionPolicy.objects.create(action="reply", period=60, max_count=6, verb="replied")
    ActionWindow.objects.create(policy=reply, period=3600, max_count=60)
    ActionPolicy.objects.create(action="post", period=600, max_count=3, on_backend_failure="closed")
    thread = ActionPolicy.objects.create(
        action="thread-reply",
        period=600,
        max_count=10,
        mode="shadow",
        scope="site",
        algorithm="token_bucket",
        description="Replies per member in one thread, beside the per-minute reply limit.",
    )
    PolicyTier.objects.create(
        policy=thread, group=Group.objects.create(name="Trusted members"), multiplier=Decimal("3"), position=1
    )
    override = MemberOverride.objects.create(
        user=long_name,
        action="thread-reply",
        multiplier=Decimal("2.5"),
        created_by=moderator,
        reason="Runs the weekly community Q&A thread and answers dozens of questions in an hour. " + LONG_REASON,
        expires_at=now + timedelta(days=30),
    )
    MemberOverride.objects.create(user=moderator, exempt=True, reason="Moderation account.", created_by=moderator)
    return {
        "policy list": reverse("admin:throttling_actionpolicy_changelist"),
        "policy change": reverse("admin:throttling_actionpolicy_change", args=[thread.pk]),
        "policy with windows": reverse("admin:throttling_actionpolicy_change", args=[reply.pk]),
        "policy add": reverse("admin:throttling_actionpolicy_add"),
        "counter reset": reverse("admin:throttling_actionpolicy_reset"),
        "penalty list": reverse("admin:throttling_penalty_changelist"),
        "penalty change": reverse("admin:throttling_penalty_change", args=[applied.pk]),
        "penalty add": reverse("admin:throttling_penalty_add"),
        "lift confirmation": reverse("admin:throttling_penalty_lift", args=[applied.pk]),
        "member history": reverse("admin:throttling_penalty_member", args=[long_name.pk]),
        "report": reverse("admin:throttling_report"),
        "ladder list": reverse("admin:throttling_penaltystep_changelist"),
        "ladder change": reverse("admin:throttling_penaltystep_change", args=[PenaltyStep.objects.first().pk]),
        "override list": reverse("admin:throttling_memberoverride_changelist"),
        "override change": reverse("admin:throttling_memberoverride_change", args=[override.pk]),
        "override add": reverse("admin:throttling_memberoverride_add"),
        "revoke confirmation": None,  # the list's action "Revoke selected overrides", chosen in the page
    }


@pytest.mark.django_db(transaction=True)
def test_admin_pages_fit_a_desktop_and_a_phone(live_server, redis_server, django_user_model):
    pages = layout_data(django_user_model)
    problems = []

    with headless_chromium(QUIET_CHROMIUM) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = page_errors(page)
        sign_in(page, live_server.url, reverse("admin:index"))

        for width, height in SIZES:
            page.set_viewport_size({"width": width, "height": height})
            for name, url in pages.items():
                open_admin_page(page, live_server.url, url, name)
                assert page.locator("#content").is_visible(), name
                screenshot(page, f"layout-{name.replace(' ', '-')}-{width}.png", full_page=True)
                where = f"{name} at {width} px"

                scroll_width = page_width(page)
                if scroll_width > width:
                    problems.append(f"{where}: the page scrolls sideways ({scroll_width} px wide)")
                outside = past_the_window(page)
                if outside:
                    problems.append(f"{where}: cut off or past the window: {outside[:5]}")
                if width == 1280:
                    hidden = page.evaluate(HIDDEN_COLUMNS)
                    if hidden:
                        problems.append(f"{where}: columns hidden or needing a scroll: {hidden}")
                if name == "report":
                    problems += chart_label_problems(page.evaluate(CHART_LABELS), where)
        assert not errors

    assert not problems, "\n".join(problems)


def chart_label_problems(labels, where):
    drawn = {label["chart"] for label in labels}
    assert {"offences-per-day", "offences-per-action", "penalties-per-day", "legend"} <= drawn, (where, drawn)
    problems = []
    for label in labels:
        if label["px"] < 11:
            problems.append(f"{where}: “{label['text']}” of {label['chart']} is drawn at {label['px']:.1f} px")
        if not label["inside"]:
            problems.append(f"{where}: “{label['text']}” of {label['chart']} is cut off by its chart")
        if label["lines"] != 1:
            problems.append(f"{where}: “{label['text']}” of {label['chart']} is split over {label['lines']} lines")
    # Day labels under the columns must not run into one another.
    for chart in drawn - {"legend"}:
        ticks = sorted((t for t in labels if t["chart"] == chart and t.get("axis")), key=lambda t: t["left"])
        for before, after in zip(ticks, ticks[1:]):
            if after["top"] == before["top"] and after["left"] < before["right"]:
                problems.append(f"{where}: “{before['text']}” and “{after['text']}” of {chart} overlap")
    return problems
