"""What THROTTLING_METRICS costs a decision: client CPU with metrics on and off, interleaved.

    python -m bench.metrics [--quick] [--rounds N] [--batch N]

Starts its own redis-server, decides `throttling.check` in batches with the setting
off and on (turned with override_settings, as a site's settings would), in shuffled
order every round, and times the hook alone as well, in this process (the default
registry) and in a child process in multiprocess mode (PROMETHEUS_MULTIPROC_DIR).
Writes docs/benchmarks/metrics.md (not with --quick); raw figures go to
bench/results-metrics.json.
"""

import argparse
import datetime
import json
import os
import platform
import random
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .run import bench_site, publish

HERE = Path(__file__).resolve().parent
RESULTS_MD = HERE.parent / "docs" / "benchmarks" / "metrics.md"
RESULTS_JSON = HERE / "results-metrics.json"

ACTION = "bench-metrics"
PERIOD = 60
MAX_COUNT = 1000  # never reached: every timed decision is the common, admitted case
BUDGET_US = 3.0  # what metrics may add to a decision's client CPU
OFF, ON = "off", "on"


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bench.metrics", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smaller run (does not rewrite the page)")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 300, quick 40)")
    parser.add_argument("--batch", type=int, default=100, help="decisions per setting per round")
    parser.add_argument("--users", type=int, default=500, help="members the decisions are spread over")
    parser.add_argument("--seed", type=int, default=None, help="seed of the round order shuffle")
    parser.add_argument("--hook-only", action="store_true", help=argparse.SUPPRESS)  # the multiprocess child
    options = parser.parse_args(argv)
    if options.rounds is None:
        options.rounds = 40 if options.quick else 300
    if options.seed is None:
        options.seed = secrets.randbelow(2**31)
    if min(options.rounds, options.batch, options.users) < 1:
        parser.error("--rounds, --batch and --users must be at least 1")
    return options


def main(argv=None):
    options = parse_args(argv)
    if options.hook_only:
        print(json.dumps(hook_cost(options.rounds)))
        return 0
    started = time.monotonic()
    with bench_site("throttling-bench-metrics-") as (server, db_dir):
        results = {"decisions": decisions(options), "hook": {"default registry": hook_cost(options.rounds)}}
        results["hook"]["multiprocess"] = multiprocess_hook_cost(server.url, db_dir, options.rounds)
    results["meta"] = {
        "when": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "rounds": options.rounds,
        "batch": options.batch,
        "users": options.users,
        "seed": options.seed,
        "elapsed_s": round(time.monotonic() - started, 1),
    }
    publish(render(results), results, options.quick, RESULTS_MD, RESULTS_JSON)
    return 0


def decisions(options):
    """Client CPU and latency per decision, metrics off and on, in shuffled order every round."""
    from django.test.utils import override_settings

    import throttling
    from throttling.models import ActionPolicy

    ActionPolicy.objects.create(action=ACTION, period=PERIOD, max_count=MAX_COUNT)
    users = [f"bench-member-{i}" for i in range(options.users)]
    for user in users:  # warm: the policy cache, the script, every member's packed command
        throttling.check(user, ACTION)
    rng = random.Random(options.seed)
    cpu = {OFF: [], ON: []}
    wall = {OFF: [], ON: []}
    for round_ in range(options.rounds):
        # Small batches, the same members for both settings, in shuffled order: what the two
        # settings are compared on is as alike as a shared machine allows.
        batch = [users[(round_ * options.batch + i) % len(users)] for i in range(options.batch)]
        order = [OFF, ON]
        rng.shuffle(order)
        for state in order:
            with override_settings(THROTTLING_METRICS=state == ON):
                cpu_ns, wall_ns = _timed(lambda who: throttling.check(who, ACTION), batch)
            cpu[state].append(cpu_ns / options.batch / 1000)
            wall[state].append(wall_ns / options.batch / 1000)
    # Paired by round: each round's difference, so a noisy minute falls on both settings alike.
    added = [on - off for on, off in zip(cpu[ON], cpu[OFF])]
    return {
        "cpu_us": {state: _summary(values) for state, values in cpu.items()},
        "wall_us": {state: _summary(values) for state, values in wall.items()},
        "added_cpu_us": _summary(added),
    }


