"""The benchmark: per-decision latency, exactness under concurrency and memory per key, in one run.

    python -m bench.run [--quick] [--rounds N] [--profile]

Starts its own redis-server (never the machine's), migrates a throwaway SQLite
database, prints a markdown table and writes it to bench/RESULTS.md; raw
numbers go to bench/results-latest.json.
"""

import argparse
import cProfile
import datetime
import io
import json
import math
import multiprocessing
import os
import platform
import pstats
import queue
import random
import secrets
import shutil
import statistics
import sys
import tempfile
import threading
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from demo_site.redis_server import RedisServer

HERE = Path(__file__).resolve().parent
RESULTS_MD = HERE / "RESULTS.md"
RESULTS_JSON = HERE / "results-latest.json"

PERIOD = 60
# The model caps max_count at 1000; no user comes near it in one run, so every
# timed decision is the common, admitted case.
MAX_COUNT = 1000
EXACT_LIMIT = 5
EXACT_PROCESSES = 8
EXACT_ATTEMPTS = 20
MEMORY_SIZES = (5, 100)

# Each contender writes under its own action, scope or group, so the logs of
# one user have the same length for every contender and nobody pays for
# another's entries.
FLOOR_ACTION = "bench-floor"
CHECK_ACTION = "bench-check"
THROTTLE_ACTION = "bench-drf"
MEMORY_ACTION = "bench-mem"
EXACT_ACTION = "bench-exact"
PENALTY_ACTION = "bench-penalised"
SCOPE = "bench"  # REST_FRAMEWORK DEFAULT_THROTTLE_RATES in bench/settings.py
EXACT_SCOPE = "bench-exact"
RATE = f"{MAX_COUNT}/m"
EXACT_RATE = f"{EXACT_LIMIT}/m"

RTT = "round_trip"
FLOOR = "floor"
CHECK = "check"
ACTION = "action_throttle"
SCOPED = "scoped"
RATELIMIT = "ratelimit"
PENALISED = "penalised"

LABELS = {
    RTT: "reference: one plain round trip, redis-py `GET`",
    FLOOR: "floor: raw redis-py `EVALSHA` of sliding_log.lua",
    CHECK: "`throttling.check(user, action)`",
    ACTION: "`ActionThrottle().allow_request(request, view)`",
    SCOPED: "DRF `ScopedRateThrottle` (django-redis cache)",
    RATELIMIT: "django-ratelimit `is_ratelimited(..., increment=True)`",
    PENALISED: "`ActionThrottle` refusing a penalised member (429 with the penalty's message)",
}
LATENCY_ORDER = [RTT, FLOOR, CHECK, ACTION, PENALISED, SCOPED, RATELIMIT]
# Contenders whose every decision is meant to be a refusal.
REFUSING = {PENALISED}
EXACT_ORDER = [CHECK, ACTION, SCOPED, RATELIMIT]

TARGET_VS_FLOOR = 1.3
TARGET_VS_SCOPED = 1.5


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smaller run (does not rewrite RESULTS.md)")
    parser.add_argument("--rounds", type=int, help="timed rounds (default 300, quick 40)")
    parser.add_argument("--batch", type=int, default=50, help="decisions per contender per round")
    parser.add_argument("--users", type=int, help="distinct users the traffic is spread over (default 500)")
    parser.add_argument("--trials", type=int, help="exactness trials per contender (default 5, quick 2)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the round order shuffle")
    parser.add_argument(
        "--profile", action="store_true", help="also cProfile ActionThrottle.allow_request and print the top"
    )
    options = parser.parse_args(argv)
    if options.rounds is None:
        options.rounds = 40 if options.quick else 300
    if options.users is None:
        options.users = 200 if options.quick else 500
    if options.trials is None:
        options.trials = 2 if options.quick else 5
    if options.seed is None:
        options.seed = secrets.randbelow(2**31)
    if min(options.rounds, options.batch, options.users, options.trials) < 1:
        parser.error("--rounds, --batch, --users and --trials must be at least 1")
    return options


