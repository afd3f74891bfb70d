"""Reading the throttle's Prometheus metrics in tests: changes since a moment, in one process or summed
over a multiprocess directory, and the samples of a scraped page."""

import os
import tempfile
from pathlib import Path

from prometheus_client import REGISTRY, CollectorRegistry, multiprocess


def registry_of(directory=None):
    """The default registry, or one adding up every process's files in a PROMETHEUS_MULTIPROC_DIR."""
    if directory is None:
        return REGISTRY
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(directory))
    return registry


def samples(registry):
    """{(sample name, ((label, value), ...)): value} of the throttle's metrics."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in registry.collect()
        if family.name.startswith("throttling_")
        for sample in family.samples
    }


def counted_by_process(directory, name="throttling_decisions_total"):
    """{pid: total of the counter `name`} of each process that wrote a counter file in a multiprocess directory."""
    counted = {}
    for path in Path(directory).glob("counter_*.db"):
        with tempfile.TemporaryDirectory() as alone:
            os.symlink(path, Path(alone) / path.name)
            total = sum(value for (sample, _labels), value in samples(registry_of(alone)).items() if sample == name)
        if total:
            counted[int(path.stem.rsplit("_", 1)[1])] = int(total)
    return counted


def scraped(families, name, labels=()):
    """{(label values, ...): value} of one sample name in parsed families (prometheus_client.parser)."""
    return {
        tuple(sample.labels[label] for label in labels): sample.value
        for family in families.values()
        for sample in family.samples
        if sample.name == name
    }


class Counts:
    """The throttle's counters as changes since this object was made (other tests count too)."""

    def __init__(self, directory=None):
        self.registry = registry_of(directory)
        self.start = samples(self.registry)

    def changed(self, name, labels):
        """{(label values, ...): change} of the samples of `name` that changed."""
        now = samples(self.registry)
        changes = {}
        for (sample, pairs), value in now.items():
            if sample == name:
                change = value - self.start.get((sample, pairs), 0.0)
                if change:
                    found = dict(pairs)
                    changes[tuple(found[label] for label in labels)] = int(change)
        return changes

    def labels(self, name):
        """The label sets of every sample of `name`."""
        return [dict(pairs) for sample, pairs in samples(self.registry) if sample == name]

    def decisions(self):
        return self.changed("throttling_decisions_total", ("action", "result"))

    def local_refusals(self):
        return {action: n for (action,), n in self.changed("throttling_local_refusals_total", ("action",)).items()}

    def escalations(self):
        return {outcome: n for (outcome,), n in self.changed("throttling_escalations_total", ("outcome",)).items()}

    def backend_errors(self):
        return self.changed("throttling_backend_errors_total", ()).get((), 0)

    def latency(self):
        """Decisions timed by the histogram since."""
        return self.changed("throttling_decision_seconds_count", ()).get((), 0)
