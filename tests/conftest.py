"""Fixtures: a throwaway redis-server (or valkey-server) per session, a clean policy cache per test."""

import os
import signal
import uuid

import pytest
import redis
from django.test.utils import override_settings

import tests.support.processes.celery_app  # the Celery app tasks are sent with
from demo_site.redis_server import RedisServer, find_redis_server
from tests.support.fixtures import browser, redis_client  # noqa: F401  (fixtures, shared with the integrations)
from tests.support.helpers import (
    DEFAULT_LADDER,
    broker_url,
    commits,
    ensure_default_ladder,
    forget_process_state,
    ladder_back_after_flush,
    redis_caches,
)
from tests.support.processes.celery_worker import SENT, CeleryWorker, record_sends
from tests.support.processes.topology import LocalCluster
from throttling.conf import DEFAULTS

record_sends(tests.support.processes.celery_app.app)

# Fixtures that start something slow, and the marker (setup.cfg) a test using one must carry,
# so that `make test-fast` leaves it out.
MARKED_FIXTURES = {"celery_worker": "worker", "start_worker": "worker", "live_server": "browser"}


# Markers that imply django_independent: a Redis Cluster or Sentinel group, and gunicorn under Redis
# faults, behave the same whatever Django release the site runs (docs: Development › Which tests run where).
INDEPENDENT_MARKERS = ("topology", "gunicorn")
# Fixtures through which a test reaches the test database (besides the django_db marker).
DATABASE_FIXTURES = {
    "db",
    "transactional_db",
    "django_db_reset_sequences",
    "django_db_serialized_rollback",
    "live_server",
}


# Where the database engine decides the outcome, so the PostgreSQL run repeats them (marked
# database_engine): row locks, transactions and on_commit (penalties, the lift), constraints and
# migrations (policies), queries over many rows (the report, replayed histories), the blocks' and
# surges' rows. Elsewhere the database only holds a few rows that every engine keeps the same way.
DATABASE_ENGINE_PATHS = (
    "tests/penalties/",
    "tests/policies/",
    "tests/replay/test_sources.py",
    "tests/replay/test_replay.py",
    "tests/replay/test_suggest.py",
    "tests/replay/test_command.py",
    "tests/replay/test_admin_worker.py",
    "tests/admin/test_report.py",
    "tests/admin/test_admin_penalties.py",
    "tests/raids/test_blocks.py",
    "tests/raids/test_surges.py",
    "tests/raids/test_alerts.py",
    "tests/raids/test_rebuild.py",
    "tests/metrics/test_escalations.py",
)


def pytest_report_header(config):
    """Which server the suite starts (THROTTLING_TEST_SERVER: Redis, Valkey or a binary's path)."""
    try:
        return f"server: {find_redis_server()}"
    except RuntimeError as exc:
        return f"server: {exc}"


@pytest.hookimpl(tryfirst=True)  # before -m selects: it must see the markers added here
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("django_independent") is None and any(
            item.get_closest_marker(name) for name in INDEPENDENT_MARKERS
        ):
            item.add_marker(pytest.mark.django_independent)
        if item.get_closest_marker("django_db") is not None or DATABASE_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.database)
            if item.nodeid.startswith(DATABASE_ENGINE_PATHS) and item.get_closest_marker("sqlite") is None:
                item.add_marker(pytest.mark.database_engine)
    unmarked = [
        f"{item.nodeid} uses the {fixture} fixture: mark it @pytest.mark.{marker}"
        for item in items
        for fixture, marker in MARKED_FIXTURES.items()
        if fixture in item.fixturenames and item.get_closest_marker(marker) is None
    ]
    if unmarked:
        raise pytest.UsageError("\n".join(unmarked))


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup):
    """pytest-django's test databases, and before they are dropped, the connection asgiref's
    shared thread still holds.

    Async code run outside a request (asyncio.run in a test) does its thread-sensitive work,
    policy loads included, on one long-lived thread of asgiref's; no request ends there to close
    its connection, and PostgreSQL refuses to drop a database someone is connected to.
    """
    yield
    from asgiref.sync import SyncToAsync
    from django.db import connections

    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=30)


@pytest.fixture(scope="session")
def redis_server():
    """The suite's own Redis on a free loopback port; the only server tests touch."""
    from tests.support.processes.celery_app import app

    server = RedisServer()
    server.start()
    # Tasks the suite sends go to this server too (db 1), never to a broker it did not start.
    app.conf.broker_url = broker_url(server)
    with override_settings(CACHES=redis_caches(server.url)):
        yield server
        # The background thread stops while this server still answers: after it, the settings
        # name no server, and a last look would only warn that it cannot read the markers.
        from throttling.engine.background.poller import poller

        poller.stop()
    server.stop()


@pytest.fixture
def own_redis():
    """A server one test may kill, stall or restart without disturbing the others."""
    server = RedisServer()
    server.start()
    with override_settings(CACHES=redis_caches(server.url)):
        yield server
    if server.pid:
        try:
            os.kill(server.pid, signal.SIGCONT)  # in case the test stalled it
        except OSError:
            pass
    server.stop()


@pytest.fixture(scope="module")
def cluster():
    """A real 3-master Redis Cluster on free loopback ports, for the tests of one module."""
    c = LocalCluster().start()
    yield c
    c.stop()


