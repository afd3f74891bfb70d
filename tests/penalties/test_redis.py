"""Penalties and Redis: what one decision sends, what a burst of refusals enqueues at the broker,
and how the mirror comes back after a flush, a restart or a lift Redis never heard of."""

import socket
import threading
from datetime import timedelta
from io import StringIO

import pytest
import redis
from celery import Celery
from django.core.management import call_command
from django.db import connection, transaction
from django.test.utils import override_settings
from django.utils import timezone

import throttling
import throttling.engine.decision
import throttling.engine.offences.report_batches
import throttling.engine.refusal_memory
from tests.support.helpers import Monitor, deciding_connections, wait_for
from tests.support.penalties import Signals, offences_key, pending_key, queued, run_together
from throttling import penalties
from throttling import signals as throttling_signals
from throttling.exceptions import BackendError
from throttling.models import OffenceRecord, Penalty, PenaltyEvent
from throttling.tasks import record_offences, resync_penalties

CACHE_DB, BROKER_DB = 0, 1


# --- One EVALSHA per decision, penalties and offences included -------------------------


def commands_by_connection(monitor, db):
    """Command names each connection sent to `db`, in order of first appearance (handshakes left out,
    and the background thread's connection, which reads the markers and INFO)."""
    seen = {}
    for d, client, command in monitor.events:
        name = command.split(" ", 1)[0].upper()
        if d == db and name not in ("HELLO", "PING", "SELECT", "CLIENT"):
            seen.setdefault(client, []).append(name)
    return [names for names in seen.values() if not {"MGET", "INFO"} & set(names)]


@pytest.mark.django_db(transaction=True)
@override_settings(THROTTLING_POLICY_REFRESH=3600)
def test_every_kind_of_decision_is_one_evalsha(redis_server, redis_client, broker, dead_queue, member, policy):
    policy("reply", 60, 1, offence_threshold=3)
    throttling.peek("warm-up", "reply")  # policies and the script loaded
    penalties.escalate(member.pk, "reply", "earlier", 3, 600)  # a warning: the next run is enforced

    def one(*args, sent=("EVALSHA",)):
        with Monitor(redis_server.url) as monitor:
            decision = throttling.check(*args)
        assert monitor.sent_by(deciding_connections()) == list(sent)
        return decision, monitor

    assert one(member, "reply")[0].reason == throttling.engine.decision.ADMITTED
    throttled, _ = one(member, "reply")
    assert (throttled.reason, throttled.offences, throttled.escalated) == (
        throttling.engine.decision.THROTTLED,
        1,
        False,
    )
    one(member, "reply")

    # The crossing: one EVALSHA, and the escalation recorded in Redis before anything is sent;
    # the task reaches the broker on commit, once, and its record moves to the queued set.
    with Monitor(redis_server.url) as monitor:
        with transaction.atomic():
            crossing = throttling.check(member, "reply")
            assert crossing.escalated and crossing.offences == 3
            assert queued(broker, dead_queue) == []  # nothing sent before the commit
            assert redis_client.zcard(penalties.unsent_key()) == 1  # but recorded
        sent = wait_for(lambda: queued(broker, dead_queue), timeout=10, message="the task at the broker")
        wait_for(lambda: redis_client.zcard(penalties.unsent_key()) == 0, message="the record to move")
    decision, _check, thread = commands_by_connection(monitor, CACHE_DB)[:3]
    assert decision == ["EVALSHA", "ZADD", "INCR"]  # the request: the decision, the record and its count
    assert thread == ["SET", "ZADD", "INCR", "ZREM"]  # the sender: the run claimed, then moved to queued
    pushes = [c.split(" ")[1] for d, _, c in monitor.events if d == BROKER_DB and c.upper().startswith("LPUSH ")]
    assert pushes == [dead_queue]
    run = redis_client.get(pending_key(member.pk, "reply")).decode()
    assert sent == [("throttling.tasks.escalate_offender", [member.pk, "reply", run, 3, 600])]

    # A refusal inside the pending run: answered from memory, counted, nothing sent.
    after, _ = one(member, "reply", sent=())
    assert (after.reason, after.offences, after.escalated) == (throttling.engine.decision.THROTTLED, 4, False)
    # Offences of the report are counted in process, not in Redis; their batch goes
    # after anything queued before it, so once it is at the broker nothing else is on the way.
    assert throttling.engine.offences.report_batches.buffer.flush() == 4
    wait_for(lambda: len(queued(broker, dead_queue)) >= 2, timeout=10, message="the history batch")
    assert [name for name, _ in queued(broker, dead_queue)] == [
        "throttling.tasks.escalate_offender",
        "throttling.tasks.record_offences",
    ]

    penalties.escalate(*sent[0][1])  # what the worker would do: rung 2, mirrored
    penalised, _ = one(member, "reply")
    assert penalised.reason == throttling.engine.decision.PENALISED and penalised.penalty.level == 2
    # A penalty refuses without counting an offence, in Redis or for the report.
    assert penalised.offences == 0 and not redis_client.exists(offences_key(member.pk, "reply"))
    assert throttling.engine.offences.report_batches.buffer.pending() == 0