def hook_cost(rounds, calls=10000):
    """CPU per call of observe.decided alone, on (the real hook) and off (the empty one).

    In multiprocess mode, also the CPU of one write of the counts to the files (what the
    background thread does every half second, off the request's thread), after each round.
    """
    from django.test.utils import override_settings

    from throttling import metrics
    from throttling.common import observe
    from throttling.engine.decision import Decision

    decision = Decision(True, ACTION, reason="admitted")
    hooks = {}
    for state in (OFF, ON):
        with override_settings(THROTTLING_METRICS=state == ON):
            hooks[state] = observe.decided
    out = {OFF: [], ON: []}
    writes = []
    for _ in range(max(3, rounds // 4)):
        for state, hook in hooks.items():
            start = time.thread_time_ns()
            for _ in range(calls):
                hook(decision, 0.00004)
            out[state].append((time.thread_time_ns() - start) / calls / 1000)
        if metrics.multiprocess_mode():
            start = time.thread_time_ns()
            metrics.flush()
            writes.append((time.thread_time_ns() - start) / 1000)
    results = {state: _summary(values) for state, values in out.items()}
    if writes:
        results["write"] = _summary(writes)
    return results


def multiprocess_hook_cost(redis_url, db_dir, rounds):
    """hook_cost() in a child whose prometheus_client writes its values to files (gunicorn's mode)."""
    directory = tempfile.mkdtemp(prefix="throttling-bench-multiproc-")
    try:
        env = dict(
            os.environ,
            PROMETHEUS_MULTIPROC_DIR=directory,
            DJANGO_SETTINGS_MODULE="bench.settings",
            BENCH_REDIS_URL=redis_url,
            BENCH_DB_DIR=db_dir,
        )
        code = "import django; django.setup(); from bench.metrics import main; main(sys.argv[1:])"
        out = subprocess.run(
            [sys.executable, "-c", f"import sys; {code}", "--hook-only", "--rounds", str(rounds)],
            cwd=HERE.parent,
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _timed(call, batch):
    cpu_start, wall_start = time.thread_time_ns(), time.perf_counter_ns()
    for who in batch:
        call(who)
    return time.thread_time_ns() - cpu_start, time.perf_counter_ns() - wall_start


def _summary(values):
    values = sorted(values)
    quartiles = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return {"median": statistics.median(values), "q1": quartiles[0], "q3": quartiles[2], "n": len(values)}


def _cell(summary):
    return f"{summary['median']:.2f} ({summary['q1']:.2f}–{summary['q3']:.2f})"


def render(results):
    meta, d, hook = results["meta"], results["decisions"], results["hook"]
    added = d["added_cpu_us"]["median"]
    lines = [
        "# Metrics",
        "",
        f"Written by `python -m bench.metrics` on {meta['when']} (Python {meta['python']}, {meta['cpus']} CPUs, "
        f"{meta['rounds']} interleaved rounds of {meta['batch']} decisions per setting over {meta['users']} members, "
        f"seed {meta['seed']}, {meta['elapsed_s']} s). Never edited by hand.",
        "",
        "## A decision, metrics off and on",
        "",
        "`throttling.check` of an admitted decision on one Redis, with `THROTTLING_METRICS` off and on "
        "(turned with `override_settings`, in shuffled order every round). Medians of the rounds, "
        "interquartile range in brackets, µs per decision.",
        "",
        "| `THROTTLING_METRICS` | client CPU (µs) | latency (µs) |",
        "|---|---|---|",
        f"| off | {_cell(d['cpu_us'][OFF])} | {_cell(d['wall_us'][OFF])} |",
        f"| on | {_cell(d['cpu_us'][ON])} | {_cell(d['wall_us'][ON])} |",
        "",
        f"**Added client CPU per decision: {added:.2f} µs** (median of the rounds' differences, "
        f"{_cell(d['added_cpu_us'])}); the budget is {BUDGET_US:.0f} µs: "
        f"{'met' if added <= BUDGET_US else 'not met'}.",
        "",
        "## The hook alone",
        "",
        "`observe.decided(decision, seconds)` called in a loop: the empty function the engine calls when "
        "metrics are off, and the real one, CPU µs per call. The real one adds to plain counts of the calling "
        "thread (its result's count, its histogram bucket and the sum), with no lock and no prometheus-client "
        "call; a scrape adds the threads' counts up. In multiprocess mode (`PROMETHEUS_MULTIPROC_DIR`, as under "
        "gunicorn) a background thread writes what was counted to prometheus-client's memory-mapped files every "
        "half second, so the hook costs the same there.",
        "",
        "| registry | off (µs) | on (µs) |",
        "|---|---|---|",
    ]
    for name, figures in hook.items():
        lines.append(f"| {name} | {_cell(figures[OFF])} | {_cell(figures[ON])} |")
    write = hook.get("multiprocess", {}).get("write")
    if write:
        lines += [
            "",
            f"One write of the counts to the files, by the background thread: {_cell(write)} µs of CPU "
            "(median, interquartile range), twice a second whatever the number of decisions; its cost grows with "
            "the series written (one per action and result seen), not with the decisions.",
        ]
    lines += [
        "",
        "The difference between the two tables' figures is the noise of a shared machine: a decision is a "
        "round trip to Redis, whose own CPU varies by more than the hook costs.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
