"""Prometheus metrics of the throttle (THROTTLING_METRICS): the engine's hooks made real, and a view to scrape.

The engine calls the hooks of throttling.observe on every decision; this module
replaces those empty functions with ones that count, when the setting is on
(at app ready and whenever the setting changes). A decision only adds to plain
counts of the thread that made it; they are added up when scraped (a collector
on prometheus_client's default registry, so django-prometheus exports them too)
or, under gunicorn with PROMETHEUS_MULTIPROC_DIR set, written to this process's
files by a background thread at least once a second (see Operations › Metrics).
"""

import atexit
import logging
import os
import threading
from bisect import bisect_left

from django.db import DatabaseError, connection
from django.http import HttpResponse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_safe

from . import observe
from .choices import Reason
from .conf import settings
from .engine.policies import policies
from .models import Penalty

try:
    import prometheus_client
    from prometheus_client import CollectorRegistry, Counter, Histogram, multiprocess
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
    from prometheus_client.exposition import choose_encoder
    from prometheus_client.utils import floatToGoString
except ImportError:  # the `metrics` extra is not installed: system check E012 says so when the setting is on
    prometheus_client = None

logger = logging.getLogger("throttling")

# The action label of a decision whose action has no policy (unknown, or not loaded): an
# action label only ever names a policy, so the series stay bounded by the policies.
OTHER = "other"
# Reasons a decision only gives when its action has a policy; the others may come without one.
_FROM_A_POLICY = frozenset(Reason.values) - {Reason.UNKNOWN_ACTION, Reason.DISABLED}
# A decision costs 20 µs to a few ms; a stalled Redis ends at the 0.1 s socket timeout.
BUCKETS = (0.00002, 0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25)
_BOUNDS = (*BUCKETS, float("inf"))  # every time finds its bucket
# Most remembered labels of (action, reason); past it a decision's label is looked up each time.
_LABELS_MAX = 1000
# In multiprocess mode, how often the background thread writes what was counted to the files.
FLUSH_EVERY = 0.5

DECISIONS = ("throttling_decisions", "Decisions by action (a policy's, or other) and result (the decision's reason).")
LOCAL_REFUSALS = (
    "throttling_local_refusals",
    "Refusals answered from a process's memory without a Redis call, by action.",
)
LATENCY = ("throttling_decision_seconds", "Time a decision took, in seconds.")

# The engine's own empty hooks, put back when the setting goes off.
_HOOKS = ("decided", "refused_locally", "escalation", "backend_error")
_EMPTY = {name: getattr(observe, name) for name in _HOOKS}


def available():
    """True when prometheus-client (the `metrics` extra) is installed."""
    return prometheus_client is not None


def multiprocess_mode():
    """True when prometheus-client writes its values to files (PROMETHEUS_MULTIPROC_DIR, as under gunicorn)."""
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir"))


def action_label(action, reason):
    """The action label of a decision: its action when it has a policy, else OTHER."""
    if reason in _FROM_A_POLICY or policies.get_cached(action) is not None:
        return action
    return OTHER


class Sums:
    """Counts: decisions by (action label, result), local refusals by action label, and the latency histogram
    (one count per bucket, not cumulative, and the seconds added up)."""

    __slots__ = ("decisions", "refusals", "buckets", "seconds")

    def __init__(self):
        self.decisions = {}
        self.refusals = {}
        self.buckets = [0] * len(_BOUNDS)
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
        for bound, n in zip(_BOUNDS, sums.buckets):
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


