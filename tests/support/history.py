"""Histories of an action as a community leaves them: calm members, bursty regulars and spammers, as
demo_site replies (author, created, post), for the replay's tests."""

import random
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from demo_site.models import Post, Reply

US = 1_000_000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# THROTTLING_HISTORY for the replay's tests: "answer" per member, "thread-answer" per thread.
HISTORY = {
    "answer": {"model": "demo_site.Reply", "member": "author", "time": "created"},
    "thread-answer": {"model": "demo_site.Reply", "member": "author", "time": "created", "target": "post"},
}


def micro(when):
    return (when - EPOCH) // timedelta(microseconds=1)


@contextmanager
def explicit_times(model=Reply, name="created"):
    """Rows written inside keep the times given: auto_now_add would stamp them all with now."""
    field = model._meta.get_field(name)
    before = field.auto_now_add
    field.auto_now_add = False
    try:
        yield
    finally:
        field.auto_now_add = before


def member_times(rng, kind, start, days):
    """Microsecond times of one member's actions over `days` from `start` (µs): calm, bursty or spammer."""
    span = days * 86400 * US
    times = []
    if kind == "calm":
        for _ in range(rng.randint(2, 4 * days)):
            times.append(start + rng.randrange(span))
    elif kind == "bursty":
        for _ in range(rng.randint(1, 3 * days)):
            at = start + rng.randrange(span)
            for _ in range(rng.randint(3, 12)):
                at += rng.randint(1 * US, 90 * US)
                times.append(at)
    elif kind == "metronome":  # a script acting on a clock: exactly every few seconds, on window edges
        step = rng.choice((1, 2, 5, 10, 20, 30, 60)) * US
        for _ in range(rng.randint(1, days)):
            at = start + rng.randrange(span) // US * US
            for _ in range(rng.randint(10, 60)):
                at += step
                times.append(at)
    else:  # spammer: long runs a few seconds apart, some in the same second
        for _ in range(rng.randint(1, 2 * days)):
            at = start + rng.randrange(span)
            for _ in range(rng.randint(20, 80)):
                at += rng.choice((0, rng.randint(1, 999_999), rng.randint(US, 6 * US)))
                times.append(at)
    return sorted(times)


KINDS = ("calm", "bursty", "spammer", "metronome")


def random_history(seed, users, posts, *, days=2, start=None, mix=(0.5, 0.3, 0.1, 0.1), whole_seconds=False):
    """[(user, post, time µs)] for `users`: each calm, bursty, a spammer or a script on a clock, acting
    on a few posts. `whole_seconds`: times as a database without fractions of a second keeps them, so
    many actions fall exactly on a window's edge."""
    rng = random.Random(seed)
    start = micro(datetime(2026, 1, 5, tzinfo=UTC)) if start is None else start
    rows = []
    for user in users:
        kind = rng.choices(KINDS, weights=mix)[0]
        favourites = rng.sample(posts, k=min(len(posts), rng.randint(1, 3)))
        for t in member_times(rng, kind, start, days):
            rows.append((user, rng.choice(favourites), t // US * US if whole_seconds else t))
    return rows


def write_history(rows):
    """Store (user, post, time µs) rows as replies; returns how many."""
    with explicit_times():
        Reply.objects.bulk_create(
            (
                Reply(post=post, author=user, body="", created=EPOCH + timedelta(microseconds=t))
                for user, post, t in rows
            ),
            batch_size=2000,
        )
    return len(rows)


def posts_by(author, n):
    return [Post.objects.create(author=author, title=f"Thread {i}", body="") for i in range(n)]