@pytest.fixture
def on_cluster(cluster):
    """THROTTLING_REDIS_URL at the cluster, its nodes empty, every node up."""
    for node in cluster.nodes:
        if not node.running:
            node.start()
    cluster.wait_for_slots()
    cluster.flush()
    with override_settings(THROTTLING_REDIS_URL=cluster.url):
        yield cluster
    cluster.flush()


@pytest.fixture
def member(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture(autouse=True)
def _clean_state(request):
    """Every test starts with an empty Redis (ours) and no cached policies."""
    if "redis_server" in request.fixturenames or "redis_client" in request.fixturenames:
        server = request.getfixturevalue("redis_server")
        if server.running:
            # Only the cache database: the broker's (db 1) keeps its queue bindings.
            redis.Redis.from_url(server.url).flushdb()
    forget_process_state()
    ladder_back_after_flush(request)
    SENT.clear()
    yield
    worker_done_before_the_flush(request)
    forget_process_state()


def worker_done_before_the_flush(request):
    """A committing test's tasks are finished by the session's worker before its teardown flushes the
    database: a task still writing (a block's first refusal, an escalation) would meet the flush,
    a deadlock on PostgreSQL. The worker consumes the default queue whichever test sends to it."""
    worker = CeleryWorker.session
    if worker is None or not commits(request):
        return
    from throttling.engine.background.task_sender import sender

    sender.join(5)  # the sender's thread publishes what the test handed it: only then is it in SENT
    worker.settle(list(SENT))


@pytest.fixture
def policy(db):
    """Factory: policy("reply", 60, 5, windows=[(3600, 20)])."""
    from throttling.models import ActionPolicy, ActionWindow

    def make(action, period, max_count, *, windows=(), **fields):
        ActionPolicy.objects.filter(action=action).delete()  # the data migration's defaults
        p = ActionPolicy.objects.create(action=action, period=period, max_count=max_count, **fields)
        for extra_period, extra_max in windows:
            ActionWindow.objects.create(policy=p, period=extra_period, max_count=extra_max)
        return p

    return make


@pytest.fixture(scope="session")
def _session_worker(redis_server, django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        worker = CeleryWorker(redis_server.url, broker_url(redis_server)).start()
    CeleryWorker.session = worker
    yield worker
    CeleryWorker.session = None
    worker.stop()


@pytest.fixture
def celery_worker(_session_worker, transactional_db):
    """A real worker consuming the default queue; tests using it commit what they write."""
    from tests.support.processes.celery_app import app

    app.control.purge()  # nothing a previous test left queued runs against this one
    if _session_worker.process.poll() is not None:
        _session_worker.start()
    return _session_worker


@pytest.fixture
def start_worker(redis_server, transactional_db):
    """Factory: a dedicated worker on its own queues, e.g. start_worker(["kill-1"], env={...}).

    For what the session worker cannot do: die on purpose, use another Redis
    (redis_url=own_redis.url), or leave the default queue alone. Stopped, and
    its queues emptied, when the test ends.
    """
    started = []

    def start(queues, *, redis_url=None, env=None, name=None):
        worker = CeleryWorker(
            redis_url or redis_server.url,
            broker_url(redis_server),
            queues=tuple(queues),
            name=name or f"w{len(started) + 2}",
            env=env,
        )
        started.append(worker)
        return worker.start()

    yield start
    broker = redis.Redis.from_url(broker_url(redis_server))
    for worker in started:
        # Idle by now, so nothing in hand is lost; a warm shutdown would cost ~1.5 s.
        worker.kill()
        worker.stop()
        broker.delete(*worker.queues)
    broker.close()


@pytest.fixture
def other_process(redis_server):
    """Factory: other_process(action, who, env={...}) starts tests.support.processes.policy_worker on this test's Redis and
    database (`env` adds environment variables, e.g. THROTTLING_TEST_POLICY_REFRESH; `redis_url` names another
    server, an own_redis the test restarts)."""
    import subprocess
    import sys

    from django.db import connection

    procs = []

    def start(action, identity, env=None, redis_url=None):
        env = dict(
            os.environ,
            THROTTLING_TEST_REDIS_URL=redis_url or redis_server.url,
            THROTTLING_TEST_DB_NAME=str(connection.settings_dict["NAME"]),
            **(env or {}),
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.processes.policy_worker", action, identity],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


@pytest.fixture
def ladder(db):
    """Exactly the shipped ladder (warning, 15 min, 1 h, 1 day, 7 days all, 30 days all),
    whatever an earlier test left (a test may edit the ladder)."""
    ensure_default_ladder(replace=True)
    return DEFAULT_LADDER


@pytest.fixture
def broker(redis_server):
    """A client on the broker's database (db 1 of the suite's Redis)."""
    client = redis.Redis.from_url(broker_url(redis_server))
    yield client
    client.close()


@pytest.fixture
def dead_queue(broker):
    """The app's tasks go to a fresh queue no worker consumes; read it with penalty_helpers.queued()."""
    name = f"dead-{uuid.uuid4().hex[:12]}"
    with override_settings(THROTTLING_CELERY_QUEUE=name):
        yield name
    broker.delete(name)


@pytest.fixture
def hasty(settings):
    """The product's own timeouts (0.1 s), for the tests of the bound they set: the suite's settings
    wait PATIENT_TIMEOUT for Redis (tests/settings.py)."""
    settings.THROTTLING_SOCKET_TIMEOUT = DEFAULTS["SOCKET_TIMEOUT"]
    settings.THROTTLING_SOCKET_CONNECT_TIMEOUT = DEFAULTS["SOCKET_CONNECT_TIMEOUT"]
