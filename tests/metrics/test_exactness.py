"""Counts are exact: decisions from many threads at once, scraped meanwhile, from threads that come and go;
in multiprocess mode written by a background thread, at exit, and by a forked child only for itself."""

import os
import subprocess
import sys
import threading

import pytest
from prometheus_client import REGISTRY

import throttling
from tests.support.helpers import ROOT, wait_for
from tests.support.metrics import Counts, counted_by_process, registry_of
from tests.support.penalties import run_together
from tests.support.processes.metrics_process import CHILD_DECISIONS, PER_THREAD, THREADS
from throttling.common import observe

pytestmark = [pytest.mark.django_independent, pytest.mark.django_db]

LIMIT, ATTEMPTS = 40, 100  # per member: 40 admitted, 60 throttled
CALLS = 20000


@pytest.fixture
def metrics_on(settings):
    settings.THROTTLING_METRICS = True


@pytest.fixture
def busy_switching():
    """Threads switch every microsecond, not every 5 ms: an update two threads could both make would be lost."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def test_threads_deciding_at_once_are_counted_exactly(metrics_on, busy_switching, redis_server, policy):
    policy("reply", 60, LIMIT)
    throttling.peek("nobody", "reply")  # cached for every thread (theirs cannot see this test's transaction)
    counts = Counts()
    outcome = run_together(8, lambda i: [throttling.check(f"member-{i}", "reply").reason for _ in range(ATTEMPTS)])
    assert [exc for _, exc in outcome] == [None] * 8
    assert counts.decisions() == {("reply", "admitted"): 8 * LIMIT, ("reply", "throttled"): 8 * (ATTEMPTS - LIMIT)}
    assert counts.latency() == 8 * ATTEMPTS  # the peek came before


def test_no_count_is_lost_to_threads_scrapes_or_threads_that_end(metrics_on, busy_switching):
    admitted = throttling.Decision(True, "reply")
    refused = throttling.Decision(False, "reply", reason="throttled")
    counts = Counts()
    done = threading.Event()

    def scrape():
        while not done.is_set():
            REGISTRY.collect()  # adds up every thread's counts while they are being added to
            list(registry_of().collect())

    def hammer(i):
        for _ in range(CALLS):
            observe.decided(admitted, 0.00003)
            observe.refused_locally(refused)

    scraper = threading.Thread(target=scrape)
    scraper.start()
    try:
        outcome = run_together(8, hammer)
        # Then 60 threads that count once each and end: their counts outlive them.
        for _ in range(6):
            outcome += run_together(10, lambda i: observe.decided(refused, 0.3))
    finally:
        done.set()
        scraper.join()
    assert [exc for _, exc in outcome] == [None] * 68
    assert counts.decisions() == {("reply", "admitted"): 8 * CALLS, ("reply", "throttled"): 60}
    assert counts.local_refusals() == {"reply": 8 * CALLS}
    assert counts.latency() == 8 * CALLS + 60


def counting_process(directory, mode):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.processes.metrics_process", mode],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_multiprocess_counts_are_written_by_a_background_thread(tmp_path):
    process = counting_process(tmp_path, "wait")
    try:
        pid = int(process.stdout.readline())
        # The process is alive and idle: only its background thread can write the counts.
        wait_for(
            lambda: counted_by_process(tmp_path) == {pid: THREADS * PER_THREAD},
            timeout=10,
            message="the counts in the process's files",
        )
        assert Counts(tmp_path).start[("throttling_decision_seconds_count", ())] == THREADS * PER_THREAD
        assert process.poll() is None
    finally:
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0 and err == ""


def test_multiprocess_counts_are_written_at_exit_and_a_forked_child_writes_only_its_own(tmp_path):
    process = counting_process(tmp_path, "exit")
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0 and err == ""  # quiet at exit: no warning, no traceback
    pid, child = (int(line) for line in out.split())
    assert counted_by_process(tmp_path) == {pid: THREADS * PER_THREAD, child: CHILD_DECISIONS}


def test_the_view_writes_its_own_processs_counts_before_it_answers(tmp_path):
    """In multiprocess mode the view shows the files: the answering process writes its latest counts first."""
    process = counting_process(tmp_path, "view")
    out, err = process.communicate(timeout=30)  # (its database has no tables: the penalties gauge is left out)
    assert process.returncode == 0, err
    pid, shown = (int(line) for line in out.split())
    assert shown == THREADS * PER_THREAD
    assert counted_by_process(tmp_path) == {pid: THREADS * PER_THREAD}
