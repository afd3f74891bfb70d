"""The demo: the spammer's wave lands in the review queue; a moderator approves one and rejects the rest in
the admin, in Chromium at 1280 and 390 px.

THROTTLING_SCREENSHOTS=docs saves docs/held-1280.png and docs/held-390.png.
"""

import io

import pytest
from django.core.management import call_command
from django.urls import reverse

from demo_site.models import Reply
from tests.support.browser import PASSWORD, headless_chromium, page_errors, page_width, screenshot, sign_in
from tests.support.helpers import free_port
from throttling.models import Held


def _first_and_last():
    """The primary keys of the first and the last held post (read before the browser's event loop runs)."""
    pks = list(Held.objects.order_by("pk").values_list("pk", flat=True))
    return pks[0], pks[-1]


def play_the_wave(policy):
    policy("reply", 60, 6, verb="replied")  # no limit on repeated content: the command sets one
    out = io.StringIO()
    call_command("demo_wave", "--hold", "--addr", f"127.0.0.1:{free_port()}", stdout=out)
    return out.getvalue()


@pytest.mark.django_db
@pytest.mark.urls("demo_site.urls")
def test_the_wave_lands_in_the_queue_and_the_moderator_decides(redis_server, policy, admin_client):
    played = play_the_wave(policy)
    lines = [line.split()[:3] for line in played.splitlines() if line.startswith("  wave-")]
    assert lines == [
        ["wave-1", "admitted", "201"],
        ["wave-2", "admitted", "201"],
        ["wave-3", "admitted", "201"],
        ["wave-4", "held", "201"],
        ["wave-5", "held", "201"],
        ["wave-6", "held", "201"],
        ["wave-1", "again", "201"],
    ]
    assert "6 admitted, 7 held for review" in played
    held = list(Held.objects.order_by("pk"))
    # The wave's three, the first account's repeat, and the short link post's three.
    assert [h.status for h in held] == ["pending"] * 7
    assert [h.reason for h in held] == ["duplicate"] * 7
    hidden = Reply.objects.filter(is_public=False)
    assert hidden.count() == 7 and Reply.objects.filter(is_public=True).count() == 6
    # Readers of the thread see only what was admitted.
    thread = hidden.first().post
    listed = admin_client.get(reverse("api-replies", args=[thread.pk])).json()
    assert len(listed["results"] if isinstance(listed, dict) else listed) == 6

    changelist = reverse("admin:throttling_held_changelist")
    admin_client.post(changelist, {"action": "approve_held", "_selected_action": [held[0].pk]})
    rest = [h.pk for h in held[1:]]
    admin_client.post(
        changelist, {"action": "reject_held", "_selected_action": rest, "confirm": "yes", "reason": "a spam wave"}
    )
    assert [h.status for h in Held.objects.order_by("pk")] == ["approved"] + ["rejected"] * 6
    assert Reply.objects.filter(is_public=True).count() == 7


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.urls("demo_site.urls")
def test_the_queue_in_a_browser_at_1280_and_390(live_server, redis_server, policy, django_user_model):
    from playwright.sync_api import expect

    play_the_wave(policy)
    django_user_model.objects.create_superuser("moderator", "mod@example.com", PASSWORD)
    changelist = reverse("admin:throttling_held_changelist")
    first, last = (reverse("admin:throttling_held_change", args=[pk]) for pk in _first_and_last())
    with headless_chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        errors = page_errors(page)
        sign_in(page, live_server.url, reverse("admin:app_list", args=["throttling"]))
        expect(page.locator("#held-count")).to_contain_text("7 posts are held for review")
        page.locator("#held-count a").click()
        page.wait_for_url(f"{live_server.url}{changelist}?status__exact=pending")
        rows = page.locator("#result_list tbody tr")
        expect(rows).to_have_count(7)
        listed = page.locator("#result_list").inner_text()
        # The wave's disguised posts and the short link posts, each with its member.
        assert (
            all(name in listed for name in ("wave-1", "wave-4", "wave-6", "link-4", "link-6")) and "pills at" in listed
        )
        assert page.locator("#changelist-filter").is_visible()
        assert page_width(page) <= 1280
        screenshot(page, "held-1280.png", full_page=True)
        page.set_viewport_size({"width": 390, "height": 844})
        page.reload()
        assert page_width(page) <= 390
        screenshot(page, "held-390.png", full_page=True)
        # A pending post's own page on the phone: its Approve and Reject buttons, nothing past the window.
        page.goto(f"{live_server.url}{last}")
        expect(page.locator("form.held-decide button")).to_have_count(2)
        assert page_width(page) <= 390
        screenshot(page, "held-post-390.png", full_page=True)
        page.goto(f"{live_server.url}{changelist}?status__exact=pending")
        page.set_viewport_size({"width": 1280, "height": 800})

        # One approved, the rest rejected: the reject action asks why.
        page.locator("input[name=_selected_action]").first.check()
        page.select_option("select[name=action]", "approve_held")
        with page.expect_navigation():
            page.locator("#changelist-form button[name=index]").first.click()
        expect(page.locator(".messagelist")).to_contain_text("Approved 1 post")
        # The list shows what still waits: the six others.
        expect(rows).to_have_count(6)
        boxes = page.locator("input[name=_selected_action]")
        for i in range(6):
            boxes.nth(i).check()
        page.select_option("select[name=action]", "reject_held")
        with page.expect_navigation():
            page.locator("#changelist-form button[name=index]").first.click()
        page.fill("#id_reason", "a spam wave")
        with page.expect_navigation():
            page.click("input[type=submit][value=Reject]")
        expect(page.locator(".messagelist")).to_contain_text("Rejected 6 posts")

        # One post's own page: what was held, and (decided now) no buttons left to decide it.
        page.goto(f"{live_server.url}{first}")
        assert page.locator("form.held-decide").count() == 0
        assert "wave-" in page.locator("#content").inner_text()
        # Decided, the queue is empty: the app's index no longer counts any post waiting.
        page.goto(f"{live_server.url}{reverse('admin:app_list', args=['throttling'])}")
        assert page.locator("#held-count").count() == 0
        assert not errors
    assert sorted(Held.objects.values_list("status", flat=True)) == ["approved"] + ["rejected"] * 6
