"""The replay benchmark: what replaying a policy over a million rows of history costs, against reading them.

    python -m bench.replay [--rows 1000000] [--members 10000] [--rounds 3] [--quick]

Starts its own redis-server (never the machine's) and a throwaway SQLite database on the test suite's
settings (demo_site's replies are the history: author, created, post), fills it with a month of
replies by calm members, bursty regulars and spammers, indexed on (author, created), then times, in
shuffled order each round and in one run:

- read: the rows the replay reads, as it reads them (member, time [, target]; ordered by member and
  time; streamed in chunks), and nothing else;
- the sliding log and the token bucket replayed over them, per member and per thread;
- the suggestion (one pass, whatever the candidates), and the admin's pass (draft, policy as it
  stands and suggestion together).

Each replay's median time is set against the median read of the same rows (acceptance: at most 3×),
and its peak memory growth is measured in a separate untimed pass with tracemalloc, and as the
process's peak resident size (acceptance: at most 100 MB). The table goes to docs/benchmarks/replay.md
(--quick: 100,000 rows, the page left as it was); raw numbers to bench/results-replay.json.
"""

import argparse
import datetime
import gc
import os
import platform
import random
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

from .run import bench_site, publish

HERE = Path(__file__).resolve().parent
RESULTS_MD = HERE.parent / "docs" / "benchmarks" / "replay.md"
RESULTS_JSON = HERE / "results-replay.json"
HISTORY = {
    "answer": {"model": "demo_site.Reply", "member": "author", "time": "created"},
    "thread-answer": {"model": "demo_site.Reply", "member": "author", "time": "created", "target": "post"},
}
DAYS = 30
THREADS = 200
BATCH = 50_000


