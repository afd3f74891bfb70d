"""The flood benchmark: what refused attempts cost, with and without local refusals.

    python -m bench.flood [--attempts N]

Starts its own redis-server (never the machine's), a throwaway SQLite database and a
real Celery worker (the test suite's app), then runs two scenarios, each with
THROTTLING_LOCAL_REFUSALS on and off:

- flood: one signed-in member hammering one action from 4 threads (10,000 attempts);
- mixed: 4 threads of 95 % ordinary traffic (200 members, within their limit) and 5 %
  of a bot hammering.

It reports Redis calls per refused attempt (every command Redis ran, the process's
background looks included, less admitted decisions), the median wall time and client
CPU of a refused decision, Redis CPU, and the time from the threshold crossing to the
first decision refused by the applied penalty, and the rung applied. The table goes to
docs/benchmarks/flood.md.
"""

import argparse
import datetime
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path

from .run import bench_site

HERE = Path(__file__).resolve().parent
RESULTS_MD = HERE.parent / "docs" / "benchmarks" / "flood.md"

THREADS = 4
ACTION = "flood"
LIMIT, THRESHOLD = 5, 5
MEMBERS = 200
MIXED_LIMIT = 100
CLIENT_COMMANDS = ("evalsha", "eval", "mget", "info", "script")


