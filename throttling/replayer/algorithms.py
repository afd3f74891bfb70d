"""The engine's two algorithms in Python, decision for decision: the sliding log and the GCRA token bucket.

Each class is one identity's state under fixed windows ((period seconds, max_count), ...), fed the
times of its actions in order, in whole microseconds as Redis TIME gives them, one action (cost 1)
at a time. They follow backends/lua/sliding_log.lua and token_bucket.lua step for step, with the
same boundaries and the same floating-point arithmetic (see Architecture › Knowing what a limit
would do); the replay's differential test holds them to a deliberately simple reference, and that
reference to the Redis scripts themselves.
"""

import math

# The bucket's tolerance, as token_bucket.lua allows it: 1e-9 of a token.
EPS = 1e-9
US = 1_000_000


class SlidingLog:
    """sliding_log.lua: admitted when, in every window, fewer than max_count admitted actions lie in
    (now − period, now]; a refused action is not logged, and is logged in no window."""

    __slots__ = ("periods", "maxes", "log", "starts")

    def __init__(self, windows):
        self.periods = tuple(p * US for p, _ in windows)
        self.maxes = tuple(m for _, m in windows)
        self.log = []  # admitted times, oldest first
        # Per window, the index of its oldest entry still inside it: times only grow, so each
        # start only moves forward (what ZCOUNT "(now - period" +inf counts, without a search).
        self.starts = [0] * len(windows)

    def admit(self, now):
        return not self.refused((now,))

    def refused(self, times, stop=False):
        """The indexes of `times` (in order, never earlier than the last time decided) refused, each
        action decided after the ones before it; with `stop`, only the first refused."""
        out = []
        log, starts, periods, maxes = self.log, self.starts, self.periods, self.maxes
        append = log.append
        if len(periods) == 1:
            # One window: the same steps, with its numbers in local names.
            period, most, start = periods[0], maxes[0], starts[0]
            for i, now in enumerate(times):
                floor, size = now - period, len(log)
                while start < size and log[start] <= floor:
                    start += 1
                if size - start >= most:
                    out.append(i)
                    if stop:
                        break
                else:
                    append(now)
            starts[0] = start
            self._forget()
            return out
        windows = range(len(periods))
        for i, now in enumerate(times):
            size = len(log)
            admitted = True
            for w in windows:
                floor, start = now - periods[w], starts[w]
                while start < size and log[start] <= floor:
                    start += 1
                starts[w] = start
                if size - start >= maxes[w]:
                    admitted = False
                    break
            if admitted:
                append(now)
            else:
                out.append(i)
                if stop:
                    break
        self._forget()
        return out

    def _forget(self):
        # Entries older than every window count nowhere: dropped, as the script trims them, so a
        # site-wide log holds one longest window, not the month.
        drop = min(self.starts)
        if drop > 4096:
            del self.log[:drop]
            self.starts = [s - drop for s in self.starts]