class Metrics:
    """The throttle's metrics, made once per process on the default registry."""

    def __init__(self):
        self.tallies = Tallies()
        self.multiprocess = multiprocess_mode()
        if self.multiprocess:
            self.decisions = Counter(*DECISIONS, ("action", "result"))
            self.local_refusals = Counter(*LOCAL_REFUSALS, ("action",))
            self.latency = Histogram(*LATENCY, buckets=BUCKETS)
            self.flusher = Flusher(self)
            self._on_new_thread = self.flusher.start
        else:
            prometheus_client.REGISTRY.register(TalliesCollector(self.tallies))
            self.flusher = None
            self._on_new_thread = None
        self.escalations = Counter(
            "throttling_escalations",
            "Escalations by outcome: queued, sent, kept_for_resend, resent, applied, lost.",
            ("outcome",),
        )
        self.backend_errors = Counter(
            "throttling_backend_errors", "Decisions Redis could not answer (failed open or closed)."
        )
        self.penalties = PenaltiesCollector()
        prometheus_client.REGISTRY.register(self.penalties)
        # Escalations and Redis failures are rare: counted straight into prometheus-client's values.
        self.outcomes = {outcome: self.escalations.labels(outcome) for outcome in observe.ESCALATION_OUTCOMES}
        self.decision_labels = {}
        self.refusal_labels = {}

    def hooks(self):
        """The real hooks, as closures over what they touch: a decision adds to its thread's plain counts."""
        local, decision_labels, refusal_labels = self.tallies.local, self.decision_labels, self.refusal_labels
        tally_here, decision_label, refusal_label = self._tally_here, self._decision_label, self._refusal_label
        bounds = _BOUNDS

        def decided(decision, seconds):
            try:
                tally = local.tally
            except AttributeError:
                tally = tally_here()
            key = decision_labels.get((decision.action, decision.reason)) or decision_label(decision)
            counts = tally.decisions
            counts[key] = counts.get(key, 0) + 1
            tally.buckets[bisect_left(bounds, seconds)] += 1
            tally.seconds += seconds

        def refused_locally(decision):
            try:
                tally = local.tally
            except AttributeError:
                tally = tally_here()
            label = refusal_labels.get(decision.action) or refusal_label(decision)
            counts = tally.refusals
            counts[label] = counts.get(label, 0) + 1

        outcomes, backend_errors = self.outcomes, self.backend_errors

        def escalation(outcome):
            outcomes[outcome].inc()

        return {
            "decided": decided,
            "refused_locally": refused_locally,
            "escalation": escalation,
            "backend_error": backend_errors.inc,
        }

    def _tally_here(self):
        tally = self.tallies.here()
        if self._on_new_thread is not None:
            self._on_new_thread()
        return tally

    def _decision_label(self, decision):
        label = (action_label(decision.action, decision.reason), decision.reason)
        if len(self.decision_labels) < _LABELS_MAX:
            self.decision_labels[decision.action, decision.reason] = label
        return label

    def _refusal_label(self, decision):
        label = action_label(decision.action, decision.reason)
        if len(self.refusal_labels) < _LABELS_MAX:
            self.refusal_labels[decision.action] = label
        return label

    def forget_labels(self):
        """Look the labels up again (a policy added since may now name its action)."""
        self.decision_labels.clear()
        self.refusal_labels.clear()

    def flush(self):
        """Multiprocess mode: write what this process counted to its files now (a no-op otherwise)."""
        if self.flusher is not None:
            self.flusher.flush()


_made = []


def _metrics():
    if not _made:
        _made.append(Metrics())
    return _made[0]


def flush():
    """Multiprocess mode: write what this process counted to its files now (a no-op otherwise)."""
    if _made:
        _made[0].flush()


def configure():
    """Count when THROTTLING_METRICS is on (and prometheus-client installed); empty hooks otherwise."""
    if settings.METRICS and available():
        metrics = _metrics()
        metrics.forget_labels()
        hooks = metrics.hooks()
    else:
        hooks = _EMPTY
    for name in _HOOKS:
        setattr(observe, name, hooks[name])


def setting_changed(setting, **kwargs):
    """Turn the hooks on or off with the setting (override_settings included)."""
    if setting == "THROTTLING_METRICS":
        configure()


@require_safe
def metrics_view(request):
    """The metrics in Prometheus' text format: the default registry, or in multiprocess mode
    (PROMETHEUS_MULTIPROC_DIR) every process's files added up. Restrict who may reach it."""
    if not available():
        return HttpResponse(
            _('The metrics need prometheus-client: pip install "django-action-throttling[metrics]".'),
            status=503,
            content_type="text/plain; charset=utf-8",
        )
    registry = prometheus_client.REGISTRY
    if multiprocess_mode():
        try:
            flush()  # this process's latest counts, at least
        except OSError as exc:  # the files of every process are still worth serving
            logger.warning("throttling: this process's metrics were not written before the scrape: %s", exc)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        if settings.METRICS:
            registry.register(PenaltiesCollector())
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encoder(registry), content_type=content_type)
