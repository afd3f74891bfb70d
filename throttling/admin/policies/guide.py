"""What each algorithm means for a policy, in figures a moderator can weigh: worst case, refill, memory."""

from django.utils.translation import gettext, ngettext

from ...common.choices import Algorithm
from ...common.words import describe_window, wait_in_words
from ...conf import MAX_LOG_ENTRIES

SLIDING_LOG, TOKEN_BUCKET = Algorithm.SLIDING_LOG, Algorithm.TOKEN_BUCKET

# Measured with MEMORY USAGE (bench/, Redis 7, jemalloc): a sorted set keeps a
# compact list up to 128 entries (~20 B each), then a skiplist (~100 B each);
# a bucket is one short string whatever the limit.
_LOG_COMPACT_BASE, _LOG_COMPACT_PER_ENTRY = 110, 22
_LOG_SKIPLIST_PER_ENTRY = 102
_BUCKET_BYTES = 152
MEMBERS = 100_000


def log_bytes(entries):
    """Memory of one sliding log holding `entries` entries."""
    if entries <= 128:
        return _LOG_COMPACT_BASE + _LOG_COMPACT_PER_ENTRY * entries
    return _LOG_SKIPLIST_PER_ENTRY * entries


def bucket_bytes(windows):
    return _BUCKET_BYTES + 8 * (len(windows) - 1)


def size_in_words(n):
    for unit, name in ((1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB")):
        if n >= unit:
            return f"{n / unit:.1f} {name}"
    return f"{n} B"


def _refill(period, max_count):
    interval = period / max_count
    if interval >= 1:
        if interval == int(interval) or interval >= 120:
            return gettext("one token every %(wait)s") % {"wait": wait_in_words(interval)}
        return gettext("one token every %(seconds)s seconds") % {"seconds": f"{interval:.1f}"}
    return gettext("%(n)s tokens a second") % {"n": f"{max_count / period:,.0f}"}


def window_rows(windows):
    """Per window (period, max_count): what each algorithm allows and how it refills."""
    rows = []
    for period, max_count in windows:
        rows.append(
            {
                "period": period,
                "max_count": max_count,
                "label": describe_window(period, max_count),
                "log_worst": max_count,
                "bucket_worst": 2 * max_count - 1,
                "refill": _refill(period, max_count),
                "log_allowed": max_count <= MAX_LOG_ENTRIES,
            }
        )
    return rows


def memory(windows, algorithm):
    """(bytes per active member, bytes for MEMBERS active members) for one action."""
    if algorithm == TOKEN_BUCKET:
        per = bucket_bytes(windows)
    else:
        # The log holds what its longest window admits.
        longest = max(windows)
        per = log_bytes(longest[1])
    return per, per * MEMBERS


def recommendation(windows):
    """One line: which algorithm suits this limit."""
    biggest = max(m for _, m in windows)
    if biggest > MAX_LOG_ENTRIES:
        return gettext("Use the token bucket: a sliding log cannot remember more than %(cap)s actions per member.") % {
            "cap": f"{MAX_LOG_ENTRIES:,}"
        }
    per_log, _ = memory(windows, SLIDING_LOG)
    if per_log > 4 * bucket_bytes(windows):
        return gettext(
            "For cheap, bursty actions such as likes the token bucket saves memory; keep the sliding "
            "log where “never more than the maximum in any period” must hold, such as posts and flags."
        )
    return gettext(
        "Either works; the sliding log is exact (never more than the maximum in any period) and "
        "cheap at this size, so it is the safer choice for posts, replies and flags."
    )


def explain(windows, algorithm):
    """Everything the admin shows beside the algorithm choice."""
    per_log, all_log = memory(windows, SLIDING_LOG)
    per_bucket, all_bucket = memory(windows, TOKEN_BUCKET)
    return {
        "rows": window_rows(windows),
        "log_memory": (size_in_words(per_log), size_in_words(all_log)),
        "bucket_memory": (size_in_words(per_bucket), size_in_words(all_bucket)),
        "members": f"{MEMBERS:,}",
        "recommendation": recommendation(windows),
        "algorithm": algorithm,
        "log_possible": all(m <= MAX_LOG_ENTRIES for _, m in windows),
        "burst_note": ngettext(
            "A bucket admits its %(n)d token at once, then refills.",
            "A bucket admits its %(n)d tokens at once, then refills.",
            windows[0][1],
        )
        % {"n": windows[0][1]},
    }
