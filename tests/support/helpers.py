"""Small assertions, waits and settings shared by the test modules.

`free_port` is the one the demo's Redis servers use (demo_site/redis_server.py),
imported here so that tests take every helper from tests.support.
"""

import os
import re
import tempfile
import threading
import time
from importlib import import_module
from pathlib import Path

import redis

import throttling
from demo_site.redis_server import free_port  # noqa: F401  (the suite's only definition)

# The project's root: where helper processes started by tests run.
ROOT = Path(__file__).resolve().parents[2]
# Seconds the suite lets Redis take to connect and to answer (tests/settings.py): on a loaded machine
# a reply later than the product's 0.1 s fails open, and an admission Redis never counted, a page
# without its quota or a reported failure reads as a wrong result. The tests of the bound itself ask
# for the product's timeouts (the `hasty` fixture); the gunicorn site of the fault tests has them in
# its own settings.
PATIENT_TIMEOUT = 1.0


def mail_settings(backend, file_path=None, smtp=None):
    """The settings that send mail through `backend` (a dotted path; a file backend writes to
    `file_path`, an SMTP one to `smtp`, a (host, port, timeout)): MAILERS on Django 6.1 and later,
    where EMAIL_BACKEND, EMAIL_FILE_PATH and EMAIL_HOST … are deprecated (and refused beside MAILERS),
    those before."""
    import django

    if django.VERSION >= (6, 1):
        mailer = {"BACKEND": backend}
        if file_path is not None:
            mailer["OPTIONS"] = {"file_path": file_path}
        if smtp is not None:
            mailer["OPTIONS"] = dict(zip(("host", "port", "timeout"), smtp))
        return {"MAILERS": {"default": mailer}}
    found = {"EMAIL_BACKEND": backend, **({"EMAIL_FILE_PATH": file_path} if file_path is not None else {})}
    if smtp is not None:
        found.update(zip(("EMAIL_HOST", "EMAIL_PORT", "EMAIL_TIMEOUT"), smtp))
    return found


def redis_caches(url):
    """CACHES pointing the default django-redis alias at `url`."""
    return {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": url,
            "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
        }
    }


def sqlite_test_database(name, prefix):
    """DATABASES on a SQLite file, not memory, so the helper processes a test starts (a Celery
    worker, forked racers) see the same rows: its test copy is per run, and a helper process is
    told which one its parent created through THROTTLING_TEST_DB_NAME."""
    database = {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": name,
        "TEST": {"NAME": os.path.join(tempfile.gettempdir(), f"{prefix}-{os.getpid()}.sqlite3")},
        # A transaction takes the write lock when it begins, waiting for it up to the timeout (5 s),
        # rather than failing at once with "database is locked" when a read turns into a write while
        # a helper process (the Celery worker) writes.
        "OPTIONS": {"transaction_mode": "IMMEDIATE"},
    }
    if os.environ.get("THROTTLING_TEST_DB_NAME"):
        database["NAME"] = os.environ["THROTTLING_TEST_DB_NAME"]
    return {"default": database}


def broker_url(server):
    """The Celery broker the suite uses on `server`: its db 1 (the cache is db 0)."""
    return server.url.rsplit("/", 1)[0] + "/1"


def messages_of(response):
    """The messages a response's request left for the next page, as [(level tag, text)]."""
    from django.contrib.messages import get_messages

    return [(m.level_tag, str(m)) for m in get_messages(response.wsgi_request)]


def used(who, action):
    """Entries currently counted against `who`: the limit less what peek says is left."""
    d = throttling.peek(who, action)
    return d.limit - d.remaining


def retry_after(response):
    """The Retry-After header, which must be whole seconds and at least 1."""
    header = response["Retry-After"]
    assert re.fullmatch(r"[1-9][0-9]*", header), header
    return int(header)


DEFAULT_LADDER = import_module("throttling.migrations.0004_default_ladder").LADDER


