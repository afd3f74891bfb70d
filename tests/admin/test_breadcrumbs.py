"""The app's own admin pages (report, lift, member history, counter reset, revoke, block import, surge end) show their breadcrumbs as
Django's own pages do on the running release, in Chromium: the same markup, look and separators as a
stock changelist's, at 1280 px and on a phone. Screenshots of every trail are saved when THROTTLING_SCREENSHOTS names a folder."""

from datetime import timedelta

import pytest
from django.urls import reverse

import throttling
from tests.support.browser import (
    PASSWORD,
    QUIET_CHROMIUM,
    SIZES,
    headless_chromium,
    open_admin_page,
    screenshot,
    sign_in,
)
from throttling import penalties
from throttling.models import MemberOverride

pytestmark = pytest.mark.browser

# The trail as drawn: its element, its look, and its text with the separators a reader sees (Django
# 6.1 draws them with CSS after each crumb but the current one; older releases write them).
TRAIL = """() => {
    const trail = document.querySelector('nav[aria-label] .breadcrumbs');
    if (!trail) return null;
    const style = getComputedStyle(trail), link = trail.querySelector('a'), box = trail.getBoundingClientRect();
    const after = el => (getComputedStyle(el, '::after').content.match(/^"(.*?)"/) || [, ''])[1];
    const shown = trail.tagName === 'OL'
        ? [...trail.children].map(li => li.innerText.trim() + (after(li).trim() ? ` ${after(li).trim()} ` : '')).join('')
        : trail.innerText;
    return {
        tag: trail.tagName, background: style.backgroundColor, color: style.color, padding: style.padding,
        margin: style.margin, listStyle: style.listStyleType, linkColor: getComputedStyle(link).color,
        fontSize: getComputedStyle(link).fontSize, height: Math.round(box.height), left: Math.round(box.left),
        width: Math.round(box.width), shown: shown.replace(/\\s+/g, ' ').trim(),
        title: (document.querySelector('#content h1') || {innerText: ''}).innerText.trim(),
    };
}"""

LOOK = ("tag", "background", "color", "padding", "margin", "listStyle", "linkColor", "fontSize", "left", "width")


def pages(django_user_model):
    moderator = django_user_model.objects.create_superuser("moderator", "mod@example.com", PASSWORD)
    member = django_user_model.objects.create_user("alice")
    penalty = penalties.apply_penalty(
        member, level=2, duration=timedelta(minutes=15), action="reply", reason="Flooding.", by=moderator
    )
    MemberOverride.objects.create(user=member, exempt=True, reason="Runs the Q&A thread.", created_by=moderator)
    throttling.start_surge(0.5, 30, "Raid on the front page", by=moderator)  # the end page needs one on
    return {
        "report": (reverse("admin:throttling_report"), "Penalties"),
        "lift confirmation": (reverse("admin:throttling_penalty_lift", args=[penalty.pk]), "Penalties"),
        "member history": (reverse("admin:throttling_penalty_member", args=[member.pk]), "Penalties"),
        "counter reset": (reverse("admin:throttling_actionpolicy_reset"), "Action policies"),
        "revoke confirmation": (None, "Member overrides"),
        "block import": (reverse("admin:throttling_block_import"), "Blocks"),
        "surge end": (reverse("admin:throttling_surge_end"), "Surges"),
    }


@pytest.mark.django_db(transaction=True)
def test_the_apps_own_pages_draw_their_breadcrumbs_as_djangos_own_pages_do(
    live_server, redis_server, django_user_model
):
    to_open = pages(django_user_model)
    stock_url = reverse("admin:auth_user_changelist")  # a page Django draws alone
    problems = []

    with headless_chromium(QUIET_CHROMIUM) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        sign_in(page, live_server.url, reverse("admin:index"))
        for width, height in SIZES:
            page.set_viewport_size({"width": width, "height": height})
            open_admin_page(page, live_server.url, stock_url, "stock")
            stock = page.evaluate(TRAIL)
            screenshot(page.locator("nav[aria-label] .breadcrumbs"), f"breadcrumbs-stock-{width}.png")
            assert stock is not None and stock["shown"].startswith("Home › "), stock
            for name, (url, models) in to_open.items():
                open_admin_page(page, live_server.url, url, name)
                trail = page.evaluate(TRAIL)
                where = f"{name} at {width} px"
                if trail is None:
                    problems.append(f"{where}: no breadcrumbs in Django's breadcrumbs block")
                    continue
                screenshot(
                    page.locator("nav[aria-label] .breadcrumbs"), f"breadcrumbs-{name.replace(' ', '-')}-{width}.png"
                )
                for key in LOOK:
                    if trail[key] != stock[key]:
                        problems.append(f"{where}: {key} is {trail[key]!r}, Django's own page has {stock[key]!r}")
                crumbs = trail["shown"].split(" › ")
                if crumbs[:3] != ["Home", "Throttling", models] or crumbs[-1] != trail["title"]:
                    problems.append(f"{where}: the trail reads {trail['shown']!r}")

    assert not problems, "\n".join(problems)
