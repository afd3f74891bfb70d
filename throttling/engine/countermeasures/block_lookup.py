"""Blocks in memory: which block applies to a request, found by member and by address range.

The rule (see Raids › Which block applies): of the ranges that hold the client's address, the
narrowest block in force decides, a block for this action before one for every action of the same
range, then the most severe of one range; a member's own block (for this action before every
action, then the most severe) competes with it, and the more severe of the two wins. A block that
has expired is passed over at decision time, so the next one around it applies on time.
"""

import logging

from django.db.models import Count, Max

from ...common.choices import Severity
from ...models import Block
from .address_ranges import RangeIndex, bounds

logger = logging.getLogger("throttling")

REFUSE, SHADOW, TIGHTEN, LOOSEN, HOLD = (s.value for s in Severity)
# How severe each severity is, for two blocks that both apply: refusing, then holding for review,
# then tightening, then shadow (which changes nothing), then loosening.
_RANK = {REFUSE: 5, HOLD: 4, TIGHTEN: 3, SHADOW: 2, LOOSEN: 1}


# A block as the index keeps it: a plain tuple (pk, severity, multiplier, expires_at, prefix,
# for_action, refused_before, severity_key), read by these positions. The cyclic collector stops
# tracking a tuple of numbers and strings once it has seen it, where instances of a class of ours,
# 100,000 of them, would be walked at every full collection of the process while they are in force.
#   multiplier: 1 for refuse and shadow; expires_at: a Unix time, or None; prefix: the range's prefix
#   length, -1 for a member's block (never compared by width); for_action: True when it names its
#   actions; refused_before: a refusal of it was already told to moderators; severity_key: the
#   larger, the more severe.
PK, SEVERITY, MULTIPLIER, EXPIRES_AT, PREFIX, FOR_ACTION, REFUSED_BEFORE, SEVERITY_KEY = range(8)


def _severity_key(severity, multiplier):
    # Bigger is more severe; of two tightenings the smaller multiplier, of two loosenings the smaller too.
    return _RANK[severity], -multiplier


# The columns a BlockSet is built from, in order.
COLUMNS = ("pk", "network", "user_id", "actions", "severity", "multiplier", "expires_at", "first_refused_at")


class BlockSet:
    """Every block not expired when loaded, indexed for the request path.

    Built from rows of COLUMNS (tuples, as values_list() gives them). Blocks are plain tuples (see
    PK above), and the range indexes hold their positions in `specs`: nothing built here is an object
    the cyclic collector keeps walking, so indexing 100,000 blocks runs at nearly the same speed with
    the collector on as paused, and a full collection of the process does not grow with the blocks.
    """

    def __init__(self, rows=()):
        specs, places = [], []  # a block (see PK), and (version, first, last, action names)
        for pk, network, user_id, actions, severity, multiplier, expires_at, first_refused_at in rows:
            # Not validated here: a name no policy has never matches.
            names = tuple(name.strip() for name in actions.split(",") if name.strip()) if actions else ()
            try:
                version, first, last, prefix = bounds(network) if network else (0, 0, 0, -1)
                factor = float(multiplier) if multiplier is not None else 1.0
                spec = (
                    pk,
                    severity,
                    factor,
                    expires_at.timestamp() if expires_at else None,
                    prefix,
                    bool(names),
                    first_refused_at is not None,
                    _severity_key(severity, factor),
                )
            except (ValueError, KeyError) as exc:
                # Written around the admin's checks (an update(), loaddata): left out, not a failed load.
                logger.warning("throttling: block %s is not applied: %s", pk, exc)
                continue
            specs.append(spec)
            # A member's block has no range: its place holds the member's primary key, as text.
            places.append((version, first, last, names) if network else (0, str(user_id), None, names))
        # The most severe first: within one range, the first in force of a chain is the one that applies.
        order = sorted(range(len(specs)), key=lambda i: specs[i][SEVERITY_KEY], reverse=True)
        self.specs = [specs[i] for i in order]
        every, by_action, members = [], {}, {}
        for position, i in enumerate(order):
            version, first, last, names = places[i]
            if not version:  # a member's
                members.setdefault(first, []).append((self.specs[position], names))
            elif names:
                for name in names:
                    by_action.setdefault(name, []).append((version, first, last, position))
            else:
                every.append((version, first, last, position))
        self.every = RangeIndex(every)
        self.by_action = {name: RangeIndex(entries) for name, entries in by_action.items()}
        self.members = {
            uid: tuple(sorted(found, key=lambda s: (s[0][FOR_ACTION], s[0][SEVERITY_KEY]), reverse=True))
            for uid, found in members.items()
        }
        self.ranges = bool(every or by_action)
        self.count = len(specs)

    def find(self, action, number, user_pk, now):
        """The block (see PK) deciding a request of `action` from address `number` ((version, int) or None)
        by the member whose primary key is `user_pk` (as text; None for a visitor), or None."""
        found = None
        if number is not None and self.ranges:
            found = self._by_range(action, number, now)
        if user_pk is not None and self.members:
            mine = self._by_member(action, user_pk, now)
            if mine is not None and (found is None or mine[SEVERITY_KEY] > found[SEVERITY_KEY]):
                found = mine
        return found

    def _by_range(self, action, number, now):
        version, value = number
        specs = self.specs
        general = _first_in_force(specs, self.every.lookup(version, value), now) if self.every else None
        index = self.by_action.get(action)
        specific = _first_in_force(specs, index.lookup(version, value), now) if index is not None else None
        if specific is None:
            return general
        if general is None or specific[PREFIX] >= general[PREFIX]:
            return specific
        return general

    def _by_member(self, action, user_pk, now):
        specs = self.members.get(user_pk)
        if not specs:
            return None
        # Sorted: blocks naming actions first, the most severe first within each.
        for spec, names in specs:
            if (not names or action in names) and (spec[EXPIRES_AT] is None or spec[EXPIRES_AT] > now):
                return spec
        return None


def _first_in_force(specs, chain, now):
    for position in chain:
        spec = specs[position]
        if spec[EXPIRES_AT] is None or spec[EXPIRES_AT] > now:
            return spec
    return None


def load_blocks():
    """A BlockSet of the blocks in force now; expired ones stay in the table, unread."""
    return BlockSet(Block.objects.in_force().values_list(*COLUMNS).iterator(chunk_size=5000))


def fingerprint():
    """What changes whenever a block is added, saved or deleted (not an update() around save()):
    one aggregate query, so a process with 100,000 blocks rebuilds its index only when they changed."""
    return tuple(Block.objects.aggregate(n=Count("pk"), last=Max("updated_at"), top=Max("pk")).values())
