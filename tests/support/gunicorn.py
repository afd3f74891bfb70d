"""gunicorn serving the tiny throttled site of tests/support/fault_site.py, for tests that need real workers."""

import http.client
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

from tests.support.helpers import ROOT, free_port

# The limit of the site's one policy ("fault": LIMIT per 60 s per visitor).
LIMIT = 5


class Site:
    """gunicorn serving tests/support/fault_site.py on its own Redis and SQLite file.

    `env` adds to the site's environment (e.g. FAULT_METRICS, PROMETHEUS_MULTIPROC_DIR);
    `config` is a gunicorn config file (e.g. its server hooks).
    """

    def __init__(self, redis_server, worker_class, workers=4, threads=1, env=None, config=None):
        self.redis = redis_server
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="throttling-faults-")
        self.env = dict(
            os.environ,
            DJANGO_SETTINGS_MODULE="tests.support.fault_site",
            FAULT_DB=os.path.join(self.dir, "db.sqlite3"),
            FAULT_REDIS_URL=redis_server.url,
            DATABASE_URL="",
            **(env or {}),
        )
        setup = (
            "import django; django.setup();"
            "from django.core.management import call_command; call_command('migrate', verbosity=0);"
            "from throttling.models import ActionPolicy;"
            "ActionPolicy.objects.filter(action='fault').delete();"
            f"ActionPolicy.objects.create(action='fault', period=60, max_count={LIMIT})"
        )
        subprocess.run([sys.executable, "-c", setup], cwd=ROOT, env=self.env, check=True, timeout=120)
        options = ["--config", str(config)] if config else []
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "tests.support.fault_wsgi:application",
                *options,
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                str(workers),
                "--worker-class",
                worker_class,
                "--threads",
                str(threads),
                "--timeout",
                "30",
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=self.env,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                status, _ = self.post("127.0.0.1")
                if status in (201, 429):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("gunicorn did not answer within 30 s")

    def request(self, method, path, body=None, headers=None):
        """(status, body) of one request on a connection of its own."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def post(self, visitor):
        started = time.perf_counter()
        status, _ = self.request(
            "POST", "/fault/", b"{}", {"Content-Type": "application/json", "X-Forwarded-For": visitor}
        )
        return status, time.perf_counter() - started

    def burst(self, visitors, per_visitor, threads=8, during=None):
        """Concurrent requests; `during` (a callable) runs once the burst is under way."""
        results, lock = [], threading.Lock()
        jobs = [v for v in visitors for _ in range(per_visitor)]
        chunks = [jobs[i::threads] for i in range(threads)]
        started = threading.Barrier(threads + 1)

        def run(chunk):
            started.wait(10)
            for visitor in chunk:
                try:
                    outcome = self.post(visitor)
                except OSError as exc:
                    outcome = (f"error: {exc}", 0.0)
                with lock:
                    results.append(outcome)

        workers = [threading.Thread(target=run, args=(c,)) for c in chunks]
        for w in workers:
            w.start()
        started.wait(10)
        if during is not None:
            time.sleep(0.05)
            during()
        for w in workers:
            w.join(60)
        return results

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)
