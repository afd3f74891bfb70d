"""The ladder: its maths as pure functions, the order of rungs through the real worker, forgiveness,
which refusals may start it (members only, per-policy thresholds and windows)."""

import logging
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db.models import F
from django.test import RequestFactory
from django.test.utils import override_settings
from django.utils import timezone

import throttling
import throttling.engine.decision
import throttling.engine.offences.report_batches
import throttling.engine.refusal_memory
from tests.support.helpers import DEFAULT_LADDER, wait_for
from tests.support.penalties import cross, offences_key, open_run, pending_key, queued, run_together
from throttling import penalties
from throttling.engine.keys import log_keys
from throttling.models import Penalty
from throttling.penalties import Rung, ladder_problems, rung_for
from throttling.tasks import escalate_offender

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
LADDER = [
    Rung(1, "Warning", timedelta(0), False),
    Rung(2, "15 minutes", timedelta(minutes=15), False),
    Rung(3, "1 hour", timedelta(hours=1), False),
    Rung(4, "7 days", timedelta(days=7), True),
]


# --- rung_for and ladder_problems: pure functions ------------------------------


def test_rung_for_climbs_one_rung_per_remembered_strike():
    strikes = []
    levels = []
    for _ in range(4):
        levels.append(rung_for(strikes, LADDER, NOW, 180).level)
        strikes.append(NOW - timedelta(hours=1))
    assert levels == [1, 2, 3, 4]


def test_rung_for_repeats_the_top_rung():
    strikes = [NOW - timedelta(days=d) for d in range(1, 10)]
    assert rung_for(strikes, LADDER, NOW, 180) == LADDER[-1]


def test_rung_for_forgets_strikes_older_than_the_forgiveness_period():
    old = [NOW - timedelta(days=31), NOW - timedelta(days=40)]
    assert rung_for(old, LADDER, NOW, 30).level == 1
    assert rung_for([*old, NOW - timedelta(days=29)], LADDER, NOW, 30).level == 2
    # Exactly on the horizon is forgiven: "older than" includes the boundary itself.
    assert rung_for([NOW - timedelta(days=30)], LADDER, NOW, 30).level == 1
    assert rung_for([NOW - timedelta(days=30) + timedelta(seconds=1)], LADDER, NOW, 30).level == 2


def test_rung_for_reads_the_ladder_by_level_not_by_position():
    shuffled = [LADDER[2], LADDER[0], LADDER[3], LADDER[1]]
    assert rung_for([NOW], shuffled, NOW + timedelta(minutes=1), 180).level == 2


def test_rung_for_an_empty_ladder_is_none():
    assert rung_for([NOW], [], NOW, 180) is None


def test_a_well_formed_ladder_has_no_problems():
    assert ladder_problems(LADDER) == []
    assert ladder_problems([Rung(*row) for row in DEFAULT_LADDER]) == []


def test_ladder_problems_in_words():
    assert ladder_problems([]) == ["The penalty ladder is empty: repeat offenders are only throttled, never penalised."]
    gaps = [LADDER[0], LADDER[1], Rung(5, "7 days", timedelta(days=7), True)]
    assert ladder_problems(gaps) == ["Levels should be numbered 1, 2, 3 … without gaps; they are 1, 2, 5."]
    milder = [LADDER[0], Rung(2, "1 day", timedelta(days=1), False), Rung(3, "1 hour", timedelta(hours=1), False)]
    assert ladder_problems(milder) == ["Level 3 (1 hour) is shorter than level 2 (1 day)."]


# --- The order of rungs, through the real worker ------------------------------------


