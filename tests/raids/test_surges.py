"""Surge mode: every limit tightened by the API, by the admin or by a policy's trigger, until it ends."""

import time
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

import throttling
from tests.support.helpers import Monitor, deciding_connections, messages_of, wait_for
from throttling import raids
from throttling.engine.countermeasures.in_force import measures
from throttling.engine.countermeasures.surge_state import site_estimate
from throttling.models import Surge, SurgeTrigger

pytestmark = pytest.mark.django_db


def test_start_surge_tightens_every_limit_and_end_surge_puts_them_back(redis_server, policy, member):
    policy("reply", 60, 10, windows=[(3600, 100)])
    policy("thread", 60, 200, scope="site")
    surge = throttling.start_surge(0.5, 120, "raid on the announcements board")
    assert (surge.multiplier, surge.reason, surge.started_by) == (
        Decimal("0.50"),
        "raid on the announcements board",
        None,
    )
    assert surge.ends_at - surge.started_at == timedelta(minutes=120)
    reply = throttling.check(member, "reply")
    assert reply.windows == ((60, 5), (3600, 50))
    assert throttling.check("visitor", "reply").limit == 5  # visitors too
    assert throttling.check(member, "thread").limit == 100  # and site-wide counts
    ended = throttling.end_surge(reason="the raid is over")
    assert [s.pk for s in ended] == [surge.pk]
    surge.refresh_from_db()
    assert surge.ended_at is not None and surge.end_reason == "the raid is over"
    assert throttling.check(member, "reply").limit == 10
    assert throttling.end_surge() == []  # nothing left to end


def test_a_surge_for_some_actions_leaves_the_others(redis_server, policy):
    policy("reply", 60, 10)
    policy("post", 60, 10)
    throttling.start_surge(0.3, 30, "spam in new threads", actions=["post"])
    assert throttling.check("v", "post").limit == 3
    assert throttling.check("v", "reply").limit == 10


def test_two_surges_do_not_add_up_the_smallest_multiplier_applies(redis_server, policy):
    policy("reply", 60, 20)
    throttling.start_surge(0.5, 30, "first wave")
    throttling.start_surge(0.25, 30, "second wave", actions="reply")
    assert throttling.check("v", "reply").limit == 5


def test_staff_exempt_from_a_policy_stay_exempt_during_a_surge(redis_server, policy, admin_user):
    policy("reply", 60, 10)
    throttling.start_surge(0.5, 30, "raid")
    assert throttling.check(admin_user, "reply").reason == "exempt"


def test_a_surge_ends_on_time_without_a_task(redis_server, policy):
    policy("reply", 60, 10)
    surge = throttling.start_surge(0.5, 30, "raid")
    assert throttling.check("v", "reply").limit == 5
    Surge.objects.filter(pk=surge.pk).update(ends_at=timezone.now() + timedelta(seconds=0.5))
    measures.changed()
    assert throttling.check("v", "reply").limit == 5
    time.sleep(0.6)
    assert throttling.check("v", "reply").limit == 10


@pytest.mark.parametrize(
    "args, field",
    [
        ((1, 30, "raid"), "multiplier"),
        ((0, 30, "raid"), "multiplier"),
        (("half", 30, "raid"), "multiplier"),
        ((0.5, 0, "raid"), "minutes"),
        ((0.5, 10081, "raid"), "minutes"),
        ((0.5, 1.5, "raid"), "minutes"),
        ((0.5, 30, "  "), "reason"),
    ],
)
def test_a_surge_out_of_range_is_refused_with_a_message(args, field):
    with pytest.raises(ValidationError) as caught:
        throttling.start_surge(*args)
    assert field in caught.value.message_dict
    assert not Surge.objects.exists()


def test_bad_action_names_are_refused(redis_server):
    with pytest.raises(ValidationError) as caught:
        throttling.start_surge(0.5, 30, "raid", actions="post, Reply!")
    assert "“Reply!” is not an action name" in caught.value.message_dict["actions"][0]


def test_the_admin_starts_a_surge_with_who_and_why_and_ends_it(redis_server, policy, admin_client, admin_user):
    policy("reply", 60, 10)
    add = reverse("admin:throttling_surge_add")
    response = admin_client.post(
        add, {"multiplier": "0.5", "lasts": "2 hours", "actions": "", "reason": "raid on the announcements board"}
    )
    assert response.status_code == 302, response.content.decode()
    surge = Surge.objects.get()
    assert surge.started_by == admin_user and surge.reason == "raid on the announcements board"
    assert surge.ends_at - surge.started_at == timedelta(hours=2)
    assert throttling.check("v", "reply").limit == 5
    # The banner's button: a page asking why, then every surge ends.
    end = reverse("admin:throttling_surge_end")
    assert "Reason for ending it now" in admin_client.get(end).content.decode()
    refused = admin_client.post(end, {"reason": ""})
    assert "Say why the surge ends early" in refused.content.decode()
    assert Surge.objects.in_force().exists()
    response = admin_client.post(end, {"reason": "calm again"})
    assert response.status_code == 302
    assert ("success", "Ended 1 surge: the limits are back in every process within a second.") in messages_of(response)
    surge.refresh_from_db()
    assert (surge.ended_by, surge.end_reason) == (admin_user, "calm again")
    assert throttling.check("v", "reply").limit == 10


