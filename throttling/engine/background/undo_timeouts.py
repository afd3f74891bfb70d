"""Decisions that timed out after being sent, undone once Redis answers again."""

import threading
import time

from ...backends.redis import get_backend
from ...exceptions import BackendError
from ..keys import TOKEN_BUCKET


class InDoubt:
    """Decisions that timed out after being sent: once Redis answers again, and a moment later
    (a stalled server reads what was waiting first), what they may have written is undone."""

    SETTLE_AFTER = 1.0  # seconds
    MAX = 1000

    def __init__(self):
        self.entries = []
        self._lock = threading.Lock()

    def add(self, algorithm, keys, token, cost):
        with self._lock:
            if len(self.entries) < self.MAX:
                self.entries.append((time.monotonic(), algorithm, keys[0], keys[3], token, cost))

    def add_call(self, script, keys, args):
        """A script call that undoes what else such a decision may have written (its content)."""
        with self._lock:
            if len(self.entries) < self.MAX:
                self.entries.append((time.monotonic(), script, keys, args))

    def settle(self):
        due = time.monotonic() - self.SETTLE_AFTER
        with self._lock:
            ready = [e for e in self.entries if e[0] <= due]
            self.entries = [e for e in self.entries if e[0] > due]
        backend = get_backend()
        for index, entry in enumerate(ready):
            try:
                if len(entry) == 4:
                    backend.decide(*entry[1:])
                    continue
                _, algorithm, state_key, pending_key, token, cost = entry
                kind = "bucket" if algorithm == TOKEN_BUCKET else "log"
                backend.forget(state_key, pending_key, kind, token, cost)
            except BackendError:
                with self._lock:  # Redis went away again: try the rest later
                    self.entries[:0] = ready[index:]
                return


in_doubt = InDoubt()
