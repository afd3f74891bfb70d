"""Trust earned by approval: whether a member's posts are still held under ActionPolicy.hold_until_approved.

A member is held until a moderator approved that many of their held posts for the action (see Guide ›
Held for review). The count is one indexed SQL query, asked only for a member not yet known to have
earned it: a member who has is remembered by this process for good (approvals are never taken back),
a member who has not for THROTTLING_TRUST_CACHE seconds, or until an approval in this process. So
steady state costs no query for trusted members, and at most one per member and TRUST_CACHE seconds
for the new ones, whose posts are held anyway.
"""

import threading
import time

from ...common.choices import HeldStatus
from ...conf import settings
from ...models import Held
from ..decision import NEW_MEMBER

_MAXMEMBERS = 10_000


class ApprovalCounts:
    def __init__(self):
        self._lock = threading.Lock()
        self.clear()

    def clear(self):
        self._trusted = set()  # (user pk, action, needed) known to have earned it
        self._counts = {}  # (user pk, action) -> (monotonic time counted, approvals)

    def cached(self, user, action, needed):
        """True (trusted), False (still held), or None (not known here: count() it)."""
        if (user.pk, action, needed) in self._trusted:
            return True
        entry = self._counts.get((user.pk, action))
        if entry is not None and time.monotonic() - entry[0] < settings.TRUST_CACHE:
            return entry[1] >= needed
        return None

    def count(self, user, action):
        """Approved held posts of `user` for `action`: one indexed query, remembered."""
        found = Held.objects.filter(user_id=user.pk, action=action, status=HeldStatus.APPROVED).count()
        with self._lock:
            if len(self._counts) >= _MAXMEMBERS:
                self._counts.clear()  # bounded memory: the busy members come back quickly
            self._counts[user.pk, action] = (time.monotonic(), found)
        return found

    def trusted(self, user, action, needed):
        known = self.cached(user, action, needed)
        if known is None:
            known = self.count(user, action) >= needed
        if known:
            with self._lock:
                if len(self._trusted) >= _MAXMEMBERS:
                    self._trusted.clear()
                self._trusted.add((user.pk, action, needed))
        return known

    def forget(self, user_id, action):
        """A held post of the member was approved here: count again at their next decision."""
        self._counts.pop((user_id, action), None)


approvals = ApprovalCounts()


def needs_count(policy, user):
    """True when deciding `user` under `policy` would count their approvals (a query): async code
    counts them in a thread first."""
    needed = policy.hold_until_approved
    return needed is not None and user is not None and approvals.cached(user, policy.action, needed) is None


def held_for_approval(policy, user, trusted=None):
    """`policy`, holding its admissions when `user` has not earned trust yet (a visitor never has).
    `trusted`: what approvals.trusted() answered already for this decision, or None."""
    needed = policy.hold_until_approved
    if needed is None or policy.held:
        return policy
    if trusted is None and user is not None:
        trusted = approvals.trusted(user, policy.action, needed)
    if trusted:
        return policy
    return policy.holding(NEW_MEMBER)