# --- A burst of refusals ------------------------------------------------------------------


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_burst_of_1000_refusals_enqueues_one_task_and_one_history_batch(
    celery_worker, broker, dead_queue, member, policy, redis_client
):
    policy("reply", 60, 2)
    assert throttling.check(member, "reply") and throttling.check(member, "reply")

    def hammer(i):
        return [throttling.check(member, "reply") for _ in range(125)]

    outcome = run_together(8, hammer)
    assert [exc for _, exc in outcome] == [None] * 8
    decisions = [d for batch, _ in outcome for d in batch]
    assert len(decisions) == 1000 and not any(d.allowed for d in decisions)
    assert sum(d.escalated for d in decisions) == 1
    # Most were answered from memory; the background thread adds their offences at its next look.
    throttling.engine.refusal_memory.local_refusals.flush()
    assert int(redis_client.get(offences_key(member.pk, "reply"))) == 1000

    # The report's history: one message for the whole burst once the buffer is flushed.
    assert throttling.engine.offences.report_batches.buffer.pending() == 1000
    assert throttling.engine.offences.report_batches.buffer.flush() == 1000
    # Counted at the broker, where kombu keeps the queue as a Redis list named after it.
    # Tasks are sent in order, so once the history batch is there every escalation
    # the burst queued is there too.
    wait_for(lambda: broker.llen(dead_queue) >= 2, timeout=10, message="the tasks at the broker")
    assert broker.llen(dead_queue) == 2
    run = redis_client.get(pending_key(member.pk, "reply")).decode()
    tasks = queued(broker, dead_queue)
    assert tasks[0] == ("throttling.tasks.escalate_offender", [member.pk, "reply", run, 5, 600])
    assert tasks[1][0] == "throttling.tasks.record_offences"
    (batch,) = tasks[1][1]
    assert sum(row[4] for row in batch) == 1000 and len(batch) <= 2  # 2 only across an hour boundary
    assert {tuple(row[:3]) for row in batch} == {(decisions[0].identity, member.pk, "reply")}

    record_offences.apply_async(args=(batch,))  # the real worker stores it: one row, not 1,000
    wait_for(lambda: OffenceRecord.objects.exists(), message="the stored batch")
    records = list(OffenceRecord.objects.values_list("identity", "user_id", "action", "count"))
    assert sum(r[3] for r in records) == 1000 and len(records) == len(batch)