@pytest.mark.worker
@pytest.mark.urls("tests.support.urlconfs.adapters")
@pytest.mark.django_db(transaction=True)
def test_each_run_climbs_one_rung_and_the_top_repeats(celery_worker, ladder, member, policy, redis_client, client):
    for action in ("reply", "like", "post", "flag", "message"):
        policy(action, 60, 1, offence_threshold=2)

    warning = cross(member, "reply", redis_client)
    assert (warning.level, warning.action, warning.is_warning) == (1, "reply", True)
    assert throttling.check(member, "reply").reason == throttling.engine.decision.THROTTLED  # a warning blocks nothing

    block = cross(member, "reply", redis_client)
    assert (block.level, block.action) == (2, "reply")
    assert block.ends_at - block.starts_at == timedelta(minutes=15)
    assert throttling.check(member, "reply").penalty.level == 2
    assert throttling.check(member, "like").allowed  # only the abused action

    hour = cross(member, "like", redis_client)
    assert (hour.level, hour.action, hour.ends_at - hour.starts_at) == (3, "like", timedelta(hours=1))
    day = cross(member, "post", redis_client)
    assert (day.level, day.action, day.ends_at - day.starts_at) == (4, "post", timedelta(days=1))
    assert throttling.check(member, "message").allowed

    week = cross(member, "flag", redis_client)
    assert (week.level, week.action, week.ends_at - week.starts_at) == (5, "", timedelta(days=7))
    # All actions now, those without a penalty of their own and those with a shorter one.
    for action in ("message", "reply"):
        d = throttling.check(member, action)
        assert (
            d.reason == throttling.engine.decision.PENALISED
            and d.penalty.penalty_id == week.pk
            and d.penalty.all_actions
        )
        assert 7 * 86400 - 60 < d.retry_after <= 7 * 86400
    client.force_login(member)
    page = client.post("/reply/", {"text": "hello"}).content.decode()
    assert "Your account is restricted for all actions until" in page

    # Nothing can be refused into a new run now; the runs of the top rungs come as tasks.
    for run in ("top-1", "top-2"):
        escalate_offender.apply_async(args=(member.pk, "message", run, 2, 600))
        wait_for(lambda: Penalty.objects.filter(crossing=run).exists(), message=f"the penalty of {run}")
    levels = list(Penalty.objects.filter(user=member).order_by("pk").values_list("level", "action"))
    assert levels == [(1, "reply"), (2, "reply"), (3, "like"), (4, "post"), (5, ""), (6, ""), (6, "")]
    tops = Penalty.objects.filter(crossing__in=["top-1", "top-2"])
    assert {p.ends_at - p.starts_at for p in tops} == {timedelta(days=30)}


# --- Forgiveness --------------------------------------------------------------------


@override_settings(THROTTLING_FORGIVENESS_DAYS=1)
def test_forgiveness_in_process(redis_server, ladder, member):
    now = timezone.now()

    def rung(run, at):
        return penalties.escalate(member.pk, "reply", run, 3, 600, now=at).level

    assert rung("f1", now - timedelta(days=3)) == 1
    assert rung("f2", now - timedelta(days=3) + timedelta(hours=1)) == 2
    # Both strikes are more than a day old by now: forgiven.
    assert rung("f3", now - timedelta(hours=1)) == 1
    assert rung("f4", now) == 2
    assert penalties.standing(member)[0] == 2


def test_expired_penalty_still_counts_and_a_lifted_one_does_not(redis_server, ladder, member, admin_user):
    now = timezone.now()
    assert penalties.escalate(member.pk, "reply", "e1", now=now - timedelta(hours=3)).level == 1
    ended = penalties.escalate(member.pk, "reply", "e2", now=now - timedelta(hours=2))
    assert ended.level == 2 and ended.ends_at < now
    assert penalties.record_expiries() == 1
    ended.refresh_from_db()
    assert ended.status == "expired" and ended.expired_at is not None
    third = penalties.escalate(member.pk, "reply", "e3", now=now)
    assert third.level == 3  # the expired one was a strike
    penalties.lift(third, by=admin_user, reason="mistake")
    count, next_rung = penalties.standing(member)
    assert (count, next_rung.level) == (2, 3)
    assert penalties.escalate(member.pk, "reply", "e4").level == 3  # the lifted one was not