def ensure_default_ladder(replace=False):
    """Put back the migration's penalty ladder: a transactional test's flush empties every table.

    With replace, whatever ladder is there (a test may have edited it) gives way to it.
    """
    from throttling.models import PenaltyStep

    if replace:
        PenaltyStep.objects.all().delete()
    elif PenaltyStep.objects.exists():
        return
    PenaltyStep.objects.bulk_create(
        PenaltyStep(level=level, name=name, duration=duration, all_actions=all_actions)
        for level, name, duration, all_actions in DEFAULT_LADDER
    )


class Monitor:
    """What clients send to a Redis server (MONITOR), leaving out what scripts run inside.

    `events` keeps (db, client address, command line); `commands` the command
    names only. The database matters because the broker (db 1) shares the
    suite's server with the cache (db 0).
    """

    STOP = "throttling-test-monitor-stop"

    def __init__(self, url):
        self.url = url
        self.events = []
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def commands(self):
        return [c.split(" ", 1)[0].upper() for _db, _client, c in self.events]

    def sent_by(self, connections):
        """Command names sent by `connections` ((address, port) pairs, as deciding_connections() gives)."""
        return [c.split(" ", 1)[0].upper() for _db, client, c in self.events if client in connections]

    def on(self, db):
        """Command names sent to `db` by connections that use no other database.

        A connection to the broker's database says HELLO (and maybe PING) on db 0
        before its SELECT: that is the broker's connection, not a decision's.
        """
        elsewhere = {client for d, client, _ in self.events if d != db}
        return [c.split(" ", 1)[0].upper() for d, client, c in self.events if d == db and client not in elsewhere]

    def _run(self):
        client = redis.Redis.from_url(self.url)
        with client.monitor() as monitor:
            self._ready.set()
            for event in monitor.listen():
                if self.STOP in event["command"]:
                    return
                if event.get("client_type") != "lua":
                    sender = (event.get("client_address"), event.get("client_port"))
                    self.events.append((event["db"], sender, event["command"]))

    def __enter__(self):
        # Connected before monitoring starts, so its handshake is not recorded.
        self._stopper = redis.Redis.from_url(self.url)
        self._stopper.ping()
        self._thread.start()
        assert self._ready.wait(5)
        time.sleep(0.05)  # MONITOR is registered once the server has answered it
        return self

    def __exit__(self, *exc):
        self._stopper.echo(self.STOP)
        # Every event up to the stop marker is read before anyone counts them: on a loaded machine
        # the reader may lag seconds behind the server.
        self._thread.join(60)
        self._stopper.close()
        assert not self._thread.is_alive(), "MONITOR's reader did not reach the stop marker within 60 s"


def forget_process_state():
    """What this process remembers between decisions, forgotten: a test starts and ends with none of it.

    Cached policies, blocks and surges, the eviction watch, the last outage warning (every test sees its own first),
    timed-out decisions of another test's Redis, buffered offence history, escalations deferred
    to a commit that never came (a rolled-back test must not send one later, to a reused user id),
    the penalties a refusal already counted as shown (a rolled-back test's ids come back),
    refusals remembered from another test's Redis with the offences they hold, and the change
    markers last read there.
    """
    # Imported here: the app registry is not ready when the test modules are loaded.
    import throttling.adapters.penalty_notices
    import throttling.engine.background.eviction_watch
    import throttling.engine.background.undo_timeouts
    import throttling.engine.countermeasures.in_force
    import throttling.engine.deciding.replies
    import throttling.engine.offences.escalations
    import throttling.engine.offences.report_batches
    import throttling.engine.policies.approvals
    import throttling.engine.policies.cache
    import throttling.engine.policies.trust
    import throttling.engine.refusal_memory

    throttling.engine.policies.cache.policies.clear()
    throttling.engine.countermeasures.in_force.measures.forget()  # blocks and surges of another test's database
    throttling.engine.countermeasures.in_force.measures.counts.take()
    throttling.engine.background.eviction_watch.eviction_watch.clear()
    throttling.engine.deciding.replies._last_failure_log[0] = 0.0
    throttling.engine.background.undo_timeouts.in_doubt.entries = []
    throttling.engine.offences.report_batches.buffer.discard()
    throttling.engine.offences.escalations._deferred.items = ()
    throttling.adapters.penalty_notices._shown.clear()
    throttling.engine.refusal_memory.local_refusals.discard()  # refusals and offences of another test's Redis
    throttling.engine.policies.trust.groups.clear()  # members' groups: a rolled-back test's ids come back
    throttling.engine.policies.approvals.approvals.clear()  # members' approvals: a rolled-back test's ids come back
    # The change markers as an emptied Redis holds them (none): the background thread's next read
    # is then no change, where the values of another test's Redis would make it end this test's
    # cached refusals and policies at a moment of its own.
    throttling.engine.policies.cache.policies._seen = None
    throttling.engine.refusal_memory.local_refusals._seen = None
    throttling.engine.policies.trust.groups._seen = None
    throttling.engine.countermeasures.in_force.measures._seen = None