# --- The mirror after a flush, a restart, a lift Redis missed ------------------------------


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_resync_after_a_flush_restores_enforcement_and_records_expiries_once(
    celery_worker, redis_client, member, policy, django_user_model
):
    policy("reply", 60, 5)
    policy("like", 60, 5)
    bob = django_user_model.objects.create_user("bob")
    now = timezone.now()
    active = penalties.apply_penalty(member, level=2, duration=timedelta(minutes=15), action="reply", reason="spam")
    everything = penalties.apply_penalty(bob, level=5, duration=timedelta(days=7), reason="abuse")
    ended = penalties.apply_penalty(
        member, level=3, duration=timedelta(hours=1), action="reply", reason="old", now=now - timedelta(hours=2)
    )
    assert throttling.peek(member, "reply").penalty.penalty_id == active.pk

    redis_client.flushdb()  # the cache db only: the broker (db 1) keeps the worker's queue
    # The change markers went too: this process's next look forgets the refusals it remembered.
    wait_for(
        lambda: throttling.peek(member, "reply").allowed and throttling.peek(bob, "reply").allowed,
        timeout=5,
        message="the penalties gone with the flush",
    )

    out = StringIO()
    with Signals(throttling_signals.penalty_expired) as expired:
        call_command("throttling_resync", stdout=out)
    assert "Mirrored the penalties of 2 member(s); recorded 1 expiry(ies); sent 0 escalation(s)" in out.getvalue()
    assert throttling.peek(member, "reply").penalty.penalty_id == active.pk
    bob_decision = throttling.peek(bob, "reply")
    assert (
        bob_decision.reason == throttling.engine.decision.PENALISED and bob_decision.penalty.penalty_id == everything.pk
    )
    assert [s["penalty"].pk for s in expired.sent] == [ended.pk]
    ended.refresh_from_db()
    assert ended.expired_at is not None
    assert list(ended.events.values_list("kind", flat=True)) == ["applied", "expired"]

    # Again: nothing new to record.
    with Signals(throttling_signals.penalty_expired) as expired:
        call_command("throttling_resync", stdout=out)
    assert "recorded 0 expiry(ies)" in out.getvalue()
    assert expired.sent == []
    assert PenaltyEvent.objects.filter(kind="expired").count() == 1

    # The beat task does the same in the worker.
    redis_client.flushdb()
    assert throttling.peek(member, "reply").allowed
    resync_penalties.apply_async()
    wait_for(lambda: throttling.peek(member, "reply").penalty, message="the resync task")
    assert throttling.peek(bob, "like").penalty.penalty_id == everything.pk
    assert ended.pk not in [pk for _, pk, _ in celery_worker.signals("penalty_expired")]
    assert PenaltyEvent.objects.filter(kind="expired").count() == 1


@pytest.mark.django_db(transaction=True)
def test_resync_after_a_redis_restart(own_redis, member, policy):
    """A restart empties Redis and its script cache: both scripts are loaded again, quietly."""
    policy("reply", 60, 5)
    penalty = penalties.apply_penalty(member, level=4, duration=timedelta(days=1), action="reply")
    assert throttling.peek(member, "reply").penalty.penalty_id == penalty.pk
    own_redis.kill()
    own_redis.start()
    # The change markers went too: this process's next look forgets the refusals it remembered.
    wait_for(lambda: throttling.peek(member, "reply").allowed, timeout=5, message="the penalty gone with the data")
    assert penalties.resync() == {"mirrored": 1, "expired": 0, "resent": 0}
    assert throttling.check(member, "reply").penalty.penalty_id == penalty.pk


@pytest.mark.django_db(transaction=True)
def test_lift_while_redis_is_down_is_recorded_and_resync_frees_the_member(own_redis, member, policy, admin_user):
    policy("reply", 60, 5)
    penalty = penalties.apply_penalty(member, level=2, duration=timedelta(minutes=15), action="reply")
    assert penalty.mirror_error is None
    assert throttling.peek(member, "reply").penalty.penalty_id == penalty.pk

    # Down, then back with its data (persisted, as a production Redis is): the old
    # mirror returns. (A stalled server would not do: the lift's command, sent
    # before the timeout, runs when it wakes up.)
    redis.Redis.from_url(own_redis.url).save()
    own_redis.kill()
    with Signals(throttling_signals.penalty_lifted) as lifted:
        result = penalties.lift(penalty, by=admin_user, reason="appeal")
    own_redis.start()
    assert isinstance(result.mirror_error, BackendError)
    penalty.refresh_from_db()
    assert penalty.lifted_at is not None and penalty.lifted_by == admin_user
    assert len(lifted.sent) == 1  # the database change is announced even so
    # Redis holds the old mirror again and refuses, until the resync.
    assert throttling.peek(member, "reply").reason == throttling.engine.decision.PENALISED
    assert penalties.resync()["mirrored"] == 1
    assert throttling.peek(member, "reply").allowed
    assert Penalty.objects.active().count() == 0