class Bucket:
    """token_bucket.lua: per window a level in tokens that drains by max_count every period; an
    action is admitted when level + 1 <= max_count (within EPS) in every window, and then adds one
    token to each. The state key's TTL is replayed too: a key that expired reads as every bucket full.
    """

    __slots__ = ("periods", "maxes", "since", "levels", "expires_ms")

    def __init__(self, windows):
        # tonumber(ARGV) * 1000000 and tonumber(ARGV): doubles, as Lua holds them.
        self.periods = tuple(float(p) * 1000000.0 for p, _ in windows)
        self.maxes = tuple(float(m) for _, m in windows)
        self.since = None  # the Redis time of the last write, or None: no key
        self.levels = ()
        self.expires_ms = 0

    def admit(self, now):
        return not self.refused((now,))

    def refused(self, times, stop=False):
        """As SlidingLog.refused(), for the bucket."""
        if len(self.periods) == 1:
            return self._refused_one(times, stop)
        out = []
        periods, maxes = self.periods, self.maxes
        windows = range(len(periods))
        since, stored, expires_ms = self.since, self.levels, self.expires_ms
        levels = [0.0] * len(periods)  # this action's levels, before it is taken
        # A key never written, or expired, reads as every bucket full: every level 0, so the action
        # is admitted (max_count is at least 1) and each level becomes 1, whatever the time.
        first = [0 - 0 * n / p + 1 for p, n in zip(periods, maxes)]
        first_ttl = math.ceil(max(level * p / n for level, p, n in zip(first, periods, maxes)) / 1000)
        for i, now in enumerate(times):
            if since is None or now // 1000 > expires_ms:
                stored, since, expires_ms = first, now, now // 1000 + first_ttl
                continue
            elapsed = now - since
            if elapsed < 0:
                elapsed = 0
            admitted = True
            for w in windows:
                n = maxes[w]
                # (stored or 0) - elapsed * n / period, evaluated left to right as Lua does.
                level = stored[w] - elapsed * n / periods[w]
                if level < 0:
                    level = 0.0
                elif level > n:
                    level = n
                if level + 1 - n > EPS:
                    admitted = False
                    break
                levels[w] = level + 1
            if not admitted:
                out.append(i)
                if stop:
                    break
                continue
            stored = levels[:]
            full = 0.0
            for w in windows:
                drain = stored[w] * periods[w] / maxes[w]
                if drain > full:
                    full = drain
            # SET ... PX ceil(full / 1000): the key is gone once Redis's millisecond clock passes that.
            since, expires_ms = now, now // 1000 + math.ceil(full / 1000)
        self.since, self.levels, self.expires_ms = since, stored, expires_ms
        return out

    def _refused_one(self, times, stop):
        # One window: the same steps as refused(), with its level in a local name.
        out = []
        period, n = self.periods[0], self.maxes[0]
        since, expires_ms = self.since, self.expires_ms
        stored = self.levels[0] if self.levels else 0
        ceil = math.ceil
        first = 0 - 0 * n / period + 1
        first_ttl = ceil(first * period / n / 1000)
        for i, now in enumerate(times):
            if since is None or now // 1000 > expires_ms:
                # A key never written, or expired: the bucket is full, the action admitted.
                stored, since, expires_ms = first, now, now // 1000 + first_ttl
                continue
            elapsed = now - since
            level = stored - (elapsed if elapsed > 0 else 0) * n / period
            if level < 0:
                level = 0.0
            elif level > n:
                level = n
            if level + 1 - n > EPS:
                out.append(i)
                if stop:
                    break
                continue
            stored = level + 1
            since, expires_ms = now, now // 1000 + ceil(stored * period / n / 1000)
        self.since, self.levels, self.expires_ms = since, (stored,) if since is not None else (), expires_ms
        return out


ALGORITHMS = {"sliding_log": SlidingLog, "token_bucket": Bucket}


def sliding_peak(times, period):
    """The most actions in any (t − period, t] of `times` (sorted microseconds): with a window of
    that period alone, a sliding log refuses this identity nothing at this maximum or above, and
    something at any maximum below it (the first action over it finds the log holding all before)."""
    span = period * US
    best, start = 0, 0
    for end, now in enumerate(times):
        floor = now - span
        while times[start] <= floor:
            start += 1
        if end - start + 1 > best:
            best = end - start + 1
    return best


def bucket_need(times, period, peak=None):
    """The smallest max_count with which a token bucket of `period` alone admits all of `times`.

    A pause of two periods drains any bucket of this period to exactly zero (its level is at most
    max_count and the 1e-9 tolerance, and drains max_count per period), so the actions split into
    bursts decided apart, and the answer is the largest burst's. A burst of k actions needs at most k,
    and at most its sliding peak: bursts that cannot raise the answer found so far are not replayed.
    """
    span = 2 * period * US
    cuts = [i for i, (before, now) in enumerate(zip(times, times[1:]), 1) if now - before >= span]
    bursts = list(zip([0, *cuts], [*cuts, len(times)]))
    bursts.sort(key=lambda b: b[0] - b[1])  # the longest first
    need = 1
    for begin, end in bursts:
        if end - begin <= need:
            break
        burst = times[begin:end]
        found = sliding_peak(burst, period) if len(bursts) > 1 or peak is None else peak
        if found > need and not _admits_all(burst, period, need):
            need = _burst_need(burst, period, found, need)
    return need


def _admits_all(times, period, n):
    return not Bucket(((period, n),)).refused(times, stop=True)


def _burst_need(times, period, peak, refused):
    """The smallest bucket that admits all of `times`, known to be above `refused`.

    One that holds the sliding peak never refuses (in any stretch of time τ the peak allows at most
    N(1 + τ/period)); within one period a bucket admits at most 2N, so one below half the peak
    refuses. The answer is found by bisection between, each step replaying these actions only.
    """
    low, high = max(refused, (peak + 1) // 2 - 1), peak  # low refuses something (or is 0)
    while not _admits_all(times, period, high):  # never taken in exact arithmetic; kept so rounding cannot mislead
        low, high = high, high + 1
    while high - low > 1:
        mid = (low + high) // 2
        if _admits_all(times, period, mid):
            high = mid
        else:
            low = mid
    return high
