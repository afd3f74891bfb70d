"""An escalation the broker cannot take is never lost: it waits in Redis and the next resync sends it."""

import ast
import json

import pytest
import redis
from celery import Celery, _state

import throttling
import throttling.engine.offences.report_batches
from demo_site.redis_server import RedisServer
from tests.support.helpers import wait_for
from tests.support.metrics import Counts
from tests.support.penalties import offences_key, open_run, pending_key, queued
from throttling import penalties
from throttling.engine.background.task_sender import sender
from throttling.engine.offences import escalations
from throttling.models import Penalty

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def own_broker(monkeypatch):
    """A Redis broker of the test's own, and a Celery app on it made current."""
    server = RedisServer()
    server.start()
    app = Celery("project", broker=server.url.rsplit("/", 1)[0] + "/1", set_as_current=False)
    app.conf.broker_connection_timeout = 1
    app.conf.broker_connection_max_retries = 0
    monkeypatch.setattr(_state._tls, "current_app", app)
    yield server, app
    server.stop()


def test_a_crossing_while_the_broker_is_down_is_sent_by_the_next_resync(
    own_broker, redis_server, redis_client, member, policy, ladder, client, settings
):
    server, app = own_broker
    settings.THROTTLING_METRICS = True
    counts = Counts()
    policy("reply", 60, 1, offence_threshold=2)
    server.kill()  # the broker is down
    assert throttling.check(member, "reply").allowed
    refusals = [throttling.check(member, "reply") for _ in range(2)]
    assert refusals[-1].escalated
    assert sender.join(timeout=60)
    # Kept in Redis, its run still pending, and counted.
    (waiting,) = redis_client.zrange(penalties.unsent_key(), 0, -1)
    user_id, action, run, offences, window = json.loads(waiting)
    assert (user_id, action, offences) == (member.pk, "reply", 2)
    assert redis_client.get(f"throttling:{{u:{member.pk}}}:reply:esc").decode() == run
    assert penalties.send_failures() == (1, 1)
    # The report's header says so.
    client.force_login(type(member).objects.create_superuser("mod", password="pw"))
    page = client.get("/admin/throttling/penalty/report/").content.decode()
    assert "1 escalation could not be sent to Celery" in page and "1 is still waiting" in page

    server.start()  # the broker is back; beat's next resync (here called as the task does)
    assert penalties.resync()["resent"] == 1
    broker = redis.Redis.from_url(server.url.rsplit("/", 1)[0] + "/1")
    messages = wait_for(lambda: broker.lrange("celery", 0, -1), timeout=10, message="the escalation at the broker")
    (message,) = [json.loads(m) for m in messages]
    assert message["headers"]["task"] == "throttling.tasks.escalate_offender"
    assert list(ast.literal_eval(message["headers"]["argsrepr"])) == [member.pk, "reply", run, 2, 600]
    assert redis_client.zcard(penalties.unsent_key()) == 0
    # What the worker then does: the rung lands for that run.
    penalty = penalties.escalate(member.pk, "reply", run, 2, 600)
    assert penalty.crossing == run and penalty.user == member
    # Each step was counted (THROTTLING_METRICS): never sent, so kept, then resent and applied.
    assert counts.escalations() == {"queued": 1, "kept_for_resend": 1, "resent": 1, "applied": 1}
    throttling.engine.offences.report_batches.buffer.discard()  # the refusals' history batch belongs to this test's broker


def test_resync_closes_a_run_whose_penalty_is_applied_and_never_sends_it_again(
    redis_server, redis_client, broker, dead_queue, member, ladder
):
    """A worker that committed the penalty but died before closing the run: resync only closes it."""
    run = "applied-run"
    open_run(redis_client, member.pk, "reply", run)
    penalty = penalties.escalate(member.pk, "reply", run, 3, 600)
    # What the dead worker left behind: the run still pending, its record still queued.
    open_run(redis_client, member.pk, "reply", run)
    redis_client.zadd(escalations.queued_key(), {json.dumps([member.pk, "reply", run, 3, 600]): 1})

    assert penalties.resync()["resent"] == 0
    assert queued(broker, dead_queue) == []
    assert redis_client.zcard(escalations.queued_key()) == 0
    assert not redis_client.exists(pending_key(member.pk, "reply"), offences_key(member.pk, "reply"))
    assert list(Penalty.objects.filter(user=member)) == [penalty]
