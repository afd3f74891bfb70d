"""Address ranges as sorted integer intervals: the ranges that hold an address, narrowest first, in one bisect.

CIDR ranges never overlap partly: two are either nested or apart. Flattened once into disjoint
segments, each remembering every range that holds it (narrowest first), a lookup is one bisect over
the segments' starts, whatever the number of ranges (see Raids › How a block is found). IPv4 and
IPv6 are kept apart, each in integers of its own width.
"""

import socket
from bisect import bisect_right
from itertools import groupby
from operator import itemgetter


class RangeIndex:
    """Items found by address: built from (version, first, last, item) entries (a range's first and
    last addresses as integers), read with lookup(version, number)."""

    __slots__ = ("_tables", "count")

    def __init__(self, entries):
        keyed = {4: [], 6: []}
        for n, (version, first, last, item) in enumerate(entries):
            # By start, the wider of two with one start first (hence -last), then in the order given:
            # n is unique, so the items are never compared.
            keyed[version].append((first, -last, n, item))
        self.count = 0
        self._tables = {}
        for version, ranges in keyed.items():
            ranges.sort()
            grouped = [
                (first, -negative_last, tuple(entry[3] for entry in group))
                for (first, negative_last), group in groupby(ranges, key=itemgetter(0, 1))
            ]
            self.count += len(grouped)
            self._tables[version] = _flatten(grouped)

    def lookup(self, version, number):
        """The items of every range holding the address, narrowest range first; () for none."""
        starts, lasts, chains = self._tables[version]
        i = bisect_right(starts, number) - 1
        if i >= 0 and number <= lasts[i]:
            return chains[i]
        return ()

    def __len__(self):
        return self.count


def bounds(text):
    """(version, first, last, prefix length) of a range in CIDR text ("203.0.113.0/24", "2001:db8::/32",
    an address alone); ValueError when it is not one. Parsed with the C library: loading 100,000
    blocks must not take seconds."""
    address, _, length = text.partition("/")
    if ":" in address:
        version, family, bits = 6, socket.AF_INET6, 128
    else:
        version, family, bits = 4, socket.AF_INET, 32
    try:
        number = int.from_bytes(socket.inet_pton(family, address), "big")
    except OSError:
        raise ValueError(f"{text!r} is not an IP range") from None
    prefix = int(length) if length else bits
    if not 0 <= prefix <= bits:
        raise ValueError(f"{text!r} has a prefix length out of range")
    host = (1 << (bits - prefix)) - 1
    first = number & ~host
    return version, first, first | host, prefix


def _flatten(ranges):
    """(starts, lasts, chains) of disjoint segments covering `ranges` (sorted by start, wider first):
    each segment's chain holds the items of every range around it, narrowest first."""
    starts, lasts, chains = [], [], []
    stack = []  # (last, chain) of the ranges open at the current position, outermost first
    position = 0

    def emit(first, last, chain):
        if first <= last:
            starts.append(first)
            lasts.append(last)
            chains.append(chain)

    for first, last, items in ranges:
        while stack and stack[-1][0] < first:
            closed_last, chain = stack.pop()
            emit(position, closed_last, chain)
            position = closed_last + 1
        if stack:
            emit(position, first - 1, stack[-1][1])
        stack.append((last, items + (stack[-1][1] if stack else ())))
        position = first
    while stack:
        closed_last, chain = stack.pop()
        emit(position, closed_last, chain)
        position = closed_last + 1
    return starts, lasts, chains
