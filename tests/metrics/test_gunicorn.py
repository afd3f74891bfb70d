"""Metrics under gunicorn with several workers (multiprocess mode): the view adds up every worker's counts,
those of a worker that exited included."""

import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from demo_site.redis_server import RedisServer
from tests.support.helpers import alive, wait_for
from tests.support.metrics import counted_by_process, scraped
from tests.support.processes.gunicorn import LIMIT, Site

pytestmark = pytest.mark.gunicorn

CONFIG = Path(__file__).resolve().parents[1] / "support" / "processes" / "gunicorn_metrics.py"
VISITORS = [f"203.0.113.{i}" for i in range(1, 13)]
PER_VISITOR = 8  # LIMIT admitted, the rest throttled


@pytest.fixture
def site():
    server = RedisServer()
    server.start()
    directory = tempfile.mkdtemp(prefix="throttling-metrics-")
    site = Site(
        server,
        "sync",
        workers=3,
        env={"FAULT_METRICS": "1", "PROMETHEUS_MULTIPROC_DIR": directory},
        config=CONFIG,
    )
    site.metrics_dir = Path(directory)
    yield site
    site.stop()
    server.stop()
    shutil.rmtree(directory, ignore_errors=True)


def scrape(site):
    status, body = site.request("GET", "/metrics/")
    assert status == 200, body
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    return (
        scraped(families, "throttling_decisions_total", ("action", "result")),
        scraped(families, "throttling_decision_seconds_count")[()],
    )


def test_the_view_adds_up_every_workers_counts(site):
    results = site.burst(VISITORS, PER_VISITOR, threads=6)
    admitted = len(VISITORS) * LIMIT
    refused = len(VISITORS) * (PER_VISITOR - LIMIT)
    assert [status for status, _ in results].count(201) == admitted
    assert [status for status, _ in results].count(429) == refused
    # Site's own first request (to know gunicorn was up) was admitted and counted too.
    expected = {("fault", "admitted"): admitted + 1, ("fault", "throttled"): refused}
    total = admitted + refused + 1
    # Each worker writes what it counted to its files at least once a second: the totals get there.
    wait_for(lambda: scrape(site) == (expected, total), timeout=10, message=f"the view to say {expected}")
    by_worker = counted_by_process(site.metrics_dir)
    # The burst was spread over the workers, and each counted its own.
    assert len(by_worker) >= 2 and sum(by_worker.values()) == total, by_worker

    # A worker that exits (here: told to) is replaced; what it counted still counts.
    gone = max(by_worker, key=by_worker.get)
    os.kill(gone, signal.SIGTERM)
    wait_for(lambda: not alive(gone), timeout=20, message="the worker to exit")
    assert scrape(site) == (expected, total)
