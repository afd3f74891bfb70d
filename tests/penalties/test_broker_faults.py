"""No escalation is lost whatever the broker does: a web process that exits while the broker is down,
and a broker that loses its queue. Real web processes, a real broker killed and restarted, a real worker."""

import os
import re
import subprocess
import sys
import time

import pytest
import redis
from django.db import connection

from demo_site.redis_server import RedisServer
from tests.support.helpers import ROOT, broker_url
from tests.support.penalties import pending_key, queued, spam_until_escalated
from tests.support.processes.celery_worker import CeleryWorker
from throttling import penalties
from throttling.models import Penalty, PenaltyEvent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.worker,
    pytest.mark.django_independent,
    pytest.mark.django_db(transaction=True),
]

MEMBERS = 20
# Seconds after which resync sends again an escalation the broker took but no worker completed.
RESEND_AFTER = 10  # long enough that restarting the broker under load and a resync stay "too soon"


@pytest.fixture
def own_broker():
    """A broker of the test's own (persistence off, as every server the suite starts), to kill."""
    server = RedisServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def workers(redis_server):
    """Factory: a worker on a given broker, stopped when the test ends."""
    started = []

    def start(broker):
        worker = CeleryWorker(redis_server.url, broker_url(broker), name=f"faults{len(started)}")
        started.append(worker)
        return worker.start()

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture
def members(django_user_model, ladder, policy):
    policy("reply", 60, 1, offence_threshold=2)
    return [django_user_model.objects.create_user(f"m{i}", password="pw") for i in range(MEMBERS)]


def site(redis_server, broker, *args, timeout=120):
    """Run tests/support/sites/escalating.py as a process of its own; returns its output."""
    env = dict(
        os.environ,
        THROTTLING_TEST_REDIS_URL=redis_server.url,
        THROTTLING_TEST_BROKER_URL=broker_url(broker),
        THROTTLING_TEST_DB_NAME=str(connection.settings_dict["NAME"]),
        THROTTLING_TEST_RESEND_AFTER=str(RESEND_AFTER),
    )
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.sites.escalating", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def escalations_in(broker):
    return sum(name == "throttling.tasks.escalate_offender" for name, _args in queued(broker, "celery"))


def resync(redis_server, broker):
    """throttling_resync in a process of its own; returns how many escalations it sent."""
    out = site(redis_server, broker, "resync")
    return int(re.search(r"sent (\d+) escalation", out).group(1))


def applied(members, expected, timeout=60):
    """How many of the members have a penalty once `expected` have one, or when `timeout` is over."""
    deadline = time.monotonic() + timeout
    while True:
        count = Penalty.objects.filter(user__in=members).count()
        if count >= expected or time.monotonic() > deadline:
            return count
        time.sleep(0.2)


def assert_applied_once(members, redis_client, sent):
    assert (sent, applied(members, MEMBERS)) == (MEMBERS, MEMBERS)  # (escalations sent again, applied)
    for member in members:
        assert Penalty.objects.filter(user=member).count() == 1, member
    assert PenaltyEvent.objects.filter(penalty__user__in=members, kind="applied").count() == MEMBERS
    # The runs are closed: new offences may escalate again.
    for member in members:
        assert not redis_client.exists(pending_key(member.pk, "reply")), member
    assert redis_client.zcard(penalties.unsent_key()) == 0


def test_a_process_that_exits_while_the_broker_is_down_leaves_every_escalation_for_resync(
    redis_server, redis_client, own_broker, workers, members, dead_queue
):
    own_broker.kill()  # the broker is down
    ids = [str(m.pk) for m in members]
    assert site(redis_server, own_broker, "cross", "reply", *ids).split() == [str(MEMBERS)]
    # The process has exited; its runs are pending, and every escalation waits in Redis, counted once.
    assert all(redis_client.exists(pending_key(m.pk, "reply")) for m in members)
    assert penalties.send_failures() == (MEMBERS, MEMBERS)

    own_broker.start()  # the broker is back, and beat's resync runs
    workers(own_broker)
    assert_applied_once(members, redis_client, resync(redis_server, own_broker))

    # A second resync finds nothing left to send, and applies nothing twice.
    assert resync(redis_server, own_broker) == 0
    time.sleep(1)
    assert Penalty.objects.filter(user__in=members).count() == MEMBERS
    # Escalation is not blocked: a new run of offences queues the next one at once.
    assert spam_until_escalated(members[0], "reply").escalated


def test_tasks_lost_by_a_broker_restart_are_sent_again_by_resync(
    redis_server, redis_client, own_broker, workers, members
):
    ids = [str(m.pk) for m in members]
    assert site(redis_server, own_broker, "cross", "reply", *ids).split() == [str(MEMBERS)]
    sent_at = time.monotonic()
    queue = redis.Redis.from_url(broker_url(own_broker))
    assert escalations_in(queue) == MEMBERS  # the broker took all of them...
    queue.close()

    own_broker.kill()  # ...and loses them: no persistence
    own_broker.start()
    queue = redis.Redis.from_url(broker_url(own_broker))
    assert escalations_in(queue) == 0
    queue.close()
    assert resync(redis_server, own_broker) == 0  # too soon: a worker may still be on them
    workers(own_broker)
    time.sleep(max(0.0, sent_at + RESEND_AFTER + 0.5 - time.monotonic()))
    assert_applied_once(members, redis_client, resync(redis_server, own_broker))
    assert resync(redis_server, own_broker) == 0
    time.sleep(1)
    assert Penalty.objects.filter(user__in=members).count() == MEMBERS
