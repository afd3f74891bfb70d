"""Prometheus metrics of the throttle (THROTTLING_METRICS): the engine's hooks made real, and a view to scrape.

The engine calls the hooks of throttling.common.observe on every decision; this module
replaces those empty functions with ones that count, when the setting is on
(at app ready and whenever the setting changes). A decision only adds to plain
counts of the thread that made it; they are added up when scraped (a collector
on prometheus_client's default registry, so django-prometheus exports them too)
or, under gunicorn with PROMETHEUS_MULTIPROC_DIR set, written to this process's
files by a background thread at least once a second (see Operations › Metrics).
"""

import logging
from bisect import bisect_left

from django.http import HttpResponse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_safe

from ..common import observe
from ..common.choices import Reason
from ..conf import settings
from ..engine.policies.cache import policies
from .export import (
    DECISIONS,
    LATENCY,
    LOCAL_REFUSALS,
    Flusher,
    PenaltiesCollector,
    TalliesCollector,
    available,
    multiprocess_mode,
    prometheus_client,
)
from .tallies import BOUNDS, BUCKETS, Tallies

if prometheus_client is not None:
    from prometheus_client import CollectorRegistry, Counter, Histogram, multiprocess
    from prometheus_client.exposition import choose_encoder

__all__ = ["OTHER", "available", "configure", "flush", "metrics_view", "multiprocess_mode", "setting_changed"]

logger = logging.getLogger("throttling")

# The action label of a decision whose action has no policy (unknown, or not loaded): an
# action label only ever names a policy, so the series stay bounded by the policies.
OTHER = "other"
# The result of a decision held for review (Decision.held), whatever its reason: admitted, and queued.
HELD = "held"
# Reasons a decision only gives when its action has a policy; the others may come without one.
_FROM_A_POLICY = (frozenset(Reason.values) - {Reason.UNKNOWN_ACTION, Reason.DISABLED}) | {HELD}
# Most remembered labels of (action, reason); past it a decision's label is looked up each time.
_LABELS_MAX = 1000

# The engine's own empty hooks, put back when the setting goes off.
_HOOKS = ("decided", "refused_locally", "escalation", "backend_error")
_EMPTY = {name: getattr(observe, name) for name in _HOOKS}


def action_label(action, reason):
    """The action label of a decision: its action when it has a policy, else OTHER."""
    if reason in _FROM_A_POLICY or policies.get_cached(action) is not None:
        return action
    return OTHER


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
        bounds = BOUNDS

        def decided(decision, seconds):
            try:
                tally = local.tally
            except AttributeError:
                tally = tally_here()
            # A held decision is admitted: its own result, never counted with the refusals of its reason.
            reason = HELD if decision.held else decision.reason
            key = decision_labels.get((decision.action, reason)) or decision_label(decision.action, reason)
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

    def _decision_label(self, action, reason):
        label = (action_label(action, reason), reason)
        if len(self.decision_labels) < _LABELS_MAX:
            self.decision_labels[action, reason] = label
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
