"""Per-thread counts of decisions, added up when they are read (see Architecture › Counting off the request path)."""

import os
import threading

# A decision costs 20 µs to a few ms; a stalled Redis ends at the 0.1 s socket timeout.
BUCKETS = (0.00002, 0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25)
BOUNDS = (*BUCKETS, float("inf"))  # every time finds its bucket


class Sums:
    """Counts: decisions by (action label, result), local refusals by action label, and the latency histogram
    (one count per bucket, not cumulative, and the seconds added up)."""

    __slots__ = ("decisions", "refusals", "buckets", "seconds")

    def __init__(self):
        self.decisions = {}
        self.refusals = {}
        self.buckets = [0] * len(BOUNDS)
        self.seconds = 0.0

    def add(self, other):
        """Add `other`'s counts, which its own thread may be adding to meanwhile.

        dict.copy() and list() copy in one step, holding the GIL (or, on a
        free-threaded build, the object's lock): no count is seen half-made.
        """
        for mine, theirs in ((self.decisions, other.decisions.copy()), (self.refusals, other.refusals.copy())):
            for key, n in theirs.items():
                mine[key] = mine.get(key, 0) + n
        self.buckets = [a + b for a, b in zip(self.buckets, list(other.buckets))]
        self.seconds += other.seconds


class Tally(Sums):
    """One thread's counts, written by that thread only: an update is never lost to another thread's."""

    __slots__ = ("thread",)

    def __init__(self, thread):
        super().__init__()
        self.thread = thread


class Tallies:
    """Every thread's Tally of this process, and those of threads that ended, added up (see Architecture ›
    Counting off the request path)."""

    def __init__(self):
        self.local = threading.local()
        self._reset()
        # A forked child starts from nothing: its parent writes what it counted itself.
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self):
        self._lock = threading.Lock()
        self._live = []
        self._ended = Sums()
        self._prune_at = 32
        try:
            del self.local.tally  # the forking thread's, which goes on in the child
        except AttributeError:
            pass

    def here(self):
        """The calling thread's Tally, made on its first count."""
        tally = Tally(threading.current_thread())
        with self._lock:
            self._live.append(tally)
            if len(self._live) >= self._prune_at:  # threads come and go (a server's thread per request)
                self._prune()
                self._prune_at = 2 * len(self._live) + 32
        self.local.tally = tally
        return tally

    def sums(self):
        """Everything counted in this process so far."""
        with self._lock:
            self._prune()
            total = Sums()
            total.add(self._ended)
            for tally in self._live:
                total.add(tally)
        return total

    def _prune(self):
        # A thread that ended adds nothing more: its counts join the others' for good.
        live = []
        for tally in self._live:
            if tally.thread.is_alive():
                live.append(tally)
            else:
                self._ended.add(tally)
        self._live = live
