"""What Prometheus reads: the collectors of the counts, and in multiprocess mode their writer to its files."""

import atexit
import logging
import os
import threading

from django.db import DatabaseError, connection

from ..models import Penalty
from .tallies import BOUNDS, Sums

try:
    import prometheus_client
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
    from prometheus_client.utils import floatToGoString
except ImportError:  # the `metrics` extra is not installed: system check E012 says so when the setting is on
    prometheus_client = None

logger = logging.getLogger("throttling")

# In multiprocess mode, how often the background thread writes what was counted to the files.
FLUSH_EVERY = 0.5

DECISIONS = ("throttling_decisions", "Decisions by action (a policy's, or other) and result (the decision's reason).")
LOCAL_REFUSALS = (
    "throttling_local_refusals",
    "Refusals answered from a process's memory without a Redis call, by action.",
)
LATENCY = ("throttling_decision_seconds", "Time a decision took, in seconds.")


def available():
    """True when prometheus-client (the `metrics` extra) is installed."""
    return prometheus_client is not None


def multiprocess_mode():
    """True when prometheus-client writes its values to files (PROMETHEUS_MULTIPROC_DIR, as under gunicorn)."""
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir"))


class PenaltiesCollector:
    """throttling_penalties_active: the penalties in force, counted in the database when scraped."""

    name = "throttling_penalties_active"
    documentation = "Penalties in force now (counted in the database at scrape time)."

    def describe(self):
        # What register() asks for, without a query.
        return [GaugeMetricFamily(self.name, self.documentation)]

    def collect(self):
        # A scrape outside a request (prometheus-client's own HTTP server starts a thread per scrape)
        # would leave the connection it opened for this count open: it is closed again here. One a
        # request already holds is left to Django, which closes it when the request ends.
        opened_here = connection.connection is None
        try:
            count = Penalty.objects.active().count()
        except DatabaseError as exc:
            logger.warning("throttling: penalties in force not counted for the metrics: %s", exc)
            return []
        finally:
            if opened_here:
                connection.close()
        return [GaugeMetricFamily(self.name, self.documentation, value=count)]


class TalliesCollector:
    """Decisions, local refusals and the latency histogram, added up from every thread's Tally when scraped."""

    def __init__(self, tallies):
        self.tallies = tallies

    def describe(self):
        return self.families(None)

    def collect(self):
        return self.families(self.tallies.sums())

    @staticmethod
    def families(sums):
        decisions = CounterMetricFamily(*DECISIONS, labels=("action", "result"))
        refusals = CounterMetricFamily(*LOCAL_REFUSALS, labels=("action",))
        if sums is None:
            return [decisions, refusals, HistogramMetricFamily(*LATENCY)]
        for key, n in sorted(sums.decisions.items()):
            decisions.add_metric(key, n)
        for action, n in sorted(sums.refusals.items()):
            refusals.add_metric((action,), n)
        cumulative, running = [], 0
        for bound, n in zip(BOUNDS, sums.buckets):
            running += n
            cumulative.append((floatToGoString(bound), running))
        return [decisions, refusals, HistogramMetricFamily(*LATENCY, buckets=cumulative, sum_value=sums.seconds)]


class Flusher:
    """Multiprocess mode: a daemon thread that writes what this process counted to its prometheus-client files.

    Custom collectors are not seen across processes, so the counts go into the
    real multiprocess Counter and Histogram values: what was added since the
    last write, every FLUSH_EVERY seconds, at interpreter exit, and before this
    process serves metrics_view. Started by the first count of a thread, never
    at import; a forked child starts its own.
    """

    def __init__(self, metrics):
        self.metrics = metrics
        self._reset()
        os.register_at_fork(after_in_child=self._reset)
        atexit.register(self.at_exit)

    def _reset(self):
        self._lock = threading.Lock()  # one write at a time: each adds what the last one did not
        self._start_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        self._written = Sums()

    def start(self):
        if self._thread is not None or self._stop.is_set():
            return
        with self._start_lock:
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="throttling-metrics", daemon=True)
                try:
                    thread.start()
                except RuntimeError:  # interpreter exit: at_exit writes what is left
                    return
                self._thread = thread

    def _run(self):
        while not self._stop.wait(FLUSH_EVERY):
            try:
                self.flush()
            except Exception:  # whatever it is, the thread lives on: the counts stay and the next write tries again
                logger.warning("throttling: metrics not written to PROMETHEUS_MULTIPROC_DIR", exc_info=True)

    def flush(self, timeout=-1):
        """Write to the files what was counted since the last write; False if another write held on past `timeout`."""
        if not self._lock.acquire(timeout=timeout):
            return False
        try:
            self._write(self.metrics.tallies.sums())
        finally:
            self._lock.release()
        return True

    def _write(self, now):
        metrics, written = self.metrics, self._written
        # Each amount is marked written as soon as it is: a failure half-way never writes one twice.
        for key, n in now.decisions.items():
            if n != written.decisions.get(key, 0):
                metrics.decisions.labels(*key).inc(n - written.decisions.get(key, 0))
                written.decisions[key] = n
        for action, n in now.refusals.items():
            if n != written.refusals.get(action, 0):
                metrics.local_refusals.labels(action).inc(n - written.refusals.get(action, 0))
                written.refusals[action] = n
        # Histogram.observe adds one to one bucket's value and the amount to the sum's; so do these.
        bucket_values, sum_value = metrics.latency._buckets, metrics.latency._sum
        for i, n in enumerate(now.buckets):
            if n != written.buckets[i]:
                bucket_values[i].inc(n - written.buckets[i])
                written.buckets[i] = n
        if now.seconds != written.seconds:
            sum_value.inc(now.seconds - written.seconds)
            written.seconds = now.seconds

    def at_exit(self):
        self._stop.set()
        # The thread may be half-way through a write: wait for it, briefly (a stuck disk must not hang the exit).
        try:
            self.flush(timeout=2)
        except OSError as exc:
            logger.warning("throttling: the last metrics were not written at exit: %s", exc)