def test_the_log_line_of_an_applied_penalty_reads_like_the_ladder_and_names_the_member(
    redis_server, ladder, member, caplog
):
    caplog.set_level(logging.INFO, logger="throttling")
    penalties.escalate(member.pk, "reply", "l1", 3, 600)
    penalties.escalate(member.pk, "reply", "l2", 3, 600)
    lines = [r.getMessage() for r in caplog.records if "ladder rung" in r.getMessage()]
    assert lines == [
        f"throttling: member alice (id {member.pk}) given ladder rung 1, warning only, for “reply”",
        f"throttling: member alice (id {member.pk}) given ladder rung 2, 15 minutes, for “reply”",
    ]


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_worker_forgets_strikes_older_than_180_days(celery_worker, ladder, member, policy, redis_client):
    policy("reply", 60, 1, offence_threshold=2)
    hour = timedelta(hours=1)
    old = penalties.apply_penalty(member, level=3, duration=hour, action="reply", reason="long ago")
    recent = penalties.apply_penalty(member, level=2, duration=hour, action="reply", reason="a while ago")
    Penalty.objects.filter(pk=old.pk).update(
        starts_at=F("starts_at") - timedelta(days=181), ends_at=F("ends_at") - timedelta(days=181)
    )
    Penalty.objects.filter(pk=recent.pk).update(
        starts_at=F("starts_at") - timedelta(days=179), ends_at=F("ends_at") - timedelta(days=179)
    )
    penalties.mirror_members([member.pk])  # both have ended: the member is free
    assert throttling.check(member, "reply").allowed
    # One strike remembered (179 days), one forgiven (181 days): the worker applies rung 2.
    penalty = cross(member, "reply", redis_client)
    assert (penalty.level, penalty.automatic) == (2, True)


# --- Who may start the ladder ------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_anonymous_visitors_are_throttled_but_never_escalated(redis_client, broker, dead_queue, policy):
    policy("reply", 60, 1, offence_threshold=2)
    request = RequestFactory().post("/reply/", REMOTE_ADDR="203.0.113.9")
    request.user = AnonymousUser()
    decisions = [throttling.check(request, "reply") for _ in range(50)]
    decisions += [throttling.check("some-api-key", "reply") for _ in range(50)]
    assert [d.allowed for d in decisions].count(True) == 2
    assert not any(d.escalated for d in decisions)
    throttling.engine.refusal_memory.local_refusals.flush()  # what the background thread does at its next look
    for identity in ("ip:203.0.113.9", decisions[-1].identity):
        _log, offences, _pen, pending = log_keys(identity, "reply")
        assert int(redis_client.get(offences)) == 49  # offences are still counted for the report
        assert not redis_client.exists(pending)
    # The history batch is sent after anything queued before it: once it is at the
    # broker, an escalation would be there too.
    assert throttling.engine.offences.report_batches.buffer.flush() == 98
    wait_for(lambda: queued(broker, dead_queue), timeout=10, message="the history batch")
    assert [name for name, _ in queued(broker, dead_queue)] == ["throttling.tasks.record_offences"]


@pytest.mark.django_db(transaction=True)
def test_policy_threshold_and_window_override_the_site_settings(redis_client, broker, dead_queue, policy, member):
    policy("reply", 60, 1, offence_threshold=3, offence_window=30)
    policy("like", 60, 1, offence_threshold=0)
    policy("post", 60, 1)
    for action in ("reply", "like", "post"):
        assert throttling.check(member, action).allowed

    escalated = [throttling.check(member, "reply").escalated for _ in range(5)]
    assert escalated == [False, False, True, False, False]  # the third, once: the run is pending
    assert 25 <= redis_client.ttl(offences_key(member.pk, "reply")) <= 30

    assert not any(throttling.check(member, "like").escalated for _ in range(100))  # 0: never
    assert not redis_client.exists(pending_key(member.pk, "like"))

    with override_settings(THROTTLING_OFFENCE_THRESHOLD=7, THROTTLING_OFFENCE_WINDOW=45):
        escalated = [throttling.check(member, "post").escalated for _ in range(8)]
    assert escalated.index(True) == 6 and escalated.count(True) == 1
    assert 40 <= redis_client.ttl(offences_key(member.pk, "post")) <= 45

    wait_for(lambda: len(queued(broker, dead_queue)) >= 2, timeout=10, message="two tasks at the broker")
    assert queued(broker, dead_queue) == [
        (
            "throttling.tasks.escalate_offender",
            [member.pk, "reply", redis_client.get(pending_key(member.pk, "reply")).decode(), 3, 30],
        ),
        (
            "throttling.tasks.escalate_offender",
            [member.pk, "post", redis_client.get(pending_key(member.pk, "post")).decode(), 7, 45],
        ),
    ]


