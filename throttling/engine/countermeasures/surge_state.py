"""Surges in memory: the multiplier of every limit while one is on, and the counts of surge triggers.

A trigger's action is counted in each process as it is decided (a dict update, no Redis command);
the background thread adds the counts to Redis at each look and compares the site-wide estimate
with the threshold. The first process to see it crossed claims the surge in Redis and asks Celery
to start it (see Raids › Surges a policy starts itself).
"""

import logging
import os
import threading
from dataclasses import dataclass

from django.db.models import Q
from django.utils import timezone

from ...models import Surge, SurgeTrigger
from ..background.task_sender import sender
from ..keys import trigger_claim_key, trigger_counts_key

logger = logging.getLogger("throttling")

START_TASK = "throttling.tasks.start_triggered_surge"


@dataclass(frozen=True, slots=True)
class SurgeSpec:
    pk: int
    multiplier: float
    actions: frozenset  # empty: every action
    ends_at: float  # a Unix time

    def covers(self, action, now):
        return self.ends_at > now and (not self.actions or action in self.actions)


@dataclass(frozen=True, slots=True)
class TriggerSpec:
    pk: int
    action: str
    threshold: int
    period: int
    minutes: int


class SurgeSet:
    """Surges in force when loaded (each stops applying at its end), and the enabled triggers by action."""

    def __init__(self, surges=(), triggers=()):
        self.surges = tuple(surges)
        self.triggers = {t.action: t for t in triggers}
        # Triggers whose surge is on: their action is not counted meanwhile.
        self.surging = frozenset()

    def multiplier(self, action, now):
        """The smallest multiplier of the surges in force for `action` (surges never add up), or 1."""
        found = 1
        for surge in self.surges:
            if surge.multiplier < found and surge.covers(action, now):
                found = surge.multiplier
        return found

    def __bool__(self):
        return bool(self.surges or self.triggers)


def load_surges():
    now = timezone.now()
    surges = [
        SurgeSpec(
            s.pk,
            float(s.multiplier),
            frozenset(a.strip() for a in s.actions.split(",") if a.strip()),
            s.ends_at.timestamp(),
        )
        for s in Surge.objects.in_force(now)
    ]
    triggers = [
        TriggerSpec(t.pk, t.policy.action, t.threshold, t.period, t.minutes)
        for t in SurgeTrigger.objects.filter(enabled=True, policy__enabled=True).select_related("policy")
    ]
    surging = set(Surge.objects.in_force(now).filter(~Q(trigger=None)).values_list("trigger_id", flat=True))
    found = SurgeSet(surges, triggers)
    found.surging = frozenset(t.action for t in triggers if t.pk in surging)
    return found


class TriggerCounts:
    """Decisions of trigger actions counted in this process, until the background thread adds them to Redis."""

    def __init__(self):
        self._reset()
        # A forked child starts empty: its parent adds what it counted.
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self):
        self._lock = threading.Lock()
        self._counts = {}

    def add(self, action, n):
        with self._lock:
            self._counts[action] = self._counts.get(action, 0) + n

    def take(self):
        with self._lock:
            counts, self._counts = self._counts, {}
        return counts

    def flush(self, backend, surges):
        """Add what was counted here to Redis; claim and start the surge of each trigger whose site-wide
        count is past its threshold (the background thread, at each look)."""
        counts = self.take()
        for action, n in counts.items():
            trigger = surges.triggers.get(action)
            if trigger is None or action in surges.surging:
                continue
            # A BackendError loses this look's counts (not resent): the count is an estimate anyway.
            current, previous, into = backend.count_window(trigger_counts_key(action), trigger.period, n)
            estimate = site_estimate(current, previous, into, trigger.period)
            if estimate > trigger.threshold and backend.set_nx(
                trigger_claim_key(action), trigger.pk, trigger.minutes * 60
            ):
                logger.warning(
                    "throttling: %r passed %d in %d s across the site (about %d): starting its surge",
                    action,
                    trigger.threshold,
                    trigger.period,
                    estimate,
                )
                sender.send(START_TASK, (trigger.pk, estimate))


def site_estimate(current, previous, into_ms, period):
    """The site-wide count over the last `period` seconds: the current window's count plus the previous
    window's, weighted by how much of it is still inside the period (as if spread evenly)."""
    left = max(0.0, 1.0 - into_ms / (period * 1000))
    return int(current + previous * left)
