"""Load the suite puts on the throttle: forked processes racing on one identity, threads deciding meanwhile."""

import multiprocessing
import threading
import time

import throttling


def _attempts(barrier, results, identity, action, attempts):
    barrier.wait(10)
    results.put(sum(throttling.check(identity, action).allowed for _ in range(attempts)))


def race(identity, action, processes, attempts):
    """Forked processes start together and each tries `attempts` times: how many were admitted in all.

    Policies must be cached before (a peek), so every process decides with the same ones.
    """
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    workers = [
        ctx.Process(target=_attempts, args=(barrier, results, identity, action, attempts)) for _ in range(processes)
    ]
    for w in workers:
        w.start()
    admitted = [results.get(timeout=30) for _ in workers]
    for w in workers:
        w.join(10)
        assert w.exitcode == 0
    return sum(admitted)


class Traffic:
    """Threads deciding `action` for 50 walkers until the block ends: every Decision, and every
    exception (which is the bug under test wherever this is used)."""

    def __init__(self, action, threads=1, pause=0.005):
        self.action, self.pause = action, pause
        self.decided, self.errors = [], []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run) for _ in range(threads)]

    def _run(self):
        from django.db import connection

        i = 0
        try:
            while not self._stop.is_set():
                i += 1
                try:
                    self.decided.append(throttling.check(f"walker-{i % 50}", self.action))
                except Exception as exc:
                    self.errors.append(exc)
                time.sleep(self.pause)
        finally:
            connection.close()  # a policy reload may have opened this thread's own connection

    def __enter__(self):
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc_info):
        self._stop.set()
        for t in self._threads:
            t.join(10)
