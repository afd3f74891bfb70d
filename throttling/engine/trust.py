"""Trust tiers and member overrides: which limits apply to this member.

A member override in force (for the action, or for every action) wins: it
exempts the member or multiplies the limits. Otherwise the policy's first trust
tier that matches (a group the member is in, joined within N days, or both)
multiplies them. Anonymous visitors are never scaled.

Overrides are few and load with the policies (an override saved anywhere is
live everywhere within a second, like a policy). A tier naming a group needs the
member's groups: one query per member per THROTTLING_TRUST_CACHE seconds per
process, remembered here.
"""

import threading
import time

from django.utils import timezone

from ..conf import settings
from .policies import MEMBER

# What standing() answers for a member an override exempts (never a multiplier).
EXEMPT = "exempt"
_MAXMEMBERS = 10_000


class _GroupCache:
    def __init__(self):
        self._lock = threading.Lock()
        self.clear()

    def clear(self):
        self._entries = {}  # user pk -> (monotonic time fetched, frozenset of group ids)

    def cached(self, user):
        entry = self._entries.get(user.pk)
        if entry is not None and time.monotonic() - entry[0] < settings.TRUST_CACHE:
            return entry[1]
        return None

    def get(self, user):
        ids = self.cached(user)
        if ids is None:
            ids = frozenset(user.groups.values_list("id", flat=True))
            with self._lock:
                if len(self._entries) >= _MAXMEMBERS:
                    self._entries.clear()  # bounded memory: the busy members come back quickly
                self._entries[user.pk] = (time.monotonic(), ids)
        return ids


groups = _GroupCache()


def needs_groups(policy, user):
    """True when deciding `user` under `policy` would query the member's groups (not remembered yet)."""
    return user is not None and any(t.group_id is not None for t in policy.tiers) and groups.cached(user) is None


def standing(policy, user, overrides):
    """EXEMPT, or the multiplier of `policy`'s limits for `user` (1 when nothing applies)."""
    if user is None:
        return 1
    mine = overrides.get(user.pk) if overrides else None
    if mine:
        now = time.time()
        found = None
        for o in mine:
            if (o.action == policy.action or not o.action) and (o.expires_at is None or o.expires_at > now):
                # An override for this action beats one for every action.
                if found is None or (o.action and not found.action):
                    found = o
        if found is not None:
            if found.exempt:
                return EXEMPT
            return found.multiplier if policy.scope == MEMBER else 1
    if not policy.tiers or policy.scope != MEMBER:
        return 1
    member_groups = None
    for tier in policy.tiers:
        if tier.group_id is not None:
            if member_groups is None:
                member_groups = groups.get(user)
            if tier.group_id not in member_groups:
                continue
        if tier.new_member_days is not None:
            joined = getattr(user, "date_joined", None)
            if joined is None or (timezone.now() - joined).total_seconds() > tier.new_member_days * 86400:
                continue
        return tier.multiplier
    return 1
