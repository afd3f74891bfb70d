"""Refusals answered from this process's memory, so a flood costs Redis nothing (see Architecture ›
Floods answered locally)."""

import heapq
import itertools
import logging
import os
import threading
import time

from django.core.signals import setting_changed
from django.dispatch import receiver

from ..backends.redis import get_backend
from ..common import observe
from ..conf import settings
from ..exceptions import BackendError
from .background.poller import UNREAD, bump, poller
from .decision import Decision
from .keys import refusals_version_key
from .moderators import is_moderator

# The first word of the message a refund publishes on the change channel (see LocalRefusals).
REFUND = "refund"

logger = logging.getLogger("throttling")

# Refusals one process remembers at most; the soonest to expire give way first.
MAX_ENTRIES = 10_000


class _Refusal:
    __slots__ = ("decision", "expires", "received", "counted", "local")

    def __init__(self, decision, now, counted):
        self.decision = decision
        self.received = now
        self.expires = now + decision.retry_after
        # (offences key, pending key, escalation spec) when its refused checks are offences, else None
        self.counted = counted
        self.local = 0  # offences answered here since


class LocalRefusals:
    """Refusals Redis gave, by what the decision depended on: (identity, action, target, member, cost).

    Only refusals are kept, never admissions, and each only until its Retry-After ends; a hit answers
    the same refusal with the wait counted down. The refused checks it answers are offences: counted
    here and added to Redis by the background thread at each look (add_offences.lua). Reset, a
    penalty applied or lifted, every policy or override save and a change of groups a trust tier
    names move a marker in Redis and publish it on the change channel: every process's refusals end
    when the message arrives, or at its next marker read (within THROTTLING_POLICY_REFRESH seconds)
    if it missed it. A refund publishes "refund <state key>" in its own script call: every process
    forgets the refusals decided on that state as the message arrives, and all of them when its
    subscriber comes back after missing messages.
    """

    def __init__(self, max_entries=MAX_ENTRIES):
        self.max_entries = max_entries
        self._seen = UNREAD
        # Counts every clear() and forget(): a refusal Redis gave before one of them is not kept
        # after it (remember()'s `generation`).
        self.generation = 0
        self._reset()
        os.register_at_fork(after_in_child=self._reset)
        poller.watch(refusals_version_key, self._marker_read)
        poller.hear(REFUND, self.forget, self.clear)
        poller.every_look(self.flush)

    def _reset(self):
        # A forked child starts empty: the parent adds the offences it counted.
        self._lock = threading.Lock()
        self.entries = {}
        self._expiries = []  # heap of (expires, sequence, key); entries replaced or gone linger
        self._by_state = {}  # state key (a decision's keys[0]) -> keys of the entries decided on it
        self._sequence = itertools.count()
        self._offences = {}  # (offences key, pending key, spec) -> refused checks not yet in Redis

    def answer(self, key, user, policy, record):
        """The refusal remembered for `key`, counted down, or None: Redis decides."""
        entry = self.entries.get(key)
        if entry is None:
            return None
        now = time.monotonic()
        left = entry.expires - now
        if left <= 0 or (user is not None and policy.exempt_staff and is_moderator(user)):
            return None
        d = entry.decision
        offences = d.offences
        if record and entry.counted is not None:
            with self._lock:
                entry.local += 1
                self._offences[entry.counted] = self._offences.get(entry.counted, 0) + 1
            offences += entry.local
        decision = Decision(
            False,
            d.action,
            d.limit,
            d.remaining,
            left,
            max(0.0, d.reset_after - (now - entry.received)),
            d.reason,
            d.identity,
            offences,
            d.verb,
            d.penalty,
            False,
            (),
            d.windows,
            d.keys,
            d.target,
        )
        observe.refused_locally(decision)
        return decision

    def remember(self, key, decision, counted, generation):
        """Keep a refusal Redis gave until its Retry-After ends (THROTTLING_LOCAL_REFUSALS).

        `generation` is self.generation read before the decision's policy and Redis were: when a
        change ended the refusals (clear) or a refund made room (forget) since, the refusal was
        decided on what no longer holds, and is not kept."""
        if decision.retry_after <= 0 or not settings.LOCAL_REFUSALS:
            return
        now = time.monotonic()
        entry = _Refusal(decision, now, counted)
        with self._lock:
            if generation != self.generation:
                return
            entries = self.entries
            if key not in entries and len(entries) >= self.max_entries:
                self._evict(entries)
            entries[key] = entry
            if decision.keys:
                self._by_state.setdefault(decision.keys[0], set()).add(key)
            heapq.heappush(self._expiries, (entry.expires, next(self._sequence), key))
            if len(self._expiries) > 2 * self.max_entries:
                self._expiries = [(e.expires, next(self._sequence), k) for k, e in entries.items() if e.expires > now]
                heapq.heapify(self._expiries)

    def _evict(self, entries):
        """Drop the entry that expires soonest (an expired one first)."""
        expiries = self._expiries
        while expiries:
            expires, _, key = heapq.heappop(expiries)
            entry = entries.get(key)
            if entry is not None and entry.expires == expires:
                del entries[key]
                self._unindex(key, entry)
                return

    def _unindex(self, key, entry):
        if entry.decision.keys:
            keys = self._by_state.get(entry.decision.keys[0])
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_state[entry.decision.keys[0]]

    def forget(self, state_key):
        """Drop the refusals decided on one state (the log or bucket `state_key`): a refund made room there."""
        with self._lock:
            self.generation += 1
            if self.entries:
                for key in self._by_state.pop(state_key, ()):
                    self.entries.pop(key, None)

    def clear(self):
        """Forget every refusal (offences already answered are still added to Redis)."""
        with self._lock:
            self.generation += 1
            self.entries = {}
            self._expiries = []
            self._by_state = {}

    def discard(self):
        """Forget every refusal and the offences not yet added to Redis (tests)."""
        self.clear()
        with self._lock:
            self._offences = {}

    def end_everywhere(self):
        """End cached refusals here now and in every process as the message of the moved marker
        arrives (reset, lift, penalty)."""
        self.clear()
        try:
            # Seen as read: a marker lost with Redis later (a restart) is a change too.
            self._seen = bump(refusals_version_key)
        except BackendError as exc:
            logger.warning(
                "throttling: could not tell other processes to forget their refusals (%s); "
                "each ends when its Retry-After does",
                exc,
            )

    def _marker_read(self, version, pushed=False):
        # A message on the change channel is a change even when its value is the one last read
        # (the marker lost with Redis and counted up again).
        if pushed or version != self._seen:
            self._seen = version
            self.clear()

    def flush(self):
        """Add the offences answered here to Redis (the background thread, at each look)."""
        with self._lock:
            pending, self._offences = self._offences, {}
        if not pending:
            return
        # Lost, not resent, if Redis fails: a call that failed half way may have counted some.
        get_backend().run_scripts("add_offences", [([off, esc], [n, spec]) for (off, esc, spec), n in pending.items()])


local_refusals = LocalRefusals()


@receiver(setting_changed)
def _settings_changed(setting, **kwargs):
    # Another Redis, another prefix, or local refusals turned off: what was remembered no longer holds.
    if setting == "CACHES" or setting.startswith("THROTTLING_"):
        local_refusals.clear()