def test_the_site_switch_turns_penalties_off(redis_client, policy, member):
    policy("reply", 60, 1, offence_threshold=1)
    with override_settings(THROTTLING_PENALTIES=False):
        throttling.check(member, "reply")
        assert not any(throttling.check(member, "reply").escalated for _ in range(10))
    assert not redis_client.exists(pending_key(member.pk, "reply"))


@pytest.mark.django_db(transaction=True)
def test_with_penalties_off_nothing_is_sent_to_celery(redis_client, broker, dead_queue, policy, member, settings):
    from throttling.engine.background.task_sender import sender
    from throttling.models import Block

    settings.THROTTLING_PENALTIES = False
    policy("reply", 60, 1, offence_threshold=1)
    assert throttling.check(member, "reply").allowed
    assert not any(throttling.check(member, "reply").allowed for _ in range(10))
    # A block's first refusal, and a visitor's refusals, are not sent either.
    Block.objects.create(network="203.0.113.0/24", reason="raid")
    request = RequestFactory().post("/reply/", REMOTE_ADDR="203.0.113.9")
    request.user = AnonymousUser()
    # The block is indexed by a thread of its own once it is committed: live within a second.
    wait_for(lambda: throttling.check(request, "reply").reason == "blocked", timeout=5, message="the block in force")
    throttling.engine.refusal_memory.local_refusals.flush()
    throttling.engine.offences.report_batches.buffer.flush()
    assert sender.join(timeout=10)
    assert queued(broker, dead_queue) == []
    # Nor a replay too long to run in the page.
    from throttling.replayer import jobs

    with pytest.raises(jobs.NotStarted, match="THROTTLING_PENALTIES = False sends nothing to Celery"):
        jobs.start({"action": "reply"}, 10**6)
    assert sender.join(timeout=10)
    assert queued(broker, dead_queue) == []
    # On again, the same refusals reach the broker: the queue is the one this test reads.
    settings.THROTTLING_PENALTIES = True
    assert not throttling.check(member, "reply").allowed
    assert throttling.engine.offences.report_batches.buffer.flush() == 1
    assert sender.join(timeout=10)
    assert "throttling.tasks.record_offences" in [name for name, _ in queued(broker, dead_queue)]


# --- Nothing to apply ------------------------------------------------------------------


def test_an_empty_ladder_only_throttles_and_frees_the_run(redis_client, member):
    from throttling.models import PenaltyStep

    PenaltyStep.objects.all().delete()
    open_run(redis_client, member.pk, "reply", "empty")
    assert penalties.escalate(member.pk, "reply", "empty", 3, 600) is None
    assert not Penalty.objects.exists()
    # Not left pending for ESCALATION_TIMEOUT: the next run may start at once.
    assert not redis_client.exists(pending_key(member.pk, "reply"), offences_key(member.pk, "reply"))
    assert penalties.standing(member) == (0, None)


def test_a_member_deleted_before_the_task_runs(redis_client, ladder, member):
    user_id = member.pk
    open_run(redis_client, user_id, "reply", "gone")
    member.delete()
    assert penalties.escalate(user_id, "reply", "gone", 3, 600) is None
    assert not Penalty.objects.exists()
    assert not redis_client.exists(pending_key(user_id, "reply"), offences_key(user_id, "reply"))


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("local", [True, False], ids=["local refusals", "every refusal to Redis"])
def test_a_member_hammering_from_four_threads_takes_the_same_rungs(
    celery_worker, ladder, member, policy, redis_client, settings, local
):
    """Two runs of a flood, refusals answered from memory or not: the warning, then the 15-minute
    block, each the run's one penalty; and the block refuses every thread until it ends."""
    settings.THROTTLING_LOCAL_REFUSALS = local
    policy("reply", 60, 2)

    def hammer_until_blocked(i):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if throttling.check(member, "reply").reason == throttling.engine.decision.PENALISED:
                return True
            time.sleep(0.001)
        return False

    warning = cross(member, "reply", redis_client)
    assert (warning.level, warning.is_warning) == (1, True)
    assert [outcome for outcome in run_together(4, hammer_until_blocked)] == [(True, None)] * 4
    assert list(Penalty.objects.filter(user=member).order_by("level").values_list("level", flat=True)) == [1, 2]
