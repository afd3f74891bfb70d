"""Whether the throttle's Redis may lose keys on its own (eviction), and noticing when it did."""

import logging
import threading

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ...backends.redis import get_backend
from ...conf import settings
from ...exceptions import BackendError
from ...signals import redis_keys_lost

logger = logging.getLogger("throttling")


def risk(memory):
    """A sentence on why this Redis (its INFO memory fields) may drop the throttle's keys, or None."""
    policy = memory.get("maxmemory_policy", "noeviction")
    limit = int(memory.get("maxmemory", 0) or 0)
    used = int(memory.get("used_memory", 0) or 0)
    if limit and policy != "noeviction":
        return _(
            "Redis may evict keys (maxmemory-policy %(policy)s, maxmemory %(limit)s bytes): a penalised "
            "member whose mirror is evicted is admitted, and evicted logs or buckets forget what they counted."
        ) % {"policy": policy, "limit": f"{limit:,}"}
    if limit and used >= 0.9 * limit:
        return _(
            "Redis is near its maxmemory (%(used)s of %(limit)s bytes): with noeviction every write will "
            "fail, and decisions will fail open or closed instead of counting."
        ) % {"used": f"{used:,}", "limit": f"{limit:,}"}
    return None


HINT = gettext_lazy(
    "Give the throttle a Redis of its own with maxmemory-policy noeviction (CONFIG SET "
    "maxmemory-policy noeviction, or in redis.conf), and enough maxmemory for its keys; "
    "the documentation’s benchmark pages list the memory per member and action."
)


def current_risk():
    """risk() of the throttle's Redis now (of any master, on a cluster); None when it cannot be asked (never raises)."""
    try:
        infos = get_backend().infos("memory")
    except BackendError:
        return None
    return next(filter(None, map(risk, infos)), None)


def evicted_keys():
    """Redis's count of keys it evicted since it started (summed over a cluster's masters),
    or None when it cannot be asked."""
    try:
        return sum(int(info.get("evicted_keys", 0)) for info in get_backend().infos("stats"))
    except (BackendError, ValueError):
        return None


class EvictionWatch:
    """Looks at Redis's evicted-keys count every THROTTLING_EVICTION_CHECK seconds (from the process's
    background thread), and says when it rose.

    The first look of a process warns once if this Redis may evict at all; a
    rise sends `redis_keys_lost` (the app's receiver queues a penalty resync).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._generation = 0
        self.clear()

    def clear(self):
        with self._lock:
            self._generation += 1  # a look under way when this clears is not counted
            self._looked_at = 0.0
            self._evicted = None
            self.looks = 0  # looks that got an answer

    def look_if_due(self, now):
        with self._lock:
            if now - self._looked_at < settings.EVICTION_CHECK:
                return
            self._looked_at = now
            generation = self._generation
        evicted = evicted_keys()
        if evicted is None:
            return
        # The answer is taken under the lock: two looks at once (a background thread replaced while
        # its predecessor finishes one) see one first look between them, never two. The first look's
        # warning is given under it too, so a clear() waits for it: a look under way when the watch is
        # cleared either warned before the clear or is not counted, never warns after it.
        with self._lock:
            if generation != self._generation:
                return
            self.looks += 1
            before, self._evicted = self._evicted, evicted
            if before is None:
                problem = current_risk()
                if problem:
                    logger.warning("throttling: %s %s", problem, HINT)
        if before is not None and evicted > before:
            redis_keys_lost.send(sender=EvictionWatch, reason="evicted", count=evicted - before)


eviction_watch = EvictionWatch()