# --- A broker that is down -----------------------------------------------------------------


class SilentBroker:
    """A broker that accepts connections and never answers, until released; then it hangs up.

    A request that sends to it synchronously would wait for as long as it is held.
    """

    def __init__(self):
        self.attempts = 0
        self.released = threading.Event()
        self._held = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.05)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self):
        return f"redis://127.0.0.1:{self._sock.getsockname()[1]}/1"

    def _serve(self):
        while not self._stop.is_set():
            if self.released.is_set():
                for conn in self._held:
                    conn.close()
                self._held = []
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            self.attempts += 1
            if self.released.is_set():
                conn.close()
            else:
                self._held.append(conn)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.released.set()
        self._stop.set()
        self._thread.join(5)
        self._sock.close()


@pytest.mark.django_db(transaction=True)
def test_a_crossing_does_not_wait_for_the_broker(redis_client, member, policy):
    """A refused request returns while the broker has not answered: the broker, like Redis, never holds a page up.

    kombu retries a broker connection for seconds whatever send_task(retry=False)
    says, and a silent broker holds a synchronous sender for as long as it likes.
    """
    from tests.support.processes.celery_app import app

    policy("reply", 60, 1, offence_threshold=2)
    throttling.check(member, "reply")
    throttling.check(member, "reply")
    # One connection attempt, no retries: only the silence is under test.
    elsewhere = Celery(
        "elsewhere", set_as_current=False, broker_connection_timeout=1, broker_transport_options={"max_retries": 0}
    )
    decisions = []

    def refuse():
        elsewhere.set_current()  # the Celery app of this thread: the silent broker's
        try:
            decisions.append(throttling.check(member, "reply"))
        finally:
            app.set_current()
            connection.close()

    with SilentBroker() as silent:
        elsewhere.conf.broker_url = silent.url
        request = threading.Thread(target=refuse, daemon=True)
        request.start()
        request.join(5)
        answered_while_silent = not request.is_alive()
        silent.released.set()
        request.join(10)
        assert answered_while_silent, "the refused request waited for the broker"
        (crossing,) = decisions
        assert crossing.escalated and not crossing.allowed
        # Once the broker fails, the escalation waits in Redis for the next resync, its
        # run still pending, so it is neither lost nor started twice.
        wait_for(lambda: redis_client.zcard(penalties.unsent_key()) == 1, timeout=10, message="the escalation kept")
    assert silent.attempts >= 1
    assert redis_client.exists(pending_key(member.pk, "reply"))


def test_lifting_one_penalty_leaves_the_others_enforced(redis_server, member, policy, admin_user):
    policy("reply", 60, 5)
    policy("like", 60, 5)
    hour = penalties.apply_penalty(member, level=3, duration=timedelta(hours=1), action="reply")
    week = penalties.apply_penalty(member, level=5, duration=timedelta(days=7))
    assert throttling.peek(member, "reply").penalty.penalty_id == week.pk  # the one ending last
    assert throttling.peek(member, "like").penalty.penalty_id == week.pk
    penalties.lift(week, by=admin_user, reason="too harsh")
    assert throttling.peek(member, "reply").penalty.penalty_id == hour.pk
    assert throttling.peek(member, "like").allowed
    penalties.lift(hour, by=admin_user)
    assert throttling.peek(member, "reply").allowed
