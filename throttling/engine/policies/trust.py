"""Trust tiers and member overrides: which limits apply to this member.

A member override in force (for the action, or for every action) wins: it
exempts the member or multiplies the limits. Otherwise the policy's first trust
tier that matches (a group the member is in, joined within N days, or both)
multiplies them. Anonymous visitors are never scaled.

Overrides are few and load with the policies (an override saved anywhere is
live everywhere within a second, like a policy). A tier naming a group needs the
member's groups: one query per member per THROTTLING_TRUST_CACHE seconds per
process, remembered here. A member who joins or leaves a group a tier names is
decided afresh everywhere: the change moves a marker that ends, in every
process, the groups remembered and the refusals decided under them.
"""

import logging
import threading
import time

from django.db import transaction
from django.utils import timezone

from ...conf import settings
from ...exceptions import BackendError
from ...models import PolicyTier
from ..background.poller import UNREAD, bump, poller
from ..keys import groups_version_key
from ..refusal_memory import local_refusals
from .cache import MEMBER

logger = logging.getLogger("throttling")

# What standing() answers for a member an override exempts (never a multiplier).
EXEMPT = "exempt"
_MAXMEMBERS = 10_000


class _GroupCache:
    def __init__(self):
        self._lock = threading.Lock()
        self._seen = UNREAD  # the groups marker as last read
        self.clear()
        poller.watch(groups_version_key, self._marker_read)

    def clear(self):
        self._entries = {}  # user pk -> (monotonic time fetched, frozenset of group ids)

    def _marker_read(self, version, pushed=False):
        # A member joined or left a group a tier names, somewhere: the groups remembered here, and
        # the refusals decided with them, may be wrong. A message is a change even at the value
        # last read (the marker lost with Redis and moved again).
        if pushed or version != self._seen:
            self._seen = version
            self.clear()
            local_refusals.clear()

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
    return (
        user is not None
        and policy.tiers
        and any(t.group_id is not None for t in policy.tiers)
        and groups.cached(user) is None
    )


def standing(policy, user, overrides, member_groups=None):
    """EXEMPT, or the multiplier of `policy`'s limits for `user` (1 when nothing applies).
    `member_groups`: the ids of the member's groups when already read (see needs_groups())."""
    if user is None:
        return 1
    return judged(
        policy,
        overrides.get(user.pk) if overrides else None,
        (lambda: groups.get(user)) if member_groups is None else (lambda: member_groups),
        getattr(user, "date_joined", None),
    )


def judged(policy, mine, groups_of, joined, now=None):
    """standing()'s rules on what is known of one member: `mine` their overrides (or None), `groups_of()`
    the ids of their groups (asked only when a tier names a group), `joined` when they joined (or None),
    judged at `now` (None: the moment of the call). A replay judges its members with it, as decisions do."""
    if mine:
        stamp = time.time() if now is None else now.timestamp()
        found = None
        for o in mine:
            if (o.action == policy.action or not o.action) and (o.expires_at is None or o.expires_at > stamp):
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
                member_groups = groups_of()
            if tier.group_id not in member_groups:
                continue
        if tier.new_member_days is not None:
            if joined is None or ((now or timezone.now()) - joined).total_seconds() > tier.new_member_days * 86400:
                continue
        return tier.multiplier
    return 1


def tiers_name(group_ids):
    """True when a trust tier names one of the groups `group_ids` (None: any group)."""
    tiers = PolicyTier.objects.filter(group__isnull=False)
    if group_ids is not None:
        tiers = tiers.filter(group_id__in=group_ids)
    return tiers.exists()


def membership_changed(sender, instance, action, reverse, pk_set, using, **kwargs):
    """m2m_changed of the user model's groups: a member who joined or left a group a tier names is
    decided afresh, here at once and in every process once the change is committed."""
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    if reverse:  # group.user_set.add(...): the group is the instance
        named = tiers_name([instance.pk])
    else:  # user.groups.clear() has no pk_set: the groups it removed are gone already
        named = tiers_name(None if action == "post_clear" else pk_set)
    if named:
        groups_changed()
        transaction.on_commit(announce_groups_changed, using=using, robust=True)


def groups_changed():
    """Forget, in this process, the members' groups and the refusals decided with them."""
    groups.clear()
    local_refusals.clear()


def announce_groups_changed():
    """groups_changed() here, and in every process as the message of the moved marker arrives."""
    # Again after the commit: a decision between the change and its commit read the old groups.
    groups_changed()
    try:
        groups._seen = bump(groups_version_key)
    except BackendError as exc:
        logger.warning(
            "throttling: a change of groups a trust tier names could not be announced (%s); other processes "
            "read members' groups again within THROTTLING_TRUST_CACHE seconds, and end their refusals "
            "when each Retry-After does",
            exc,
        )
