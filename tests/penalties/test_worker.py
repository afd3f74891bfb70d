"""The escalation task is idempotent: duplicate deliveries, concurrent calls, a worker killed
mid-task, Redis down while it runs. Real worker processes, the Redis broker, committed rows."""

import os
import re
import signal
import time
import uuid

import pytest
import redis
from django.db import OperationalError

import throttling
import throttling.engine.decision
from tests.support.helpers import wait_for
from tests.support.penalties import Signals, offences_key, open_run, pending_key, run_together
from throttling import penalties
from throttling import signals as throttling_signals
from throttling.exceptions import BackendError
from throttling.models import Penalty, PenaltyEvent
from throttling.tasks import escalate_offender

pytestmark = pytest.mark.django_db(transaction=True)


def escalate_like_the_task(*args, attempts=20):
    """penalties.escalate, retried on OperationalError as escalate_offender's autoretry does.

    SQLite answers two writers that both began reading with "database is locked"
    instead of waiting; PostgreSQL waits on the member's row lock instead.
    """
    for attempt in range(attempts):
        try:
            return penalties.escalate(*args)
        except OperationalError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.05 * (attempt + 1))


def succeeded(worker, task_id):
    """The return value the worker logged for a task, or None while it has not succeeded."""
    match = re.search(rf"\[{task_id}\] succeeded in [0-9.e-]+s: (\S+)", worker.log.read_text(errors="replace"))
    return match and match.group(1)


@pytest.mark.worker
def test_the_same_run_delivered_twice_makes_one_penalty(celery_worker, ladder, member, redis_client):
    run = f"dup-{uuid.uuid4().hex[:8]}"
    open_run(redis_client, member.pk, "reply", run)
    args = (member.pk, "reply", run, 3, 600)
    first = escalate_offender.apply_async(args=args)
    second = escalate_offender.apply_async(args=args)
    results = [wait_for(lambda t=t: succeeded(celery_worker, t.id), message=f"task {t.id}") for t in (first, second)]
    penalty = Penalty.objects.get(crossing=run)
    assert results == [str(penalty.pk)] * 2  # the second delivery found the first one's row
    assert Penalty.objects.filter(user=member).count() == 1
    assert list(penalty.events.values_list("kind", flat=True)) == ["applied"]
    assert celery_worker.signals("penalty_applied", crossing=run) == [("penalty_applied", penalty.pk, run)]
    assert not redis_client.exists(pending_key(member.pk, "reply"), offences_key(member.pk, "reply"))


def test_two_concurrent_escalations_of_one_run_make_one_penalty(redis_server, ladder, member, redis_client):
    run = f"race-{uuid.uuid4().hex[:8]}"
    open_run(redis_client, member.pk, "reply", run)
    with Signals(throttling_signals.penalty_applied) as applied:
        outcome = run_together(2, lambda i: escalate_like_the_task(member.pk, "reply", run, 3, 600))
    assert [exc for _, exc in outcome] == [None, None]
    assert {p.pk for p, _ in outcome} == {Penalty.objects.get(crossing=run).pk}
    assert Penalty.objects.filter(user=member).count() == 1
    assert PenaltyEvent.objects.filter(penalty__user=member).count() == 1
    assert [s["penalty"].crossing for s in applied.sent] == [run]
    assert not redis_client.exists(pending_key(member.pk, "reply"))


def test_two_concurrent_runs_of_one_member_take_successive_rungs(redis_server, ladder, member):
    """The member's row lock: two runs at once (reply and like) cannot both take rung 1."""
    outcome = run_together(2, lambda i: escalate_like_the_task(member.pk, ("reply", "like")[i], f"two-{i}", 3, 600))
    assert [exc for _, exc in outcome] == [None, None]
    assert sorted(Penalty.objects.filter(user=member).values_list("level", flat=True)) == [1, 2]


@pytest.mark.worker
def test_a_worker_killed_after_the_commit_is_replaced_and_the_run_completes_once(
    start_worker, ladder, member, policy, redis_client, broker, settings
):
    """SIGKILL right after the penalty row is committed: no Redis mirror, no acknowledgement.

    The message comes back after the broker's visibility timeout (4 s in the test
    settings) and another worker finishes the job without a second row.
    """
    queue = f"kill-{uuid.uuid4().hex[:8]}"
    settings.THROTTLING_CELERY_QUEUE = queue
    policy("reply", 60, 1, offence_threshold=2)
    penalties.escalate(member.pk, "reply", "earlier", 3, 600)  # a warning: this run gets 15 minutes
    doomed = start_worker([queue], env={"THROTTLING_TEST_DIE_AFTER_COMMIT": "1"}, name="doomed")
    throttling.check(member, "reply")
    throttling.check(member, "reply")
    assert throttling.check(member, "reply").escalated
    run = redis_client.get(pending_key(member.pk, "reply")).decode()

    wait_for(lambda: doomed.process.poll() is not None, message="the worker to kill itself")
    assert doomed.process.returncode == -signal.SIGKILL
    penalty = Penalty.objects.get(crossing=run)  # committed before the worker died...
    assert doomed.signals("penalty_applied", crossing=run) == [("penalty_applied", penalty.pk, run)]
    assert penalty.level == 2
    assert throttling.peek(member, "reply").reason == throttling.engine.decision.THROTTLED  # ...but never mirrored
    assert redis_client.get(pending_key(member.pk, "reply")).decode() == run
    assert broker.hlen("unacked") >= 1  # the message is held for redelivery, not lost

    rescuer = start_worker([queue], name="rescuer")
    wait_for(lambda: throttling.peek(member, "reply").penalty, timeout=30, message="the redelivered task")
    decision = throttling.check(member, "reply")
    assert decision.reason == throttling.engine.decision.PENALISED and decision.penalty.penalty_id == penalty.pk
    wait_for(lambda: not redis_client.exists(pending_key(member.pk, "reply")), message="the pending mark to clear")
    assert not redis_client.exists(offences_key(member.pk, "reply"))
    assert Penalty.objects.filter(user=member).count() == 2  # the warning and this one
    assert list(penalty.events.values_list("kind", flat=True)) == ["applied"]
    assert rescuer.signals("penalty_applied") == []  # announced once, by the worker that made it
    assert "escalate_offender" in rescuer.log.read_text() and rescuer.process.poll() is None