def setup(server, db_dir):
    """Django on the test suite's settings (so its Celery worker shares the database), migrated."""
    os.environ.pop("DATABASE_URL", None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    os.environ["THROTTLING_TEST_REDIS_URL"] = server.url
    os.environ["THROTTLING_TEST_BROKER_URL"] = server.url.rsplit("/", 1)[0] + "/1"
    os.environ["THROTTLING_TEST_DB_NAME"] = os.path.join(db_dir, "flood.sqlite3")
    import django

    django.setup()
    from django.core.management import call_command

    import tests.support.processes.celery_app  # noqa: F401  (the app tasks are sent with)

    call_command("migrate", verbosity=0)


class Redis:
    """INFO of the benchmark's own server: commands run and CPU used."""

    def __init__(self, url):
        import redis

        self.client = redis.Redis.from_url(url)

    def sample(self):
        """(client calls so far, Redis CPU seconds). Calls are script calls, MGETs and INFOs: the
        commands a script runs are counted by commandstats too, under their own names."""
        stats = self.client.info("commandstats")
        cpu = self.client.info("cpu")
        calls = sum(stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in CLIENT_COMMANDS)
        return calls, cpu["used_cpu_sys"] + cpu["used_cpu_user"]


def _reset_state(redis, local):
    from django.conf import settings as django_settings
    from django.core.signals import setting_changed

    from tests.support.processes.celery_app import app
    from throttling.engine.policies.cache import policies
    from throttling.engine.refusal_memory import local_refusals
    from throttling.models import Penalty, PenaltyStep

    time.sleep(1)  # what the worker is still doing for the previous run ends first
    app.control.purge()
    redis.client.flushdb()
    Penalty.objects.all().delete()
    PenaltyStep.objects.all().delete()
    # One rung, so the crossing's penalty refuses (a warning would not).
    PenaltyStep.objects.create(level=1, name="15 minutes", duration=datetime.timedelta(minutes=15))
    django_settings.THROTTLING_LOCAL_REFUSALS = local
    setting_changed.send(sender=None, setting="THROTTLING_LOCAL_REFUSALS", value=local, enter=True)
    policies.clear()
    local_refusals.discard()


def run(scenario, attempts, local, redis, users):
    import throttling
    from throttling.engine.decision import PENALISED

    _reset_state(redis, local)
    bot, members = users[0], users[1:]
    throttling.peek("warm-up", ACTION)
    per_thread = attempts // THREADS
    barrier = threading.Barrier(THREADS + 1)
    refused, crossed, penalised = [], [], []
    admitted = [0]
    lock = threading.Lock()

    def work(i):
        from django.db import connection

        mine, n_admitted = [], 0
        barrier.wait()
        for j in range(per_thread):
            who = bot if scenario == "flood" or j % 20 == i else members[(i * per_thread + j) % len(members)]
            wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
            d = throttling.check(who, ACTION)
            cpu, wall = time.thread_time_ns() - cpu, time.perf_counter_ns() - wall
            if d.allowed:
                n_admitted += 1
            else:
                mine.append((wall, cpu))
            if d.escalated:
                crossed.append(time.monotonic())
            if d.reason == PENALISED and not penalised:
                penalised.append(time.monotonic())
        with lock:
            refused.extend(mine)
            admitted[0] += n_admitted
        connection.close()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    calls_before, cpu_before = redis.sample()
    barrier.wait()
    started = time.monotonic()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    # The bot goes on until the penalty refuses it (those attempts count too), to time the escalation.
    deadline = time.monotonic() + 30
    while not penalised and time.monotonic() < deadline:
        wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
        d = throttling.check(bot, ACTION)
        refused.append((time.perf_counter_ns() - wall, time.thread_time_ns() - cpu))
        if d.reason == PENALISED:
            penalised.append(time.monotonic())
        time.sleep(0.001)
    time.sleep(1.1)  # the offences of the last refusals reach Redis at the background thread's look
    calls_after, cpu_after = redis.sample()
    from throttling.models import Penalty

    penalty = Penalty.objects.filter(user=bot).first()
    calls = calls_after - calls_before - 2  # less the INFOs of the samples themselves
    return {
        "scenario": scenario,
        "local": local,
        "attempts": admitted[0] + len(refused),
        "refused": len(refused),
        "calls_per_100_refused": 100 * (calls - admitted[0]) / max(1, len(refused)),
        "wall_us": statistics.median(w for w, _ in refused) / 1000,
        "cpu_us": statistics.median(c for _, c in refused) / 1000,
        "redis_cpu_ms": (cpu_after - cpu_before) * 1000,
        "elapsed_s": elapsed,
        "to_penalty_ms": (penalised[0] - crossed[0]) * 1000 if crossed and penalised else None,
        "rung": penalty.level if penalty else None,
    }


def render(results, started):
    rows = []
    for r in results:
        rows.append(
            "| {scenario} | {mode} | {attempts:,} | {refused:,} | {calls:.2f} | {wall:.1f} | {cpu:.1f} | {rcpu:.0f} | {pen} | {rung} |".format(
                scenario=r["scenario"],
                mode="on" if r["local"] else "off",
                attempts=r["attempts"],
                refused=r["refused"],
                calls=r["calls_per_100_refused"],
                wall=r["wall_us"],
                cpu=r["cpu_us"],
                rcpu=r["redis_cpu_ms"],
                pen="—" if r["to_penalty_ms"] is None else f"{r['to_penalty_ms']:.0f}",
                rung="—" if r["rung"] is None else r["rung"],
            )
        )
    by = {(r["scenario"], r["local"]): r for r in results}
    flood = by[("flood", True)]
    same_rung = all(by[(s, True)]["rung"] == by[(s, False)]["rung"] for s in ("flood", "mixed"))
    return f"""# Flood benchmark

What refused attempts cost with local refusals (`THROTTLING_LOCAL_REFUSALS`, on by default) and
without: a refusal Redis gave is answered from the process's memory until its `Retry-After` ends
(see [Architecture › Floods answered locally](../architecture.md#floods-answered-locally)).
Made by `python -m bench.flood` on {platform.python_implementation()} {platform.python_version()},
{platform.machine()}, {datetime.date.today().isoformat()}; its own redis-server, a real Celery worker.

- **flood**: one signed-in member hammering one action (limit {LIMIT} a minute, threshold {THRESHOLD}) from {THREADS} threads.
- **mixed**: {THREADS} threads of 95 % ordinary traffic ({MEMBERS} members within their limit of {MIXED_LIMIT} a minute) and 5 % of a bot hammering.

| scenario | local refusals | attempts | refused | Redis calls per 100 refused | refused decision median (µs) | client CPU median (µs) | Redis CPU (ms) | crossing → penalty (ms) | rung |
|---|---|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}

Redis calls count every script call, MGET and INFO Redis received during the run (the background
thread's looks and its offence batches included) less one per admitted decision; the bot goes on
after its share until its penalty refuses it, and those attempts count. The crossing is the refusal that made
the member a repeat offender; the penalty is the first decision its penalty refused (the Celery
worker applied it and the process's next look at the markers ended the remembered refusals).

Acceptance: ≤ 1 Redis call per 100 refused attempts (flood, on: {flood["calls_per_100_refused"]:.2f}),
a refused decision's median ≤ 10 µs of client CPU (flood, on: {flood["cpu_us"]:.1f} µs), the same rung
with and without local refusals ({"yes" if same_rung else "NO"}). Timings on a shared 2-core machine;
the run took {time.monotonic() - started:.0f} s.
"""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=10_000)
    options = parser.parse_args(argv)
    started = time.monotonic()
    with bench_site("throttling-flood-", setup) as (server, _):
        from django.contrib.auth import get_user_model

        from tests.support.processes.celery_worker import CeleryWorker
        from throttling.models import ActionPolicy

        ActionPolicy.objects.create(
            action=ACTION, period=60, max_count=LIMIT, offence_threshold=THRESHOLD, verb="acted"
        )
        users = [get_user_model().objects.create_user(f"member-{i}") for i in range(MEMBERS + 1)]
        worker = CeleryWorker(server.url, os.environ["THROTTLING_TEST_BROKER_URL"], name="flood").start()
        try:
            redis = Redis(server.url)
            results = []
            for scenario in ("flood", "mixed"):
                for local in (True, False):
                    # Ordinary members (~50 attempts each in a run) never reach the mixed run's limit; the bot does.
                    ActionPolicy.objects.filter(action=ACTION).update(
                        max_count=LIMIT if scenario == "flood" else MIXED_LIMIT
                    )
                    result = run(scenario, options.attempts, local, redis, users)
                    print(result, flush=True)
                    results.append(result)
        finally:
            worker.stop()
        RESULTS_MD.write_text(render(results, started), encoding="utf-8")
        print(f"wrote {RESULTS_MD}")


if __name__ == "__main__":
    sys.exit(main())