def subscribers(client):
    """How many connections to a Redis server (`client`) are SUBSCRIBEd to the change channel: one per
    process (a sentinel's subscriptions, to its own channel, are left out)."""
    from throttling.engine.keys import changes_channel

    return dict(client.pubsub_numsub(changes_channel())).get(changes_channel().encode(), 0)


def settle_background_thread(client, timeout=20):
    """Return once this process's background thread has applied every message of the change channel
    published before the call, and every marker read it made before it: a test that then breaks Redis
    knows that no late message or read of the old state can still make the cached policies stale.

    A message naming no marker (which changes nothing) is published with `client` until the thread's
    subscriber hands it over: Redis delivers a subscriber's messages in order, and the thread applies
    them, and its marker reads, one after the other.
    """
    from throttling.engine.background.poller import poller
    from throttling.engine.keys import changes_channel

    token = f"0 settled-{os.getpid()}-{time.monotonic_ns()}".encode()
    arrived = threading.Event()
    pushed = poller.pushed

    def watching(message):
        pushed(message)
        if message == token:
            arrived.set()

    poller.pushed = watching
    try:
        deadline = time.monotonic() + timeout
        while not arrived.is_set():
            if time.monotonic() > deadline:
                raise AssertionError(f"the background thread did not hand over a change message within {timeout} s")
            client.publish(changes_channel(), token)  # again: the subscriber may not have been subscribed yet
            arrived.wait(0.2)
    finally:
        del poller.pushed  # the class's own method again


def deciding_connections():
    """The (address, port) of each connection this thread holds to the throttle's Redis (one per node),
    as MONITOR names its clients: what this thread's decisions were sent on."""
    from throttling.backends.redis import get_backend

    local = get_backend()._local
    held = [getattr(local, "held", None), *(getattr(local, "nodes", None) or {}).values()]
    return {tuple(map(str, h.conn._sock.getsockname()[:2])) for h in held if h is not None and h.conn._sock is not None}


def wait_for(predicate, timeout=20, interval=0.05, message="condition"):
    """Poll `predicate` until it returns something truthy; fail with `message` after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {message}")


def alive(pid):
    """True while a process with this id exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def commits(request):
    """True when the test commits what it writes (django_db(transaction=True), or a fixture that
    needs transactional_db such as live_server or celery_worker): its teardown flushes the database."""
    marker = request.node.get_closest_marker("django_db")
    by_marker = marker is not None and bool(marker.kwargs.get("transaction") or (marker.args and marker.args[0]))
    return by_marker or "transactional_db" in request.fixturenames


def ladder_back_after_flush(request):
    """A transactional test's flush empties the data migrations' rows too: the ladder comes back."""
    if commits(request):
        request.getfixturevalue("transactional_db")
        ensure_default_ladder()
