"""Load the suite puts on the throttle: forked processes racing on one identity, threads deciding meanwhile."""

import multiprocessing
import threading
import time

import throttling
from throttling.engine.background.poller import poller


def _attempts(barrier, results, identity, action, attempts, options):
    barrier.wait(10)
    results.put(sum(throttling.check(identity, action, **options).allowed for _ in range(attempts)))
    as_at_exit()


def as_at_exit():
    """What a process does at exit, which multiprocessing's forked children skip (they end with
    os._exit): the offences of refusals it answered from memory go to Redis."""
    poller.stop()


def race(identity, action, processes, attempts):
    """Forked processes start together and each tries `attempts` times: how many were admitted in all.

    Policies must be cached before (a peek), so every process decides with the same ones.
    """
    return _forked([identity] * processes, action, attempts, {})


def race_posts(identities, action, text, attempts):
    """One forked process per identity, started together, each posting `text` `attempts` times:
    how many posts were admitted in all. Policies must be cached before (a peek)."""
    return _forked(identities, action, attempts, {"content": text})


def _forked(identities, action, attempts, options):
    """One forked process per identity, started together, each deciding `attempts` times with `options`
    passed to check(): how many were admitted in all."""
    from django.db import connections

    # A forked child must not share the parent's database socket (PostgreSQL's protocol breaks
    # when two processes use one): closed here, each side opens its own when it needs one.
    connections.close_all()
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(len(identities)), ctx.Queue()
    workers = [
        ctx.Process(target=_attempts, args=(barrier, results, identity, action, attempts, options))
        for identity in identities
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


def decide_for(seconds, action, members=40, pause=0.002):
    """Decisions from one new thread for `seconds`, over `members` identities: (decisions, the
    connections the thread decided on, as MONITOR names them). This thread peeks at each member first."""
    from django.db import connection

    from tests.support.helpers import deciding_connections

    out = {}
    for i in range(members):  # from this thread: the script is known to every node the members use
        throttling.peek(f"member-{i}", action)

    def run():
        decisions, i = [], 0
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                decisions.append(throttling.check(f"member-{i % members}", action))
                i += 1
                time.sleep(pause)
            out["result"] = decisions, deciding_connections()
        finally:
            connection.close()  # a policy reload may have opened this thread's own connection

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(seconds + 30)
    return out["result"]
