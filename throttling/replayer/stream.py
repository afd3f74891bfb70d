"""One pass over an action's history, streamed from the database member by member, fed to every consumer.

A member's rows arrive together, oldest first: each consumer gets one member's actions at a time and
keeps nothing of theirs but what it counts, so a million rows never become a list in memory (the
most held at once is one member's rows). A site-wide count is one identity for everyone: its rows
arrive by target and time instead, in chunks, and consumers keep their state from chunk to chunk.
"""

import heapq
from bisect import bisect_right
from datetime import UTC, datetime, timedelta
from datetime import time as clock
from itertools import groupby, islice
from operator import itemgetter

from django.conf import settings as django_settings
from django.utils import timezone

# Rows fetched from the database at a time (and handed over at a time, for a site-wide count).
CHUNK = 5000
# How often (in rows, roughly: at a member's last row) progress is reported.
PROGRESS_EVERY = 20_000
_ONE_US = timedelta(microseconds=1)


def epoch():
    """1970-01-01 as the database's datetimes come (aware when USE_TZ): what Redis TIME counts from."""
    return datetime(1970, 1, 1, tzinfo=UTC) if django_settings.USE_TZ else datetime(1970, 1, 1)


class Days:
    """The local date of an action (the site's time zone): each day's bounds, once found, are kept."""

    def __init__(self):
        self.starts, self.bounds = [], []  # day starts in µs, sorted; (start, end, date) alike
        self.epoch = epoch()

    def __call__(self, t, when):
        at = bisect_right(self.starts, t) - 1
        if at >= 0 and t < self.bounds[at][1]:
            return self.bounds[at][2]
        aware = timezone.is_aware(when)
        day = (timezone.localtime(when) if aware else when).date()
        start = datetime.combine(day, clock.min)
        end = datetime.combine(day + timedelta(days=1), clock.min)
        if aware:
            start, end = timezone.make_aware(start), timezone.make_aware(end)
        low, high = (start - self.epoch) // _ONE_US, (end - self.epoch) // _ONE_US
        self.starts.insert(at + 1, low)
        self.bounds.insert(at + 1, (low, high, day))
        return day


class Consumer:
    """What the pass feeds: times are whole microseconds since 1970, as Redis TIME counts; targets are
    the target field's values (None without one); rows are the database rows (member, time[, target])."""

    def member(self, pk, times, targets, rows):
        """All of one member's actions, oldest first."""
        raise NotImplementedError

    def site(self, pks, times, targets, rows):
        """The next chunk of a site-wide count's actions (by target, then time), with each one's member."""
        raise NotImplementedError

    def finish(self):
        pass


class Tally(Consumer):
    """Actions, members, and the busiest members (most actions), kept in a bounded heap."""

    def __init__(self, keep=10):
        self.actions = self.members = 0
        self.keep = keep
        self._heap = []
        self._counts = {}  # a site-wide count meets members in any order: their actions added up by id

    def member(self, pk, times, targets, rows):
        self.members += 1
        self.actions += len(times)
        self._push(pk, len(times))

    def site(self, pks, times, targets, rows):
        counts = self._counts
        for pk in pks:
            counts[pk] = counts.get(pk, 0) + 1

    def finish(self):
        if self._counts:
            self.members, self.actions = len(self._counts), sum(self._counts.values())
            for pk, n in self._counts.items():
                self._push(pk, n)

    def _push(self, pk, n):
        item = (n, -pk if isinstance(pk, int) else 0, pk)  # equal counts: the lower id first
        if len(self._heap) < self.keep:
            heapq.heappush(self._heap, item)
        elif item > self._heap[0]:
            heapq.heapreplace(self._heap, item)

    def busiest(self):
        """[(member, actions)], most actions first."""
        return [(pk, n) for n, _, pk in sorted(self._heap, reverse=True)]


def stream(source, since, until, consumers, *, site=False, progress=None):
    """Feed every action of `source` in [since, until) to `consumers`; returns the rows read.

    `site`: one count for everyone (rows by target and time, in chunks). `progress(rows)` is called
    every PROGRESS_EVERY rows or so, and at the end. Rows whose member is gone are skipped.
    """
    rows = source.rows(since, until, by_time=site).iterator(chunk_size=CHUNK)
    start = epoch()
    one = _ONE_US
    targeted = source.target is not None
    read, report = 0, PROGRESS_EVERY
    if site:
        batches = iter(lambda: list(islice(rows, CHUNK)), [])
        for batch in batches:
            batch = [row for row in batch if row[0] is not None]
            pks = [row[0] for row in batch]
            times = [(row[1] - start) // one for row in batch]
            targets = [row[2] for row in batch] if targeted else None
            for consumer in consumers:
                consumer.site(pks, times, targets, batch)
            read += len(batch)
            if progress is not None and read >= report:
                progress(read)
                report = read + PROGRESS_EVERY
    else:
        for pk, group in groupby(rows, key=itemgetter(0)):
            if pk is None:
                continue  # an action whose member is gone has nobody to count it against
            mine = list(group)
            times = [(row[1] - start) // one for row in mine]
            targets = [row[2] for row in mine] if targeted else None
            for consumer in consumers:
                consumer.member(pk, times, targets, mine)
            read += len(mine)
            if progress is not None and read >= report:
                progress(read)
                report = read + PROGRESS_EVERY
    for consumer in consumers:
        consumer.finish()
    if progress is not None:
        progress(read)
    return read
