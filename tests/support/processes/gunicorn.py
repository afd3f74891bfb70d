"""gunicorn serving the tiny throttled site of tests/support/sites/fault/settings.py, for tests that need real workers."""

import http.client
import sys
import threading
import time

from tests.support.processes.site_process import SiteProcess

# The limit of the site's one policy ("fault": LIMIT per 60 s per visitor).
LIMIT = 5


class Site(SiteProcess):
    """gunicorn serving tests/support/sites/fault/settings.py on its own Redis and SQLite file.

    `env` adds to the site's environment (e.g. FAULT_METRICS, PROMETHEUS_MULTIPROC_DIR);
    `config` is a gunicorn config file (e.g. its server hooks).
    """

    settings = "tests.support.sites.fault.settings"
    database_variable = "FAULT_DB"
    redis_variable = "FAULT_REDIS_URL"
    prefix = "throttling-faults-"

    def __init__(self, redis_server, worker_class, workers=4, threads=1, env=None, config=None):
        self.redis = redis_server
        setup = (
            "from throttling.models import ActionPolicy;"
            "ActionPolicy.objects.filter(action='fault').delete();"
            f"ActionPolicy.objects.create(action='fault', period=60, max_count={LIMIT})"
        )
        super().__init__(redis_server.url, setup, env)
        options = ["--config", str(config)] if config else []
        self.serve(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "tests.support.sites.fault.wsgi:application",
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
            "gunicorn",
        )

    def answers(self):
        status, _ = self.post("127.0.0.1")
        return status in (201, 429)

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