def main(argv=None):
    options = parse_args(argv)
    started = time.monotonic()
    db_dir = tempfile.mkdtemp(prefix="throttling-bench-")
    server = RedisServer()
    server.start()
    try:
        # Settings read these at import, so they are set before django.setup().
        os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
        os.environ["BENCH_REDIS_URL"] = server.url
        os.environ["BENCH_DB_DIR"] = db_dir
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        bench = Bench(server, options)
        results = bench.run()
        results["elapsed_s"] = round(time.monotonic() - started, 1)
    finally:
        server.stop()
        shutil.rmtree(db_dir, ignore_errors=True)

    markdown = render(results)
    print(markdown)
    raw = dict(results, samples_ns=bench.samples)
    RESULTS_JSON.write_text(json.dumps(raw) + "\n", encoding="utf-8")
    if options.quick:
        print(f"(--quick: {RESULTS_MD.name} left as it was; raw numbers in {RESULTS_JSON.name})")
    else:
        RESULTS_MD.write_text(markdown, encoding="utf-8")
    return 0


class Bench:
    def __init__(self, server, options):
        import redis
        from django.contrib.auth import get_user_model
        from django.core.cache import cache
        from django.test import RequestFactory
        from rest_framework.request import Request

        from throttling import core
        from throttling.backends.redis import get_backend
        from throttling.conf import settings as throttling_settings
        from throttling.models import ActionPolicy

        self.options = options
        self.server = server
        self.raw = redis.Redis.from_url(server.url)
        self.cache = cache
        self.samples = {}

        for action, max_count in (
            (FLOOR_ACTION, MAX_COUNT),
            (CHECK_ACTION, MAX_COUNT),
            (THROTTLE_ACTION, MAX_COUNT),
            (MEMORY_ACTION, MAX_COUNT),
            (EXACT_ACTION, EXACT_LIMIT),
            (PENALTY_ACTION, MAX_COUNT),
        ):
            ActionPolicy.objects.create(action=action, period=PERIOD, max_count=max_count)

        User = get_user_model()
        User.objects.bulk_create(User(username=f"bench-{i}") for i in range(options.users + 1))
        users = list(User.objects.filter(username__startswith="bench-").order_by("pk"))
        self.exact_user, self.users = users[0], users[1:]

        # One Django request and one DRF Request per user, built before any
        # timing; throttles only read them. DRF has authenticated the user by
        # the time throttles run, so the user is set rather than resolved.
        factory = RequestFactory()
        self.django_requests, self.drf_requests = {}, {}
        for user in users:
            plain = factory.post("/bench/")
            plain.user = user
            self.django_requests[user.pk] = plain
            drf = Request(factory.post("/bench/"))
            drf.user = user
            self.drf_requests[user.pk] = drf

        # Every timed user has a penalty in force on PENALTY_ACTION, mirrored
        # into Redis as production does it.
        self.penalise(self.users)

        backend = get_backend()
        # A plain client of its own: the same protocol work per call as
        # throttling's, without its 0.1 s timeouts, so a stall on a busy machine
        # slows the floor down instead of ending the run.
        self.floor_client = redis.Redis.from_url(server.url)
        self.floor_sha = backend.sliding_log.sha
        self.floor_client.script_load(backend.sliding_log.script)
        self.floor_args = (
            b"check",
            1,
            None,  # the member token, unique per call, filled in per batch
            FLOOR_ACTION,
            throttling_settings.OFFENCE_WINDOW,
            throttling_settings.OFFENCE_THRESHOLD,  # members are escalated: penalties on
            throttling_settings.ESCALATION_TIMEOUT,
            *core.policies.get(FLOOR_ACTION).script_args,
        )
        self.floor_keys = {
            user.pk: tuple(core.log_keys(core.identify(user)[0], FLOOR_ACTION)) for user in self.users
        }
        # Members shaped like core's: a short random prefix and a hex counter.
        self.floor_prefix = secrets.token_urlsafe(6)
        self.floor_counter = 0

    # -- contenders ---------------------------------------------------------

    def contender(self, name, action=None, scope=None, rate=RATE):
        """(call, prepare, admitted): prepare(users) builds the argument tuples outside the timing."""
        from django_ratelimit.core import is_ratelimited
        from rest_framework.exceptions import Throttled
        from rest_framework.throttling import ScopedRateThrottle
        from rest_framework.views import APIView

        from throttling import core
        from throttling.throttles import ActionThrottle

        if name == RTT:
            # A key nobody writes: what one command costs before any script runs.
            keys = {user.pk: f"bench:rtt:{user.pk}" for user in self.users}
            return self.floor_client.get, lambda users: [(keys[user.pk],) for user in users], lambda _: True

        if name == FLOOR:
            sha, client = self.floor_sha, self.floor_client

            def prepare(users):
                batch = []
                head, tail = self.floor_args[:2], self.floor_args[3:]
                for user in users:
                    self.floor_counter += 1
                    token = f"{self.floor_prefix}{self.floor_counter:x}"
                    keys = self.floor_keys[user.pk]
                    batch.append((sha, len(keys), *keys, *head, token, *tail))
                return batch

            return client.evalsha, prepare, lambda reply: reply[0] == 1

        if name == CHECK:
            action = action or CHECK_ACTION
            return core.check, lambda users: [(user, action) for user in users], lambda d: d.allowed

        if name == ACTION:
            # A view instance per request, as DRF makes one: ActionThrottle
            # wraps the instance's finalize_response for its refund.
            view_class = type("BenchActionView", (APIView,), {"throttle_action": action or THROTTLE_ACTION})

            def allow(request, view):
                try:
                    return ActionThrottle().allow_request(request, view)
                except Throttled:
                    return False

            def prepare(users):
                return [(self.drf_requests[user.pk], view_class()) for user in users]

            return allow, prepare, lambda ok: ok is True

        if name == PENALISED:
            view_class = type("BenchPenalisedView", (APIView,), {"throttle_action": PENALTY_ACTION})

            def refuse(request, view):
                try:
                    return ActionThrottle().allow_request(request, view)
                except Throttled as exc:
                    return exc

            def prepare(users):
                return [(self.drf_requests[user.pk], view_class()) for user in users]

            return refuse, prepare, lambda exc: getattr(getattr(exc, "decision", None), "penalty", None) is not None

        if name == SCOPED:
            view_class = type("BenchScopedView", (APIView,), {"throttle_scope": scope or SCOPE})

            def allow(request, view):
                # DRF instantiates its throttles for every request.
                return ScopedRateThrottle().allow_request(request, view)

            def prepare(users):
                return [(self.drf_requests[user.pk], view_class()) for user in users]

            return allow, prepare, lambda ok: ok is True

        if name == RATELIMIT:
            group = scope or SCOPE

            def limited(request):
                return is_ratelimited(request, group=group, key="user", rate=rate, increment=True)

            def prepare(users):
                return [(self.django_requests[user.pk],) for user in users]

            return limited, prepare, lambda is_limited: is_limited is False

        raise ValueError(name)

    def penalise(self, users):
        from datetime import timedelta

        from django.utils import timezone

        from throttling import penalties
        from throttling.models import Penalty

        now = timezone.now()
        Penalty.objects.bulk_create(
            Penalty(
                user=user,
                action=PENALTY_ACTION,
                level=2,
                starts_at=now,
                ends_at=now + timedelta(hours=2),
                reason="Benchmark: kept replying after being throttled.",
            )
            for user in users
        )
        penalties.mirror_members([user.pk for user in users])

    # -- the run ------------------------------------------------------------

    def run(self):
        import django
        import redis

        results = {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "python": platform.python_version(),
            "redis_server": self.raw.info("server")["redis_version"],
            "packages": {
                "Django": django.get_version(),
                "djangorestframework": _version("djangorestframework"),
                "django-redis": _version("django-redis"),
                "redis-py": redis.__version__,
                "django-ratelimit": _version("django-ratelimit"),
            },
            "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
            "rounds": self.options.rounds,
            "batch": self.options.batch,
            "users": self.options.users,
            "trials": self.options.trials,
            "seed": self.options.seed,
        }
        results["latency"] = self.latency()
        results["backend_failures"] = self.backend_failures
        results["round_trips"] = self.round_trips()
        results["floor_matches_check"] = self.floor_matches_check
        results["log_sizes_of_one_user"] = self.log_sizes
        results["exactness"] = self.exactness()
        results["memory"] = self.memory()
        if self.options.profile:
            results["profile"] = self.profile()
        return results

    def latency(self):
        from throttling import signals

        options = self.options
        contenders = {name: self.contender(name) for name in LATENCY_ORDER}
        samples = {name: [] for name in LATENCY_ORDER}
        refused = dict.fromkeys(LATENCY_ORDER, 0)
        round_medians = {name: [] for name in LATENCY_ORDER}
        rng = random.Random(options.seed)
        users = self.users
        failures = []

        def count_failure(sender, **kwargs):
            failures.append(kwargs.get("action"))

        # A decision that met a Redis timeout fails open and would pass for an
        # admission; the signal tells them apart.
        signals.backend_failure.connect(count_failure, dispatch_uid="bench-failures")

        def batch_users(offset):
            return [users[(offset + i) % len(users)] for i in range(options.batch)]

        # Warm-up: connections of both pools, the policy cache, the script
        # cache (NOSCRIPT handled once here), and the interpreter's own caches.
        for name in LATENCY_ORDER:
            call, prepare, _ = contenders[name]
            for args in prepare(users[: min(len(users), 4 * options.batch)]):
                call(*args)

        offset = 0
        for _ in range(options.rounds):
            order = LATENCY_ORDER[:]
            rng.shuffle(order)
            chosen = batch_users(offset)
            offset += options.batch
            for name in order:
                call, prepare, admitted = contenders[name]
                batch = prepare(chosen)
                times, replies = _timed(call, batch)
                samples[name].extend(times)
                round_medians[name].append(statistics.median(times))
                refused[name] += sum(1 for reply in replies if not admitted(reply))

        signals.backend_failure.disconnect(dispatch_uid="bench-failures")
        self.samples = samples
        self.backend_failures = len(failures)
        self.log_sizes = self.log_sizes_of_one_user()
        floor_median = statistics.median(samples[FLOOR])
        table = {}
        for name in LATENCY_ORDER:
            data = samples[name]
            median = statistics.median(data)
            table[name] = {
                "n": len(data),
                "median_us": median / 1000,
                "p99_us": _percentile(data, 99) / 1000,
                "mean_us": statistics.fmean(data) / 1000,
                "median_vs_floor": median / floor_median,
                "refused": refused[name],
                # Spread of the per-round medians: how much the machine moved during the run.
                "round_median_iqr_us": _iqr(round_medians[name]) / 1000,
            }
        return table

    def log_sizes_of_one_user(self):
        """Entries each sliding-log contender left for one user: equal when the comparison was fair."""
        from throttling import core

        identity = core.identify(self.users[0])[0]
        sizes = {
            action: self.raw.zcard(core.log_keys(identity, action)[0])
            for action in (FLOOR_ACTION, CHECK_ACTION, THROTTLE_ACTION)
        }
        if len(set(sizes.values())) != 1:
            print(f"warning: contenders left logs of different sizes for one user: {sizes}", file=sys.stderr)
        return sizes

    def round_trips(self):
        """Commands each contender sends per decision, seen by MONITOR (not those its script runs)."""
        from throttling import core

        calls = 20
        counts, sent = {}, {}
        for name in LATENCY_ORDER:
            call, prepare, _ = self.contender(name)
            batch = prepare(self.users[:calls])
            # A fresh load now keeps the policy change marker out of the count.
            core.policies.clear()
            core.policies.get(CHECK_ACTION)
            sent[name] = _monitor(self.server.url, lambda: [call(*args) for args in batch])
            counts[name] = len(sent[name]) / calls
        # The floor must send what check sends, apart from the action in the
        # keys (positions 3, 4, 6), the unique member (9) and the action (10).
        shapes = [
            [part for i, part in enumerate(sent[name][0].split()) if i not in (3, 4, 6, 9, 10)]
            for name in (FLOOR, CHECK)
        ]
        self.floor_matches_check = shapes[0] == shapes[1]
        if not self.floor_matches_check:
            print(f"warning: the floor's EVALSHA differs from check's: {shapes}", file=sys.stderr)
        return counts

    def reset_state(self):
        from throttling import core

        self.raw.flushall()
        self.cache.clear()
        # Reload now (the flush removed the change marker) so forked children
        # start from a fresh policy cache and never reach for the database.
        core.policies.clear()
        core.policies.get(EXACT_ACTION)

    def exactness(self):
        from django.db import connections

        ctx = multiprocessing.get_context("fork")
        out = {}
        for name in EXACT_ORDER:
            admitted, decided, failures = [], [], 0
            for _ in range(self.options.trials):
                self.reset_state()
                # Children must not share the parent's SQLite handle.
                connections.close_all()
                barrier = ctx.Barrier(EXACT_PROCESSES)
                answers = ctx.Queue()
                procs = [
                    ctx.Process(target=self._attempts, args=(name, barrier, answers))
                    for _ in range(EXACT_PROCESSES)
                ]
                for proc in procs:
                    proc.start()
                try:
                    counts = [answers.get(timeout=60) for _ in procs]
                except queue.Empty:
                    raise RuntimeError(f"exactness trial of {name} did not finish") from None
                finally:
                    for proc in procs:
                        proc.join(timeout=10)
                errors = [c for c in counts if isinstance(c, str)]
                if errors:
                    raise RuntimeError(f"exactness trial of {name} failed: {errors}")
                admitted.append(sum(c for c, _ in counts))
                failures += sum(f for _, f in counts)
                # Attempts Redis decided: a timeout fails open without a decision.
                decided.append(admitted[-1] - sum(f for _, f in counts))
            out[name] = {
                "admitted": admitted,
                "admitted_by_redis": decided,
                "min": min(admitted),
                "max": max(admitted),
                "backend_failures": failures,
            }
        return out

    def _attempts(self, name, barrier, answers):
        """In a forked child: EXACT_ATTEMPTS attempts by one identity as soon as all children are ready."""
        from throttling import signals
        from throttling.backends.redis import get_backend

        failures = []
        # A timeout fails open and would look like a race; count it apart.
        signals.backend_failure.connect(lambda sender, **kw: failures.append(1), weak=False)
        try:
            call, prepare, admitted = self.contender(
                name, action=EXACT_ACTION, scope=EXACT_SCOPE, rate=EXACT_RATE
            )
            batch = prepare([self.exact_user] * EXACT_ATTEMPTS)
            # Open this process's connections before the barrier, so the
            # attempts race each other rather than connection set-up.
            get_backend().client.ping()
            self.cache.client.get_client(write=True).ping()
            barrier.wait(timeout=30)
            answers.put((sum(1 for args in batch if admitted(call(*args))), len(failures)))
        except Exception as exc:  # reported by the parent; a child must not hang it
            answers.put(f"{type(exc).__name__}: {exc}")

    def memory(self):
        """MEMORY USAGE of the one key each contender keeps per identity, at 5 and 100 decisions."""
        from throttling.core import version_key

        out = {}
        for name in (CHECK, SCOPED, RATELIMIT):
            action = MEMORY_ACTION if name == CHECK else None
            call, prepare, admitted = self.contender(name, action=action)
            out[name] = {}
            for n in MEMORY_SIZES:
                self.reset_state()
                for args in prepare([self.exact_user] * n):
                    if not admitted(call(*args)):
                        raise AssertionError(f"{name} refused a decision while filling {n} entries")
                keys = [k for k in self.raw.keys("*") if k.decode() != version_key()]
                if len(keys) != 1:
                    raise AssertionError(f"{name} left {len(keys)} keys, expected one: {keys}")
                out[name][str(n)] = self.raw.memory_usage(keys[0], samples=0)
        return out

    def profile(self, calls=20000):
        """cProfile of ActionThrottle.allow_request in steady state: where the time beyond the floor goes."""
        call, prepare, _ = self.contender(ACTION)
        users = self.users
        batch = prepare([users[i % len(users)] for i in range(calls)])
        profiler = cProfile.Profile()
        profiler.enable()
        for args in batch:
            call(*args)
        profiler.disable()
        stream = io.StringIO()
        stats = pstats.Stats(profiler, stream=stream)
        stats.sort_stats("tottime").print_stats(25)
        text = stream.getvalue()
        print(text, file=sys.stderr)
        return text


