"""Throttling › Held for review: pending first, filters, the excerpt and links, bulk approve and reject (which
asks why), view vs change permission, the pending count on the app's index, and the alert past a size."""

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from demo_site.models import Post
from throttling.common.choices import HeldStatus
from throttling.models import Alert, Held

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("redis_server")]

CHANGELIST = "/admin/throttling/held/"


def held_posts(member, n, **fields):
    made = []
    for i in range(n):
        post = Post.objects.create(author=member, title=f"Held {i}", body=f"Spam number {i}", is_public=False)
        made.append(
            Held.objects.create(
                user=member,
                identity=f"u:{member.pk}",
                action="post",
                reason="duplicate",
                content_object=post,
                excerpt=f"Spam number {i}",
                hidden={"is_public": True},
                **fields,
            )
        )
    return made


def staff(django_user_model, *codenames):
    user = django_user_model.objects.create_user(f"mod-{'-'.join(codenames) or 'none'}", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="throttling", codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


def test_a_viewer_sees_the_queue_and_cannot_decide(django_user_model, member):
    held = held_posts(member, 2)
    viewer = staff(django_user_model, "view_held")
    page = viewer.get(CHANGELIST)
    assert page.status_code == 200
    text = page.content.decode()
    assert "Spam number 0" in text and "Spam number 1" in text
    assert f"/admin/throttling/penalty/member/{member.pk}/" in text  # the member, linked to their penalty history
    assert "approve_held" not in text and "reject_held" not in text  # no action offered
    refused = viewer.post(CHANGELIST, {"action": "approve_held", "_selected_action": [h.pk for h in held]})
    assert refused.status_code == 403
    assert set(Held.objects.values_list("status", flat=True)) == {HeldStatus.PENDING}


def test_a_superuser_approves_in_bulk(admin_client, member):
    held = held_posts(member, 3)
    page = admin_client.get(CHANGELIST).content.decode()
    for one in held:  # each post linked to its own admin page
        assert f'href="/admin/demo_site/post/{one.object_id}/change/"' in page
    answer = admin_client.post(CHANGELIST, {"action": "approve_held", "_selected_action": [h.pk for h in held[:2]]})
    assert answer.status_code == 302
    statuses = dict(Held.objects.values_list("pk", "status"))
    assert [statuses[h.pk] for h in held] == ["approved", "approved", "pending"]
    assert list(Post.objects.order_by("pk").values_list("is_public", flat=True)) == [True, True, False]


def test_reject_asks_why_then_keeps_them_hidden(admin_client, member):
    held = held_posts(member, 2)
    chosen = {"action": "reject_held", "_selected_action": [h.pk for h in held]}
    asked = admin_client.post(CHANGELIST, chosen)
    assert asked.status_code == 200 and b"Why rejected" in asked.content
    assert set(Held.objects.values_list("status", flat=True)) == {"pending"}
    without = admin_client.post(CHANGELIST, {**chosen, "confirm": "yes", "reason": ""})
    assert without.status_code == 200 and set(Held.objects.values_list("status", flat=True)) == {"pending"}
    done = admin_client.post(CHANGELIST, {**chosen, "confirm": "yes", "reason": "link spam"})
    assert done.status_code == 302
    assert set(Held.objects.values_list("status", "note")) == {("rejected", "link spam")}
    assert not Post.objects.filter(is_public=True).exists()


def test_pending_first_and_the_filters(admin_client, member):
    decided = held_posts(member, 1, status="approved")[0]
    waiting = held_posts(member, 1)[0]
    page = admin_client.get(CHANGELIST)
    rows = list(page.context["cl"].result_list)
    assert rows == [waiting, decided]  # the newer is pending anyway; pending first whatever the age
    Held.objects.filter(pk=decided.pk).update(created_at=waiting.created_at.replace(year=2099))
    rows = list(admin_client.get(CHANGELIST).context["cl"].result_list)
    assert [r.pk for r in rows] == [waiting.pk, decided.pk]
    only = admin_client.get(CHANGELIST, {"status__exact": "approved"})
    assert [r.pk for r in only.context["cl"].result_list] == [decided.pk]
    assert admin_client.get(CHANGELIST, {"reason__exact": "new_member"}).context["cl"].result_count == 0
    assert admin_client.get(CHANGELIST, {"action__exact": "post"}).context["cl"].result_count == 2


def test_the_pending_count_on_the_apps_index(admin_client, member):
    held_posts(member, 3)
    Held.objects.filter(pk=Held.objects.first().pk).update(status="approved")
    page = admin_client.get("/admin/throttling/")
    assert "2 posts are held for review and wait for a moderator." in page.content.decode()


def test_moderators_are_alerted_once_the_queue_passes_its_size(
    settings, member, policy, django_capture_on_commit_callbacks
):
    import throttling

    settings.THROTTLING_HELD_ALERT_SIZE = 2
    policy("post", 60, 10, hold_until_approved=1)
    for n in range(4):
        decision = throttling.check(member, "post")
        post = Post.objects.create(author=member, title="t", body=f"body {n}")
        throttling.hold(decision, post, hide={"is_public": False})
    alerts = list(Alert.objects.filter(kind="held_queue"))
    assert len(alerts) == 1 and alerts[0].params == {"count": 3, "size": 2}
    assert alerts[0].sentence == "3 posts are waiting in Held for review, more than the 2 the queue should hold."


def test_one_post_is_decided_from_its_own_page(admin_client, django_user_model, member):
    waiting, other = held_posts(member, 2)
    page = admin_client.get(f"{CHANGELIST}{waiting.pk}/change/").content.decode()
    assert 'value="approve_held"' in page and 'value="reject_held"' in page
    assert "Spam number 0" in page
    viewer = staff(django_user_model, "view_held")
    assert 'value="approve_held"' not in viewer.get(f"{CHANGELIST}{waiting.pk}/change/").content.decode()
    # The page's Approve button posts the list's action for this post alone.
    answer = admin_client.post(CHANGELIST, {"action": "approve_held", "_selected_action": [waiting.pk], "index": 0})
    assert answer.status_code == 302
    assert dict(Held.objects.values_list("pk", "status")) == {waiting.pk: "approved", other.pk: "pending"}
    assert 'value="approve_held"' not in admin_client.get(f"{CHANGELIST}{waiting.pk}/change/").content.decode()
