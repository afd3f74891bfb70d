"""Decisions that timed out after being sent, undone once Redis answers again."""

import threading
import time
from typing import NamedTuple

from ...backends.redis import get_backend
from ...exceptions import BackendError
from ..keys import TOKEN_BUCKET


class Undo(NamedTuple):
    """One script call that undoes what a timed-out call may have written, due once Redis answers again."""

    at: float  # time.monotonic() when it was queued
    script: str  # the script's name (backends/lua/)
    keys: tuple
    args: tuple


class InDoubt:
    """Decisions that timed out after being sent: once Redis answers again, and a moment later
    (a stalled server reads what was waiting first), what they may have written is undone."""

    SETTLE_AFTER = 1.0  # seconds
    MAX = 1000

    def __init__(self):
        self.entries = []
        self._lock = threading.Lock()

    def add(self, algorithm, keys, token, cost):
        """A decision's own record: its log entries or its tokens (`keys`: the decision's)."""
        kind = "bucket" if algorithm == TOKEN_BUCKET else "log"
        self.add_call("forget", (keys[0], keys[3]), (kind, token, cost))

    def add_call(self, script, keys, args):
        """A script call that undoes what else such a decision may have written (its content)."""
        with self._lock:
            if len(self.entries) < self.MAX:
                self.entries.append(Undo(time.monotonic(), script, tuple(keys), tuple(args)))

    def settle(self):
        due = time.monotonic() - self.SETTLE_AFTER
        with self._lock:
            ready = [undo for undo in self.entries if undo.at <= due]
            self.entries = [undo for undo in self.entries if undo.at > due]
        backend = get_backend()
        for index, undo in enumerate(ready):
            try:
                backend.script_call(undo.script, list(undo.keys), list(undo.args))
            except BackendError:
                with self._lock:  # Redis went away again: try the rest later
                    self.entries[:0] = ready[index:]
                return


in_doubt = InDoubt()