def _timed(call, batch):
    clock = time.perf_counter_ns
    times, replies = [], []
    for args in batch:
        start = clock()
        reply = call(*args)
        end = clock()
        times.append(end - start)
        replies.append(reply)
    return times, replies


# What a client sends when it opens a connection, not per decision.
_HANDSHAKE = {"HELLO", "AUTH", "SELECT", "CLIENT"}


def _monitor(url, work):
    """Run work() while MONITOR watches; return the commands clients sent (not those scripts ran)."""
    import redis

    marker_start, marker_end = f"bench-start-{secrets.token_hex(4)}", f"bench-end-{secrets.token_hex(4)}"
    seen, ready = [], threading.Event()
    watcher_client = redis.Redis.from_url(url)

    def watch():
        with watcher_client.monitor() as monitor:
            counting = False
            for entry in monitor.listen():
                command = entry["command"]
                if marker_start in command:
                    counting = True
                    ready.set()
                elif marker_end in command:
                    return
                elif counting and entry.get("client_type") != "lua":
                    if command.split(" ", 1)[0].upper() not in _HANDSHAKE:
                        seen.append(command)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    pinger = redis.Redis.from_url(url)
    while not ready.is_set():
        pinger.echo(marker_start)
        ready.wait(0.05)
    work()
    pinger.echo(marker_end)
    thread.join(timeout=10)
    pinger.close()
    watcher_client.close()
    return seen