def setup(server, db_dir):
    """Django on the test suite's settings (demo_site's models), migrated, with the history sources set."""
    os.environ.pop("DATABASE_URL", None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    os.environ["THROTTLING_TEST_REDIS_URL"] = server.url
    os.environ["THROTTLING_TEST_DB_NAME"] = os.path.join(db_dir, "replay.sqlite3")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    settings.THROTTLING_HISTORY = HISTORY
    call_command("migrate", verbosity=0)


def member_times(rng, kind, start, span):
    """A member's reply times (µs): calm (30 over the month), bursty (16 bursts of 10 a few seconds
    apart) or a spammer (runs of 60, up to 3 s apart, some in the same second)."""
    if kind == "calm":
        return sorted(start + rng.randrange(span) for _ in range(30))
    times = []
    runs, length, gap = (16, 10, 20_000_000) if kind == "bursty" else (13, 60, 3_000_000)
    for _ in range(runs):
        at = start + rng.randrange(span)
        for _ in range(length):
            at += rng.randrange(gap)
            times.append(at)
    return sorted(times)


def fill(rows, members, seed=26):
    """`members` members and about `rows` replies over DAYS days ending now; returns the replies written."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.utils import timezone

    from demo_site.models import Post

    User = get_user_model()
    User.objects.bulk_create(User(username=f"member-{i}") for i in range(members))
    ids = list(User.objects.order_by("pk").values_list("pk", flat=True))
    posts = [Post.objects.create(author_id=ids[0], title=f"Thread {i}", body="").pk for i in range(THREADS)]
    rng = random.Random(seed)
    # Kinds in the proportions that give about `rows` replies: 30 per calm member, 160 per bursty
    # regular, 780 per spammer; 70 %, 25 % and 5 % of members at a million rows for 10,000.
    per_member = rows / members
    spammers = max(1, round(members * 0.05 * per_member / 100))
    bursty = round(members * 0.25)
    kinds = ["spammer"] * spammers + ["bursty"] * bursty + ["calm"] * (members - spammers - bursty)
    rng.shuffle(kinds)
    now = timezone.now()
    span = DAYS * 86400 * 1_000_000
    start = int((now - datetime.timedelta(days=DAYS)).timestamp() * 1_000_000)
    epoch = datetime.datetime(1970, 1, 1)
    sql = "INSERT INTO demo_site_reply (post_id, author_id, body, created) VALUES (%s, %s, '', %s)"
    written, batch = 0, []
    with transaction.atomic(), connection.cursor() as cursor:
        for pk, kind in zip(ids, kinds):
            favourites = rng.sample(posts, 3)
            for t in member_times(rng, kind, start, span):
                # As Django stores an aware datetime in SQLite: UTC, without the offset.
                batch.append((rng.choice(favourites), pk, str(epoch + datetime.timedelta(microseconds=t))))
            if len(batch) >= BATCH:
                cursor.executemany(sql, batch)
                written += len(batch)
                batch = []
            if written + len(batch) >= rows:
                break
        cursor.executemany(sql, batch)
        written += len(batch)
        cursor.execute("CREATE INDEX bench_reply_author_created ON demo_site_reply (author_id, created)")
        cursor.execute("ANALYZE")
    return written, now - datetime.timedelta(days=DAYS + 1), now + datetime.timedelta(days=1)


def operations(since, until):
    """name -> (function, the read it is set against)."""
    from throttling import replay, suggest
    from throttling.replayer.sources import source_for
    from throttling.replayer.stream import CHUNK
    from throttling.replayer.whatif import what_if

    def read(action):
        def run():
            n = 0
            for _row in source_for(action).rows(since, until).iterator(chunk_size=CHUNK):
                n += 1
            return n

        return run

    return {
        "read, per member": (read("answer"), None),
        "read, per thread": (read("thread-answer"), None),
        "sliding log, per member": (lambda: replay("answer", since=since, until=until).actions, "read, per member"),
        "token bucket, per member": (
            lambda: replay("answer", algorithm="token_bucket", since=since, until=until).actions,
            "read, per member",
        ),
        "sliding log, per thread": (
            lambda: replay("thread-answer", since=since, until=until).actions,
            "read, per thread",
        ),
        "suggestion (sliding log)": (
            lambda: sum(m for _, m in suggest("answer", since=since, until=until)),
            "read, per member",
        ),
        "suggestion (token bucket)": (
            lambda: sum(m for _, m in suggest("answer", algorithm="token_bucket", since=since, until=until)),
            "read, per member",
        ),
        "admin pass (draft, policy, suggestion)": (
            lambda: what_if("answer", [(60, 2), (3600, 20)], since=since, until=until).rows,
            "read, per member",
        ),
    }


def peak_rss_kb():
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def reset_peak_rss():
    """Linux: the peak resident size starts again from the current one (False where it cannot)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def memory(run):
    """(tracemalloc's peak growth, peak resident size growth or None) of one untimed run, in MB."""
    gc.collect()
    rss_reset = reset_peak_rss()
    rss_before = peak_rss_kb()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    run()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss = (peak_rss_kb() - rss_before) / 1024 if rss_reset else None
    return (peak - before) / 2**20, rss


def measure(ops, rounds, seed):
    """{name: (median seconds, median of replay ÷ read)}: each replay timed right beside a read of
    the same rows (read first in one round, second in the next), so a loaded machine slows both alike."""
    rng = random.Random(seed)
    times = {name: [] for name in ops}
    ratios = {name: [] for name, (_, against) in ops.items() if against}
    for r in range(rounds):
        order = [name for name in ops if ops[name][1]]
        rng.shuffle(order)
        for name in order:
            run, against = ops[name]
            pair = [(against, ops[against][0]), (name, run)]
            if r % 2:
                pair.reverse()
            took = {}
            for label, work in pair:
                gc.collect()
                started = time.perf_counter()
                work()
                took[label] = time.perf_counter() - started
            times[name].append(took[name])
            times[against].append(took[against])
            ratios[name].append(took[name] / took[against])
        print(f"round {r + 1}: " + ", ".join(f"{n} {statistics.median(ratios[n]):.2f}×" for n in ratios), flush=True)
    return {
        name: (statistics.median(values), statistics.median(ratios[name]) if name in ratios else None)
        for name, values in times.items()
    }, times


def render(results):
    rows = []
    ops = results["operations"]
    for name, r in ops.items():
        against = r["against"]
        rss = "—" if r["rss_mb"] is None else f"{r['rss_mb']:.1f}"
        if against is None:
            rows.append(f"| {name} | {results['rows']:,} | {r['seconds']:.2f} | — | — | {r['peak_mb']:.1f} | {rss} |")
            continue
        rows.append(
            f"| {name} | {results['rows']:,} | {ops[against]['seconds']:.2f} | {r['seconds']:.2f} | "
            f"{r['ratio']:.2f}× | {r['peak_mb']:.1f} | {rss} |"
        )
    worst = max(r["ratio"] for r in ops.values() if r["against"])
    peak = max(r["peak_mb"] for r in ops.values())
    return f"""# Replay benchmark

What replaying a policy over an action's history costs (`throttling.replay`, `throttling.suggest`
and the admin's *What would this do?*), against reading the same rows from the database, ordered by
member and time, in the same run (see [Choosing limits](../choosing-limits.md)). Made by
`python -m bench.replay` on {platform.python_implementation()} {platform.python_version()},
{platform.machine()}, {datetime.date.today().isoformat()}; SQLite, {results["members"]:,} members,
{results["rows"]:,} replies over {DAYS} days (calm members, bursty regulars, spammers), indexed on
(author, created); medians of {results["rounds"]} rounds, operations in shuffled order each round, each
timed right beside a read of the same rows (*replay ÷ read* is the median of those pairs' ratios).

| operation | rows | read (s) | replay (s) | replay ÷ read | peak memory growth, tracemalloc (MB) | peak resident size growth (MB) |
|---|--:|--:|--:|--:|--:|--:|
{chr(10).join(rows)}

*Read* is the query the replay runs, iterated as it iterates it (values in chunks of
{results["chunk"]:,}) and nothing else: its datetimes are parsed by Django as the replay's are. The
replays are the policy `answer` (3 a minute and 30 an hour) per member, and per thread for
`thread-answer`; the suggestion covers a minute, an hour and a day in one pass, a token bucket's
peaks found per member by bisection over that member's actions only; the admin's pass replays a draft
and the policy as it stands and suggests, together. Memory is measured in a separate untimed run of
each operation: Python's own allocations (tracemalloc's peak over what was held before), and the
process's peak resident size (Linux `VmHWM`, reset before the run).

Acceptance: replay ÷ read at most 3× (worst here: {worst:.2f}×), peak memory growth at most 100 MB
(worst here: {peak:.1f} MB), the suggestion in one pass. Timings on a shared 2-core machine; the run
took {results["elapsed_s"]:.0f} s, filling the table {results["fill_s"]:.0f} s of it.
"""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--members", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--quick", action="store_true", help="100,000 rows; the page is left as it was")
    options = parser.parse_args(argv)
    if options.quick:
        options.rows, options.members, options.rounds = 100_000, 1_000, 2
    started = time.monotonic()
    with bench_site("throttling-replay-", setup) as _site:
        from throttling.models import ActionPolicy, ActionWindow
        from throttling.replayer.stream import CHUNK

        filled = time.monotonic()
        rows, since, until = fill(options.rows, options.members, options.seed)
        fill_s = time.monotonic() - filled
        print(f"{rows:,} replies by {options.members:,} members in {fill_s:.0f} s", flush=True)
        for action in ("answer", "thread-answer"):
            ActionPolicy.objects.filter(action=action).delete()
            policy = ActionPolicy.objects.create(action=action, period=60, max_count=3)
            ActionWindow.objects.create(policy=policy, period=3600, max_count=30)
        ops = operations(since, until)
        counts = {name: run() for name, (run, _) in ops.items()}  # warm-up, and every pass sees every row
        assert counts["read, per member"] == counts["read, per thread"] == rows, counts
        medians, samples = measure(ops, options.rounds, options.seed)
        results = {
            "rows": rows,
            "members": options.members,
            "rounds": options.rounds,
            "chunk": CHUNK,
            "fill_s": fill_s,
            "operations": {},
            "samples": samples,
        }
        for name, (run, against) in ops.items():
            peak, rss = memory(run)
            print(f"{name}: peak {peak:.1f} MB (tracemalloc), {rss} MB (resident)", flush=True)
            seconds, ratio = medians[name]
            results["operations"][name] = {
                "seconds": seconds,
                "ratio": ratio,
                "against": against,
                "peak_mb": peak,
                "rss_mb": rss,
            }
        results["elapsed_s"] = time.monotonic() - started
    publish(render(results), results, options.quick, RESULTS_MD, RESULTS_JSON)
    return 0


if __name__ == "__main__":
    sys.exit(main())