@pytest.mark.worker
def test_redis_down_while_escalating_is_retried_until_it_is_back(start_worker, ladder, member, own_redis):
    """The worker's Redis stalls: the row is committed, the task retries, and completes once Redis answers."""
    queue = f"stall-{uuid.uuid4().hex[:8]}"
    worker = start_worker([queue], redis_url=own_redis.url, name="stalled")
    client = redis.Redis.from_url(own_redis.url)
    run = f"stall-{uuid.uuid4().hex[:8]}"
    open_run(client, member.pk, "reply", run)

    os.kill(own_redis.pid, signal.SIGSTOP)
    try:
        task = escalate_offender.apply_async(args=(member.pk, "reply", run, 3, 600), queue=queue)
        wait_for(lambda: "Retry in" in worker.log.read_text(), message="the first retry")
        penalty = Penalty.objects.get(crossing=run)  # the database part is done
    finally:
        os.kill(own_redis.pid, signal.SIGCONT)

    wait_for(lambda: succeeded(worker, task.id), timeout=30, message="the retried task to succeed")
    assert succeeded(worker, task.id) == str(penalty.pk)
    assert Penalty.objects.filter(user=member).count() == 1
    assert list(penalty.events.values_list("kind", flat=True)) == ["applied"]
    assert worker.signals("penalty_applied", crossing=run) == [("penalty_applied", penalty.pk, run)]
    assert not client.exists(pending_key(member.pk, "reply"), offences_key(member.pk, "reply"))
    client.close()


def test_escalate_raises_after_the_commit_when_redis_is_down_and_a_second_call_completes(
    ladder, member, own_redis, policy
):
    policy("reply", 60, 1, offence_threshold=2)
    throttling.check(member, "reply")
    penalties.escalate(member.pk, "reply", "earlier", 3, 600)  # a warning: this run gets 15 minutes
    run = "down-1"
    own_redis.kill()
    with pytest.raises(BackendError):
        penalties.escalate(member.pk, "reply", run, 3, 600)
    penalty = Penalty.objects.get(crossing=run)  # committed: the retry must not make another
    own_redis.start()  # empty, on the same port
    assert throttling.check(member, "reply").reason == throttling.engine.decision.ADMITTED
    again = penalties.escalate(member.pk, "reply", run, 3, 600)
    assert again.pk == penalty.pk and again.level == 2
    assert Penalty.objects.filter(user=member).count() == 2
    d = throttling.check(member, "reply")
    assert d.reason == throttling.engine.decision.PENALISED and d.penalty.penalty_id == penalty.pk


def test_a_late_duplicate_of_an_old_run_leaves_a_newer_run_alone(
    redis_server, redis_client, dead_queue, ladder, member, policy
):
    """A redelivery of run A (its ack lost, say) while run B is pending must change nothing."""
    policy("reply", 60, 1, offence_threshold=2)
    penalties.escalate(member.pk, "reply", "run-a", 2, 600)  # run A: a warning
    assert throttling.check(member, "reply").allowed
    throttling.check(member, "reply")
    assert throttling.check(member, "reply").escalated  # run B, queued (to a queue no worker reads)
    run_b = redis_client.get(pending_key(member.pk, "reply"))

    assert penalties.escalate(member.pk, "reply", "run-a", 2, 600).level == 1  # A again: same row...
    # ...and run B keeps its pending mark and its offences (were they wiped, the next two
    # refusals would start a run C and the member would climb two rungs for what B alone is).
    assert redis_client.get(pending_key(member.pk, "reply")) == run_b
    assert int(redis_client.get(offences_key(member.pk, "reply")) or 0) == 2


@pytest.mark.worker
@pytest.mark.sqlite
def test_a_locked_sqlite_database_is_retried_by_the_real_task_until_the_penalty_lands(
    celery_worker, ladder, member, redis_client
):
    """SQLite locks the whole database for a writer: an escalation meeting that lock fails with
    "database is locked", and escalate_offender's autoretry applies the rung once it is free."""
    import sqlite3

    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's database-wide write lock; PostgreSQL waits on the member's row lock instead")
    run = f"locked-{uuid.uuid4().hex[:8]}"
    open_run(redis_client, member.pk, "reply", run)
    # Another writer holds the lock for longer than the worker waits for it (5 s).
    holder = sqlite3.connect(connection.settings_dict["NAME"], timeout=1, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        task = escalate_offender.apply_async(args=(member.pk, "reply", run, 3, 600))
        retried = re.compile(rf"\[{task.id}\] retry: .*database is locked")
        wait_for(
            lambda: retried.search(celery_worker.log.read_text(errors="replace")),
            timeout=20,
            message="the task retrying on the lock",
        )
        assert not Penalty.objects.filter(crossing=run).exists()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    result = wait_for(lambda: succeeded(celery_worker, task.id), timeout=60, message="the retried task")
    penalty = Penalty.objects.get(crossing=run)
    assert result == str(penalty.pk) and penalty.user == member
    assert Penalty.objects.filter(user=member).count() == 1