def test_the_admin_refuses_a_surge_out_of_range(admin_client):
    response = admin_client.post(
        reverse("admin:throttling_surge_add"), {"multiplier": "1.5", "lasts": "8 days", "actions": "", "reason": ""}
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "A surge tightens: give a multiplier from 0.01 to 0.99" in html
    assert "A surge lasts at most 7 days" in html
    assert not Surge.objects.exists()


def test_the_admin_list_action_ends_the_selected_surges(redis_server, admin_client):
    first = throttling.start_surge(0.5, 30, "first wave")
    second = throttling.start_surge(0.5, 30, "second wave")
    changelist = reverse("admin:throttling_surge_changelist")
    data = {"action": "end_surges", "_selected_action": [first.pk]}
    assert "Reason for ending it now" in admin_client.post(changelist, data).content.decode()
    admin_client.post(changelist, {**data, "confirm": "yes", "reason": "handled"})
    assert list(Surge.objects.in_force()) == [second]


def test_surges_are_never_edited_or_deleted_in_the_admin(redis_server, admin_client):
    surge = throttling.start_surge(0.5, 30, "raid")
    page = admin_client.get(reverse("admin:throttling_surge_change", args=[surge.pk])).content.decode()
    assert 'name="_save"' not in page
    assert admin_client.post(reverse("admin:throttling_surge_delete", args=[surge.pk])).status_code == 403


def test_the_estimate_weighs_the_previous_window_by_what_is_left_of_it():
    assert site_estimate(10, 0, 0, 60) == 10
    assert site_estimate(10, 100, 0, 60) == 110  # the previous window is wholly inside the last period
    assert site_estimate(10, 100, 30_000, 60) == 60  # half of it is
    assert site_estimate(10, 100, 60_000, 60) == 10


def test_a_trigger_starts_one_surge_however_often_it_is_asked(redis_server, policy):
    p = policy("post", 60, 100)
    trigger = SurgeTrigger.objects.create(policy=p, threshold=5, period=60, multiplier=Decimal("0.5"), minutes=30)
    surge = raids.start_triggered_surge(trigger.pk, 7)
    assert raids.start_triggered_surge(trigger.pk, 9) is None
    assert (surge.trigger, surge.started_by, surge.actions) == (trigger, None, "")
    assert surge.reason == "“post” passed 5 in 60 seconds across the site (about 7)."
    trigger.enabled = False
    trigger.save()
    throttling.end_surge(surge)
    assert raids.start_triggered_surge(trigger.pk, 9) is None


def test_trigger_counts_reach_redis_from_the_background_thread_only(redis_server, redis_client, policy):
    p = policy("post", 60, 100)
    SurgeTrigger.objects.create(policy=p, threshold=50, period=60, multiplier=Decimal("0.5"), minutes=30)
    throttling.peek("warm-up", "post")  # a peek is not the action
    with Monitor(redis_server.url) as monitor:
        for i in range(6):
            throttling.check(f"member-{i}", "post")
    assert monitor.sent_by(deciding_connections()) == ["EVALSHA"] * 6  # counted in the process
    key = throttling.engine.keys.trigger_counts_key("post")
    measures.flush()  # or the background thread's look did it already
    assert sum(int(v) for v in redis_client.hgetall(key).values()) == 6
    assert not redis_client.exists(throttling.engine.keys.trigger_claim_key("post"))  # 6 is not past 50


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_policy_starts_a_surge_when_its_action_passes_the_threshold(redis_server, policy, celery_worker):
    p = policy("post", 60, 100)
    policy("reply", 60, 10)
    trigger = SurgeTrigger.objects.create(
        policy=p, threshold=5, period=60, multiplier=Decimal("0.5"), minutes=20, this_action_only=False
    )
    for i in range(5):
        assert throttling.check(f"member-{i}", "post").limit == 100
    measures.flush()  # 5 is not past 5
    throttling.check("member-5", "post")
    measures.flush()  # what the background thread does at its next look
    surge = wait_for(lambda: Surge.objects.filter(trigger=trigger).first(), message="the trigger's surge")
    assert surge.multiplier == Decimal("0.5") and surge.actions == ""
    assert surge.ends_at - surge.started_at == timedelta(minutes=20)
    # Every process reloads within a second; this one at once, on the marker's message.
    wait_for(lambda: throttling.check("v", "reply").limit == 5, message="the surge in this process")
    # More posts while it is on start nothing more.
    for i in range(10):
        throttling.check(f"member-{i}", "post")
    measures.flush()
    time.sleep(0.5)
    assert Surge.objects.count() == 1
