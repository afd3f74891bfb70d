"""A real Celery worker process for tests: the suite's Redis as broker, the test database.

`settings` names the Django settings module the worker runs with: the suite's by default,
integration/spirit's for the forum's own tests.
"""

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.db import connection

from tests.support.helpers import ROOT

# The ids of the tasks this process sent to the default queue, with no countdown, in the current
# test (tests/conftest.py clears it as a test starts): what the session's worker may be running
# when the test ends.
SENT = []
_FINISHED = re.compile(r"Task \S+\[([0-9a-f-]+)\] (?:succeeded in|retry:|raised )")


def record_sends(app):
    """Have `app.send_task` note the id of each task sent to the default queue without a countdown in SENT."""
    send_task = app.send_task

    def recorded(name, *args, **options):
        result = send_task(name, *args, **options)
        if options.get("queue") in (None, app.conf.task_default_queue) and not (
            options.get("countdown") or options.get("eta")
        ):
            SENT.append(result.id)
        return result

    app.send_task = recorded


class CeleryWorker:
    """`celery -A tests.support.processes.celery_app worker` in its own process (solo pool: one task at a time)."""

    session = None  # the session's worker once started (tests/conftest.py's _session_worker)

    def __init__(self, redis_url, broker_url, queues=("celery",), name="w1", env=None, settings="tests.settings"):
        self.redis_url = redis_url
        self.settings = settings
        self.broker_url = broker_url
        self.queues = queues
        self.name = name
        self.extra_env = dict(env or {})
        self.process = None
        self.log = Path(os.environ.get("TMPDIR", "/tmp")) / f"throttling-worker-{os.getpid()}-{name}.log"

    def env(self):
        env = dict(os.environ)
        env.update(
            DJANGO_SETTINGS_MODULE=self.settings,
            THROTTLING_TEST_REDIS_URL=self.redis_url,
            THROTTLING_TEST_BROKER_URL=self.broker_url,
            THROTTLING_TEST_DB_NAME=str(connection.settings_dict["NAME"]),
            PYTHONUNBUFFERED="1",
        )
        env.update(self.extra_env)
        return env

    def start(self, timeout=30):
        self._out = open(self.log, "w")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "tests.support.processes.celery_app",
                "worker",
                "--pool=solo",
                "--loglevel=INFO",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-n",
                f"{self.name}@%h",
                "-Q",
                ",".join(self.queues),
            ],
            env=self.env(),
            cwd=ROOT,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"Celery worker exited at start:\n{self.tail()}")
            if " ready." in self.log.read_text(errors="replace"):
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"Celery worker not ready within {timeout} s:\n{self.tail()}")

    def settle(self, task_ids, timeout=10):
        """Wait until this worker has finished each of `task_ids` (its log says so), or `timeout`
        seconds; True when it has. A test's teardown waits so before the database is flushed: a
        task still writing would meet the flush (a deadlock on PostgreSQL)."""
        if not task_ids or self.process is None or self.process.poll() is not None:
            return True
        deadline = time.monotonic() + timeout
        while True:
            try:
                finished = set(_FINISHED.findall(self.log.read_text(errors="replace")))
            except OSError:
                return True
            if finished.issuperset(task_ids):
                return True
            if time.monotonic() > deadline or self.process.poll() is not None:
                return False
            time.sleep(0.05)

    def tail(self, lines=40):
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def signals(self, kind=None, crossing=None):
        """The penalty signals this worker sent, as [(kind, penalty_id, crossing)] (tests/support/processes/celery_app.py)."""
        from tests.support.processes.celery_app import SIGNAL_MARK

        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return []
        sent = []
        for line in text.splitlines():
            at = line.find(SIGNAL_MARK)  # the worker logs what receivers print
            if at >= 0:
                name, pk, run = line[at + len(SIGNAL_MARK) :].split()
                sent.append((name, int(pk), run))
        return [s for s in sent if (kind is None or s[0] == kind) and (crossing is None or s[2] == crossing)]

    @contextlib.contextmanager
    def paused(self):
        """SIGSTOP for the block, SIGCONT after: what is sent meanwhile waits, so nothing races the worker."""
        os.kill(self.process.pid, signal.SIGSTOP)
        try:
            yield self
        finally:
            os.kill(self.process.pid, signal.SIGCONT)

    def kill(self):
        """SIGKILL: the worker dies without acknowledging the task in hand."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
        if getattr(self, "_out", None):
            self._out.close()