def _percentile(data, pct):
    ordered = sorted(data)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


def _iqr(data):
    if len(data) < 4:
        return 0.0
    q = statistics.quantiles(data, n=4)
    return q[2] - q[0]


def _version(dist):
    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


def render(results):
    lat = results["latency"]
    trips = results["round_trips"]
    exact = results["exactness"]
    mem = results["memory"]
    pkgs = results["packages"]
    lines = [
        "## Benchmark",
        "",
        f"{results['date']} · Python {results['python']} · Redis {results['redis_server']} · "
        f"{results['machine']}  ",
        " · ".join(f"{k} {v}" for k, v in pkgs.items()),
        "",
        f"Latency: {results['rounds']} rounds × {results['batch']} decisions per contender "
        f"({lat[FLOOR]['n']:,} each), spread over {results['users']} users; one Redis on loopback; "
        f"`python -m bench.run` (seed {results['seed']}, {results['elapsed_s']} s in all).",
        "",
        "| Contender | Median µs | p99 µs | Median vs floor | Commands sent per decision "
        f"| Exact? admitted of {EXACT_LIMIT} (min–max, {results['trials']} trials) |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for name in LATENCY_ORDER:
        row = lat[name]
        if name in exact:
            e = exact[name]
            admitted = f"{e['min']}" if e["min"] == e["max"] else f"{e['min']}–{e['max']}"
            if e["backend_failures"]:
                by_redis = e["admitted_by_redis"]
                decided = f"{min(by_redis)}" if min(by_redis) == max(by_redis) else f"{min(by_redis)}–{max(by_redis)}"
                admitted = f"{decided} decided by Redis ({admitted} with {e['backend_failures']} timeouts failed open)"
        else:
            admitted = "—"
        lines.append(
            f"| {LABELS[name]} | {row['median_us']:.1f} | {row['p99_us']:.1f} | "
            f"{row['median_vs_floor']:.2f}× | {trips[name]:g} | {admitted} |"
        )
    action, scoped, floor = lat[ACTION], lat[SCOPED], lat[FLOOR]
    vs_floor = action["median_us"] / floor["median_us"]
    vs_scoped = scoped["median_us"] / action["median_us"]
    script_cost = floor["median_us"] - lat[RTT]["median_us"]
    exact_failures = sum(e["backend_failures"] for e in exact.values())
    lines += [
        "",
        "Targets:",
        "",
        f"- `ActionThrottle.allow_request` median ≤ {TARGET_VS_FLOOR}× the floor: "
        f"**{vs_floor:.2f}×** ({'met' if vs_floor <= TARGET_VS_FLOOR else 'missed'})",
        f"- `ActionThrottle.allow_request` ≥ {TARGET_VS_SCOPED}× faster than `ScopedRateThrottle` (median): "
        f"**{vs_scoped:.2f}×** ({'met' if vs_scoped >= TARGET_VS_SCOPED else 'missed'})",
        "",
        "Memory per (identity, action) key, `MEMORY USAGE … SAMPLES 0` in bytes:",
        "",
        "| Key | " + " | ".join(f"{n} entries" for n in MEMORY_SIZES) + " |",
        "|---|" + "--:|" * len(MEMORY_SIZES),
    ]
    for name, label in (
        (CHECK, "throttling sliding log (sorted set)"),
        (SCOPED, "DRF throttle history (pickled list)"),
        (RATELIMIT, "django-ratelimit counter (integer)"),
    ):
        lines.append(f"| {label} | " + " | ".join(str(mem[name][str(n)]) for n in MEMORY_SIZES) + " |")
    refused = {name: row["refused"] for name, row in lat.items() if row["refused"] and name not in REFUSING}
    penalised = lat.get(PENALISED)
    lines += [
        "",
        "Notes:",
        "",
        "- Penalties are on (the default) for every row: each decision also reads the member's "
        "penalty mirror and counts offences inside the same script call. The penalised row is a "
        "member with a penalty in force on that action: refused by the same single `EVALSHA`"
        + (f" ({penalised['n'] - penalised['refused']:,} of {penalised['n']:,} refused by the penalty)." if penalised else "."),
        f"- Every other timed decision is the common case: each user stays far below {MAX_COUNT} per "
        f"{PERIOD} s, so all are admitted"
        + (f" (refused anyway: {refused})." if refused else ".")
        + (
            f" {results['backend_failures']} throttling decisions met a Redis timeout "
            "(THROTTLING_SOCKET_TIMEOUT) on the loaded machine and failed open; they are counted "
            "with their time."
            if results["backend_failures"]
            else ""
        ),
        "- Request, view and argument objects are built before timing; each decision is timed alone "
        "with `time.perf_counter_ns`. Contenders take turns in shuffled order every round, so noise "
        "on the machine falls on all of them alike.",
        "- The floor calls a redis-py client's `evalsha` with precomputed KEYS/ARGV, the same ones "
        "`throttling.check` sends. Every other row includes its own Python work on top of its Redis "
        "round trips. throttling sends its `EVALSHA` on a pooled connection without the redis-py "
        "client's per-command layers (retry closures, metrics recording, response callbacks), which "
        "it does not use; that saving pays for most of its own work on top of the floor.",
        f"- The reference row is one plain command; the floor minus it ({script_cost:.0f} µs) is what "
        "running the script costs (its work inside Redis, more arguments, a longer reply). On "
        "loopback a round trip is cheap, so DRF's two plain commands cost little more than one "
        "script call; every extra millisecond between web server and Redis adds one to throttling's "
        "time and two to DRF's and django-ratelimit's.",
        "- Commands sent per decision are counted with `MONITOR`, leaving out the commands a script "
        "runs inside Redis. `ScopedRateThrottle` reads its history and writes it back (`GET` + `SET`); "
        "django-ratelimit adds the key (`SET NX`) and, once it exists, increments it (`EVAL`), so "
        "the first request of each of its windows sends one command.",
        "- throttling's policy cache looks at a change marker in Redis at most every "
        "`THROTTLING_POLICY_REFRESH` (0.5 s); those occasional `GET`s fall in the timed region, "
        "as they would in production.",
        f"- Exactness: {EXACT_PROCESSES} forked processes × {EXACT_ATTEMPTS} simultaneous attempts "
        f"(released by one barrier) by one user against {EXACT_LIMIT} per {PERIOD} s; Redis and "
        "the cache are flushed between trials. Anything above "
        f"{EXACT_LIMIT} is a read-modify-write race"
        + (
            f" (or, for throttling, one of the {exact_failures} attempts that met a Redis timeout "
            "and failed open)."
            if exact_failures
            else "."
        ),
        "- django-ratelimit keeps one fixed-window counter per key, so its memory is constant but its "
        "limit is inexact: a burst straddling a window edge gets up to twice the rate, and the rate "
        "and window are part of the key. DRF's pickled list is smaller per entry, but travels whole in both "
        "directions on every request (the `GET` + `SET` above) and grows with the limit. throttling "
        "keeps one sorted-set entry per admitted action (at most 400 bytes for 5 entries is the "
        f"project's budget), which is why the model caps `max_count` at {MAX_COUNT}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
