"""The benchmark: per-decision latency, exactness under concurrency and memory per key, in one run.

    python -m bench.run [--quick] [--rounds N] [--profile]

Starts its own redis-server (never the machine's), migrates a throwaway SQLite
database, prints a markdown table and writes it to docs/benchmarks/engine.md (a page
of the documentation site); raw numbers go to bench/results-latest.json.
"""

import argparse
import contextlib
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
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from demo_site.redis_server import RedisServer

from . import content_latency
from .capture import capture
from .resp import RawConnection, encode
from .server_cost import Scenario, Template, memory_of_member, prepare, reference_template, stream, summarise

HERE = Path(__file__).resolve().parent
RESULTS_MD = HERE.parent / "docs" / "benchmarks" / "engine.md"
RESULTS_JSON = HERE / "results-latest.json"

PERIOD = 60
# The model caps max_count at 1000; no user comes near it in one run, so every
# timed decision is the common, admitted case.
MAX_COUNT = 1000
EXACT_LIMIT = 5
EXACT_PROCESSES = 8
EXACT_ATTEMPTS = 20
MEMORY_SIZES = (5, 100)
MEMORY_ALGO_SIZES = [10, 100, 1000, 100_000]

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

BUCKET_ACTION = "bench-bucket"
BUCKET_FLOOR_ACTION = "bench-bucket-floor"
BUCKET_DRF_ACTION = "bench-bucket-drf"
BUCKET_FLOOR = "bucket_floor"
BUCKET_CHECK = "bucket_check"
BUCKET_ACTION_THROTTLE = "bucket_action_throttle"

LABELS = {
    RTT: "reference: one plain `GET`, hand-written RESP on a held socket",
    FLOOR: "**floor**: the `EVALSHA` `check` sends (sliding log), hand-written RESP on a held socket",
    BUCKET_FLOOR: "floor, token bucket: the `EVALSHA` `check` sends, raw socket",
    BUCKET_CHECK: "`throttling.check(user, action)`, token bucket",
    BUCKET_ACTION_THROTTLE: "`ActionThrottle().allow_request(request, view)`, token bucket",
    CHECK: "`throttling.check(user, action)`",
    ACTION: "`ActionThrottle().allow_request(request, view)`",
    SCOPED: "DRF `ScopedRateThrottle` (django-redis cache)",
    RATELIMIT: "django-ratelimit `is_ratelimited(..., increment=True)`",
    PENALISED: "`ActionThrottle` refusing a penalised member (429 with the penalty's message)",
}
LABELS.update(content_latency.LABELS)
LATENCY_ORDER = [RTT, FLOOR, CHECK, ACTION, PENALISED, SCOPED, RATELIMIT]
# Rows that exist only when ActionPolicy has an `algorithm` field (the token bucket).
BUCKET_ORDER = [BUCKET_FLOOR, BUCKET_CHECK, BUCKET_ACTION_THROTTLE]
# Rows whose code is a bare socket: their CPU is the floor's CPU.
RAW = {RTT, FLOOR, BUCKET_FLOOR}
# Contenders whose every decision is meant to be a refusal.
REFUSING = {PENALISED}
EXACT_ORDER = [CHECK, ACTION, SCOPED, RATELIMIT]

TARGET_VS_FLOOR = 1.3
TARGET_VS_SCOPED = 2.0
TARGET_CPU_VS_BASELINE = 0.6
TARGET_LOG_SERVER_US = 12
TARGET_BUCKET_SERVER_US = 8
TARGET_BUCKET_PER_CORE = 80_000
BASELINE_JSON = HERE / "baseline.json"


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="a smaller run (does not rewrite docs/benchmarks/engine.md)"
    )
    parser.add_argument("--rounds", type=int, help="timed rounds (default 300, quick 40)")
    parser.add_argument("--batch", type=int, default=50, help="decisions per contender per round")
    parser.add_argument("--users", type=int, help="distinct users the traffic is spread over (default 500)")
    parser.add_argument("--trials", type=int, help="exactness trials per contender (default 5, quick 2)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the round order shuffle")
    parser.add_argument("--no-http", action="store_true", help="skip the gunicorn + wrk run")
    parser.add_argument("--http-rounds", type=int, default=5, help="interleaved rounds of the HTTP run")
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


def setup_django(redis_url, db_dir):
    """Django with bench.settings on `redis_url` and a SQLite database in `db_dir`, migrated."""
    # Settings read these at import, so they are set before django.setup().
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    os.environ["BENCH_REDIS_URL"] = redis_url
    os.environ["BENCH_DB_DIR"] = db_dir
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


@contextlib.contextmanager
def bench_site(prefix="throttling-bench-", setup=None):
    """(a redis-server of the benchmark's own, a throwaway directory for the SQLite database) with
    Django set up on them (`setup(server, db_dir)`, or setup_django); both gone afterwards."""
    db_dir = tempfile.mkdtemp(prefix=prefix)
    server = RedisServer()
    server.start()
    try:
        if setup is None:
            setup_django(server.url, db_dir)
        else:
            setup(server, db_dir)
        yield server, db_dir
    finally:
        server.stop()
        shutil.rmtree(db_dir, ignore_errors=True)


def main(argv=None):
    options = parse_args(argv)
    started = time.monotonic()
    with bench_site() as (server, db_dir):
        bench = Bench(server, options)
        results = bench.run()
        if not options.no_http:
            from throttling.models import ActionPolicy

            from .http import run_http
            from .urls import HTTP_ACTION

            ActionPolicy.objects.create(action=HTTP_ACTION, period=PERIOD, max_count=MAX_COUNT)
            bench.reset_state()
            results["http"] = run_http(
                {"BENCH_REDIS_URL": server.url, "BENCH_DB_DIR": db_dir, "DJANGO_SETTINGS_MODULE": "bench.settings"},
                options.users,
                rounds=2 if options.quick else options.http_rounds,
                duration=2 if options.quick else 4,
                seed=options.seed,
            )
        results["elapsed_s"] = round(time.monotonic() - started, 1)

    publish(render(results), dict(results, samples_ns=bench.samples), options.quick, RESULTS_MD, RESULTS_JSON)
    return 0


def publish(markdown, raw, quick, results_md, results_json):
    """Print a run's page and keep its raw numbers; the page is written only for a full run."""
    print(markdown)
    results_json.write_text(json.dumps(raw) + "\n", encoding="utf-8")
    if quick:
        print(f"(--quick: {results_md.name} left as it was; raw numbers in {results_json.name})")
    else:
        results_md.write_text(markdown, encoding="utf-8")


class Bench:
    def __init__(self, server, options):
        import redis
        from django.contrib.auth import get_user_model
        from django.core.cache import cache
        from django.test import RequestFactory
        from rest_framework.request import Request

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

        self.has_bucket = _has_field(ActionPolicy, "algorithm")
        if self.has_bucket:
            for action in (BUCKET_ACTION, BUCKET_FLOOR_ACTION, BUCKET_DRF_ACTION):
                ActionPolicy.objects.create(action=action, period=PERIOD, max_count=MAX_COUNT, algorithm="token_bucket")
        _policy_cache().clear()

        # The floor replays, on a held raw socket, the very EVALSHA check() sends
        # for each user (captured with MONITOR: whatever the script's KEYS and
        # ARGV are today), with a fresh token where check() puts one per call.
        self.raw_conn = RawConnection.from_url(server.url)
        self.floor_templates = {FLOOR: self.templates(FLOOR_ACTION)}
        if self.has_bucket:
            self.floor_templates[BUCKET_FLOOR] = self.templates(BUCKET_FLOOR_ACTION)
        self.rtt_commands = {user.pk: encode(["GET", f"bench:rtt:{user.pk}"]) for user in self.users}
        # Decisions with content (releases before it have no such fields).
        self.content = content_latency.ContentRows(self) if _has_field(ActionPolicy, "same_content_period") else None

    def templates(self, action):
        """Per user: the command check(user, action) sends, captured once, replayable with fresh tokens."""
        import throttling

        url = self.server.url
        first = self.users[0]
        template = Template(url, lambda: throttling.check(first, action))
        # Capture every user's command in one MONITOR session (tokens are
        # refreshed per replay; only the keys differ between users).
        for user in self.users:
            throttling.check(user, action)  # warm: nothing else but the EVALSHA in the capture
        sent = capture(url, lambda: [throttling.check(user, action) for user in self.users])
        scripts = [args for args in sent if args[0].upper() == template.args[0].upper()]
        if len(scripts) != len(self.users):
            raise RuntimeError(f"expected one script call per user, saw {len(scripts)} for {len(self.users)}")
        out = {}
        for user, args in zip(self.users, scripts):
            per_user = Template.__new__(Template)
            per_user.__dict__.update(template.__dict__)
            per_user.args = args
            out[user.pk] = per_user
        self.floor_shape_matches = all(len(t.args) == len(template.args) for t in out.values())
        return out

    # -- contenders ---------------------------------------------------------

    def contender(self, name, action=None, scope=None, rate=RATE):
        """(call, prepare, admitted): prepare(users) builds the argument tuples outside the timing."""
        from django_ratelimit.core import is_ratelimited
        from rest_framework.exceptions import Throttled
        from rest_framework.throttling import ScopedRateThrottle
        from rest_framework.views import APIView

        import throttling
        from throttling.throttles import ActionThrottle

        if name in content_latency.ORDER:
            return self.content.contender(name)

        if name == RTT:
            # A key nobody writes: what one command costs before any script runs.
            conn = self.raw_conn
            return conn.call, lambda users: [(self.rtt_commands[user.pk],) for user in users], lambda _: True

        if name in (FLOOR, BUCKET_FLOOR):
            conn, templates = self.raw_conn, self.floor_templates[name]

            def prepare(users):
                return [(templates[user.pk].command(),) for user in users]

            return conn.call, prepare, lambda reply: reply[0] == 1

        if name == BUCKET_CHECK:
            return throttling.check, lambda users: [(user, BUCKET_ACTION) for user in users], lambda d: d.allowed

        if name == BUCKET_ACTION_THROTTLE:
            return self.contender(ACTION, action=BUCKET_DRF_ACTION)

        if name == CHECK:
            action = action or CHECK_ACTION
            return throttling.check, lambda users: [(user, action) for user in users], lambda d: d.allowed

        if name == ACTION:
            # A view instance per request, as DRF makes one: ActionThrottle
            # leaves what it decided on the instance, for the refund after the response.
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
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
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
        results["exactness"] = self.exactness()
        results["server_cost"] = self.server_costs()
        results["memory_by_algorithm"] = self.memory_by_algorithm()
        results["baseline"] = _load_baseline()
        results["memory"] = self.memory()
        if self.options.profile:
            results["profile"] = self.profile()
        return results

    @property
    def order(self):
        return (
            LATENCY_ORDER
            + (BUCKET_ORDER if self.has_bucket else [])
            + (content_latency.ORDER if self.content is not None else [])
        )

    def latency(self):
        from throttling import signals

        options = self.options
        names = self.order
        contenders = {name: self.contender(name) for name in names}
        samples = {name: [] for name in names}
        cpu = dict.fromkeys(names, 0)
        refused = dict.fromkeys(names, 0)
        round_medians = {name: [] for name in names}
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
        for name in names:
            call, prepare, _ = contenders[name]
            for args in prepare(users[: min(len(users), 4 * options.batch)]):
                call(*args)

        offset = 0
        for _ in range(options.rounds):
            order = names[:]
            rng.shuffle(order)
            chosen = batch_users(offset)
            offset += options.batch
            for name in order:
                call, prepare, admitted = contenders[name]
                batch = prepare(chosen)
                times, replies, cpu_ns = _timed(call, batch)
                samples[name].extend(times)
                cpu[name] += cpu_ns
                round_medians[name].append(statistics.median(times))
                refused[name] += sum(1 for reply in replies if not admitted(reply))

        signals.backend_failure.disconnect(dispatch_uid="bench-failures")
        self.samples = samples
        self.backend_failures = len(failures)
        floor_median = statistics.median(samples[FLOOR])
        table = {}
        for name in names:
            data = samples[name]
            median = statistics.median(data)
            table[name] = {
                "n": len(data),
                "median_us": median / 1000,
                "p99_us": _percentile(data, 99) / 1000,
                "mean_us": statistics.fmean(data) / 1000,
                "median_vs_floor": median / floor_median,
                # This thread's CPU (user + system) per decision: Python work and syscalls.
                "cpu_us": cpu[name] / len(data) / 1000,
                "refused": refused[name],
                # Spread of the per-round medians: how much the machine moved during the run.
                "round_median_iqr_us": _iqr(round_medians[name]) / 1000,
            }
        return table

    def round_trips(self):
        """Commands each contender sends per decision, seen by MONITOR (not those its script runs)."""
        calls = 20
        counts, sent = {}, {}
        for name in self.order:
            call, prepare, _ = self.contender(name)
            batch = prepare(self.users[:calls])
            # A fresh load now keeps the policy change marker out of the count.
            _policy_cache().clear()
            _policy_cache().get(CHECK_ACTION)
            sent[name] = capture(self.server.url, lambda: [call(*args) for args in batch])
            counts[name] = len(sent[name]) / calls
        # The floor sends what check sends, apart from the action (in keys and
        # ARGV) and the per-call token: same command, same number of arguments.
        floor, check = sent[FLOOR][0], sent[CHECK][0]
        self.floor_matches_check = (
            len(floor) == len(check)
            and floor[:2] == check[:2]
            and all(
                a == b or FLOOR_ACTION.encode() in a or i in self.floor_templates[FLOOR][self.users[0].pk].per_call
                for i, (a, b) in enumerate(zip(floor, check))
            )
        )
        if not self.floor_matches_check:
            print(f"warning: the floor's EVALSHA differs from check's: {floor} / {check}", file=sys.stderr)
        return counts

    def reset_state(self):
        self.raw.flushall()
        self.cache.clear()
        # Reload now (the flush removed the change marker) so forked children
        # start from a fresh policy cache and never reach for the database.
        _policy_cache().clear()
        _policy_cache().get(EXACT_ACTION)

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
                    ctx.Process(target=self._attempts, args=(name, barrier, answers)) for _ in range(EXACT_PROCESSES)
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
        import throttling
        from throttling import signals

        failures = []
        # A timeout fails open and would look like a race; count it apart.
        signals.backend_failure.connect(lambda sender, **kw: failures.append(1), weak=False)
        try:
            call, prepare, admitted = self.contender(name, action=EXACT_ACTION, scope=EXACT_SCOPE, rate=EXACT_RATE)
            batch = prepare([self.exact_user] * EXACT_ATTEMPTS)
            # Open this process's connections before the barrier, so the
            # attempts race each other rather than connection set-up.
            throttling.peek(self.exact_user, EXACT_ACTION)
            self.cache.client.get_client(write=True).ping()
            barrier.wait(timeout=30)
            answers.put((sum(1 for args in batch if admitted(call(*args))), len(failures)))
        except Exception as exc:  # reported by the parent; a child must not hang it
            answers.put(f"{type(exc).__name__}: {exc}")

    def memory(self):
        """MEMORY USAGE of the one key each contender keeps per identity, at 5 and 100 decisions."""
        out = {}
        for name in (CHECK, SCOPED, RATELIMIT):
            action = MEMORY_ACTION if name == CHECK else None
            call, prepare, admitted = self.contender(name, action=action)
            out[name] = {}
            for n in MEMORY_SIZES:
                self.reset_state()
                before = set(self.raw.keys("*"))
                for args in prepare([self.exact_user] * n):
                    if not admitted(call(*args)):
                        raise AssertionError(f"{name} refused a decision while filling {n} entries")
                keys = [k for k in self.raw.keys("*") if k not in before]
                if not keys:
                    raise AssertionError(f"{name} left no key after {n} decisions")
                out[name][str(n)] = sum(self.raw.memory_usage(key, samples=0) for key in keys)
        return out

    # -- inside Redis ------------------------------------------------------

    def make_policy(self, action, algorithm, windows):
        """A policy with `windows` [(period, max_count), ...]; None when this version has no such algorithm."""
        from throttling.models import ActionPolicy, ActionWindow

        fields = {"action": action, "period": windows[0][0], "max_count": windows[0][1]}
        if algorithm != "sliding_log":
            if not self.has_bucket:
                return None
            fields["algorithm"] = algorithm
        policy = ActionPolicy.objects.create(**fields)
        for period, max_count in windows[1:]:
            ActionWindow.objects.create(policy=policy, period=period, max_count=max_count)
        _policy_cache().clear()
        return action

    def scenarios(self):
        quick = self.options.quick
        # Long windows: nothing leaves them while the benchmark runs.
        extra = [(3600, 1000), (86400, 1000), (604800, 1000), (2592000, 1000)]
        out = []
        for algorithm, short in (("sliding_log", "log"), ("token_bucket", "bucket")):
            for windows in (1, 2, 4):
                members = 2000
                prefill = 10 if algorithm == "sliding_log" else 1
                out.append(
                    Scenario(
                        f"{short}-w{windows}",
                        algorithm,
                        [(3600, 1000)] + extra[1:windows],
                        prefill=prefill,
                        members=members,
                        calls=members,
                    )
                )
            # Entries in the window: the log grows with them, the bucket must not.
            for entries in (100, 990):
                members = 2000 if entries <= 100 else 200
                prefill = entries if algorithm == "sliding_log" else 1
                out.append(
                    Scenario(
                        f"{short}-n{entries}",
                        algorithm,
                        [(3600, 1000)],
                        prefill=prefill,
                        members=members,
                        calls=members,
                    )
                )
            # Refused: a full window (the log holds max_count entries; the bucket is empty).
            for limit in (10, 1000):
                members = 2000 if limit <= 10 else 100
                out.append(
                    Scenario(
                        f"{short}-refused-n{limit}",
                        algorithm,
                        [(3600, limit)],
                        prefill=limit,
                        members=members,
                        calls=2 * members,
                        outcome="refused",
                    )
                )
            # Per target (replies per thread): a member's next decision on a target it has
            # counted on, and its first on a target (a key the call creates).
            members = 2000
            for name, prefill, fresh in (
                ("target", 10 if algorithm == "sliding_log" else 1, False),
                ("target-first", 0, True),
            ):
                out.append(
                    Scenario(
                        f"{short}-{name}",
                        algorithm,
                        [(3600, 1000)],
                        prefill=prefill,
                        members=members,
                        calls=members,
                        target="thread-1",
                        fresh=fresh,
                    )
                )
            if algorithm == "token_bucket":
                # Throughput: one window, many members, a long pipelined stream.
                out.append(
                    Scenario(
                        "bucket-stream",
                        algorithm,
                        [(3600, 1000)],
                        members=10000,
                        calls=10000 if quick else 50000,
                    )
                )
        return out

    def server_costs(self):
        """Every scenario prepared, then streamed in interleaved rounds (shuffled each round)."""
        import throttling

        url = self.server.url
        planned = []  # (scenario, template)
        # Reference rows: what any script with these KEYS/ARGV costs before doing
        # anything, and release 0.1's sliding-log script doing the same decision.
        key = lambda suffix: b"throttling:{tag}:ref:" + suffix  # noqa: E731
        keys = [b"4", key(b"log"), key(b"off"), b"throttling:{tag}:penalties", key(b"esc")]
        references = (
            (
                "empty script, same KEYS/ARGV",
                "return {1, 2, 3, 4, 5, 6}",
                [*keys, b"c1", b"{token}", b"ref", b"600 5 300", b"60", b"1000"],
            ),
            (
                "release 0.1 log script, 1 window, admitted",
                (HERE / "reference" / "sliding_log_0_1.lua").read_text(encoding="utf-8"),
                [*keys, b"check", b"1", b"{token}", b"ref", b"600", b"5", b"300", b"60", b"1000"],
            ),
        )
        for name, script, args in references:
            scenario = Scenario(
                name,
                "reference",
                [(PERIOD, 1000)],
                prefill=10,
                members=2000,
                calls=2000 if self.options.quick else 4000,
            )
            template = reference_template(url, script, args)
            prepare(url, template, scenario, lambda reply: reply[0] == 1)
            planned.append((scenario, template))
        for scenario in self.scenarios():
            action = f"bench-srv-{scenario.name}"
            if self.make_policy(action, scenario.algorithm, scenario.windows) is None:
                continue
            template = Template(
                url, lambda target=scenario.target: throttling.check(self.exact_user, action, target=target)
            )
            want = 1 if scenario.outcome == "admitted" else 0
            prepare(url, template, scenario, lambda reply, want=want: reply[0] == want)
            planned.append((scenario, template))
        position = {id(scenario): i for i, (scenario, _) in enumerate(planned)}
        rng = random.Random(self.options.seed)
        for _ in range(2 if self.options.quick else 5):
            rng.shuffle(planned)
            for scenario, template in planned:
                stream(url, template, scenario)
        out = {}
        for scenario, _ in sorted(planned, key=lambda p: position[id(p[0])]):
            result = summarise(scenario)
            if not result["as_expected"]:
                print(f"warning: scenario {scenario.name} did not decide as intended", file=sys.stderr)
            out[scenario.name] = dict(
                result,
                algorithm=scenario.algorithm,
                outcome=scenario.outcome,
                windows=len(scenario.windows),
                prefill=scenario.prefill,
            )
        return out

    def memory_by_algorithm(self):
        """Bytes per (member, action), all keys summed, after filling a window of max_count n."""
        import throttling

        out = {}
        for algorithm, short in (("sliding_log", "log"), ("token_bucket", "bucket")):
            sizes = (
                MEMORY_ALGO_SIZES if algorithm == "token_bucket" else [n for n in MEMORY_ALGO_SIZES if n <= MAX_COUNT]
            )
            for n in sizes:
                action = f"bench-mem-{short}-{n}"
                if self.make_policy(action, algorithm, [(86400, n)]) is None:
                    break
                template = Template(self.server.url, lambda: throttling.check(self.exact_user, action))
                member = 10**9 + 10 * n + (algorithm == "token_bucket")
                conn = RawConnection.from_url(self.server.url)
                # n decisions by one member; the log's last one fills its window.
                conn.pipeline([template.command(member) for _ in range(n - 1)])
                last = conn.call(template.command(member))
                conn.close()
                size, keys = memory_of_member(self.server.url, template, member)
                out.setdefault(short, {})[str(n)] = {"bytes": size, "keys": keys, "last_admitted": last[0] == 1}
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
    clock, cpu_clock = time.perf_counter_ns, time.thread_time_ns
    times, replies = [], []
    cpu_start = cpu_clock()
    for args in batch:
        start = clock()
        reply = call(*args)
        end = clock()
        times.append(end - start)
        replies.append(reply)
    return times, replies, cpu_clock() - cpu_start


def _load_baseline():
    """Client figures of the release before this work, measured by this harness (see bench/baseline.json)."""
    try:
        return json.loads(BASELINE_JSON.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def _has_field(model, name):
    return any(f.name == name for f in model._meta.get_fields())


def _policy_cache():
    try:
        from throttling.engine.policies.cache import policies
    except ImportError:  # a release before the layered package
        from throttling.core import policies
    return policies


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


def _met(ok):
    return "met" if ok else "**not met**"


def render(results):
    lat = results["latency"]
    trips = results["round_trips"]
    exact = results["exactness"]
    mem = results["memory"]
    pkgs = results["packages"]
    names = [name for name in LATENCY_ORDER + BUCKET_ORDER + content_latency.ORDER if name in lat]
    lines = [
        "# Engine benchmark",
        "",
        "*Written by `make bench` (`python -m bench.run`): this page is generated, never edited by hand.*",
        "",
        f"{results['date']} · Python {results['python']} · Redis {results['redis_server']} · {results['machine']}  ",
        " · ".join(f"{k} {v}" for k, v in pkgs.items()),
        "",
        f"Latency: {results['rounds']} rounds × {results['batch']} decisions per contender "
        f"({lat[FLOOR]['n']:,} each), spread over {results['users']} users; one Redis on loopback; "
        f"`python -m bench.run` (seed {results['seed']}, {results['elapsed_s']} s in all).",
        "",
        "| Contender | Median µs | p99 µs | Median vs floor | Client CPU µs per decision "
        f"| Commands sent per decision | Exact? admitted of {EXACT_LIMIT} (min–max, {results['trials']} trials) |",
        "|---|--:|--:|--:|--:|--:|--:|",
    ]
    for name in names:
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
            f"{row['median_vs_floor']:.2f}× | {row['cpu_us']:.1f} | {trips.get(name, 0):g} | {admitted} |"
        )
    action, scoped, floor = lat[ACTION], lat[SCOPED], lat[FLOOR]
    vs_floor = action["median_us"] / floor["median_us"]
    vs_scoped = scoped["median_us"] / action["median_us"]
    baseline = results.get("baseline")
    targets = [
        f"- `ActionThrottle.allow_request` median ≤ {TARGET_VS_FLOOR}× the raw-socket floor: "
        f"**{vs_floor:.2f}×** ({_met(vs_floor <= TARGET_VS_FLOOR)})",
        f"- `ActionThrottle.allow_request` ≥ {TARGET_VS_SCOPED}× faster than `ScopedRateThrottle` (median): "
        f"**{vs_scoped:.2f}×** ({_met(vs_scoped >= TARGET_VS_SCOPED)})",
    ]
    if baseline:
        ratio = action["cpu_us"] / baseline["action_cpu_us"]
        targets.append(
            f"- client CPU per `ActionThrottle` decision ≤ {TARGET_CPU_VS_BASELINE:.0%} of the previous release's "
            f"({baseline['action_cpu_us']:.1f} µs, {baseline['measured']}): **{action['cpu_us']:.1f} µs = {ratio:.0%}** "
            f"({_met(ratio <= TARGET_CPU_VS_BASELINE)})"
        )
    targets += content_latency.render_rows(lat)
    srv = results.get("server_cost", {})
    if "log-w1" in srv:
        us = srv["log-w1"]["usec_per_call"]
        targets.append(
            f"- sliding-log script ≤ {TARGET_LOG_SERVER_US} µs of Redis CPU per call (1 window, admitted): "
            f"**{us:.1f} µs** ({_met(us <= TARGET_LOG_SERVER_US)})"
        )
    if "bucket-w1" in srv:
        us = srv["bucket-w1"]["usec_per_call"]
        targets.append(
            f"- token-bucket script ≤ {TARGET_BUCKET_SERVER_US} µs per call (1 window, admitted): "
            f"**{us:.1f} µs** ({_met(us <= TARGET_BUCKET_SERVER_US)})"
        )
    if "bucket-stream" in srv:
        rate = srv["bucket-stream"]["per_core_per_s"]
        targets.append(
            f"- one Redis core ≥ {TARGET_BUCKET_PER_CORE:,} bucket decisions/s pipelined: "
            f"**{rate:,.0f}/s** ({_met(rate >= TARGET_BUCKET_PER_CORE)})"
        )
    http = results.get("http")
    if http and http.get("added_cpu_ratio") is not None:
        ratio = http["added_cpu_ratio"]
        targets.append(
            f"- HTTP: added worker CPU per request of `ActionThrottle` ≤ ½ of `ScopedRateThrottle`'s: "
            f"**{ratio:.2f}** ({_met(ratio <= 0.5)})"
        )
    lines += ["", "Targets:", "", *targets, ""]

    if srv:
        lines += [
            "Inside Redis: the command `check` sends (captured with MONITOR), replayed pipelined on a raw socket "
            "at synthetic members. µs/call is `INFO commandstats`; Redis CPU/call and decisions per core-second "
            "are the server process's own CPU time (`INFO cpu`) over the stream, so they include its network work.",
            "",
            "| Scenario | Algorithm | Windows | Outcome | Entries/decisions before | µs/call (commandstats) "
            "| Redis CPU µs/call | Decisions per Redis core-second | Pipelined, this client, per s |",
            "|---|---|--:|---|--:|--:|--:|--:|--:|",
        ]
        for name, row in srv.items():
            lines.append(
                f"| {name} | {row['algorithm']} | {row['windows']} | {row['outcome']}"
                f"{'' if row['as_expected'] else ' (⚠ not as intended)'} | {row['prefill']} | "
                f"{row['usec_per_call']:.2f} | {row['redis_cpu_us_per_call']:.2f} | {row['per_core_per_s']:,.0f} | "
                f"{row['pipelined_wall_per_s']:,.0f} |"
            )
        lines.append("")
    algo_mem = results.get("memory_by_algorithm") or {}
    if algo_mem:
        sizes = sorted({int(n) for per in algo_mem.values() for n in per})
        lines += [
            "Memory per (member, action), every key summed, `MEMORY USAGE … SAMPLES 0`, after max_count "
            "decisions in a window of max_count (the log caps max_count at 1,000):",
            "",
            "| Algorithm | " + " | ".join(f"max_count {n:,}" for n in sizes) + " |",
            "|---|" + "--:|" * len(sizes),
        ]
        for short, per in algo_mem.items():
            cells = [f"{per[str(n)]['bytes']:,} B" if str(n) in per else "refused (cap)" for n in sizes]
            lines.append(f"| {short} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [
        "Memory per (identity, action) of the other libraries beside ours, bytes:",
        "",
        "| Key | " + " | ".join(f"{n} decisions" for n in MEMORY_SIZES) + " |",
        "|---|" + "--:|" * len(MEMORY_SIZES),
    ]
    for name, label in (
        (CHECK, "throttling sliding log"),
        (SCOPED, "DRF throttle history (pickled list)"),
        (RATELIMIT, "django-ratelimit counter (integer)"),
    ):
        lines.append(f"| {label} | " + " | ".join(str(mem[name][str(n)]) for n in MEMORY_SIZES) + " |")
    if http:
        lines += ["", *render_http(http)]
    refused = {name: row["refused"] for name, row in lat.items() if row["refused"] and name not in REFUSING}
    lines += [
        "",
        "Notes:",
        "",
        "- The floor is the physical limit: the very `EVALSHA` `throttling.check` sends (captured with MONITOR, "
        "so it follows the script), encoded by hand as RESP and written on one held socket, reply read with a "
        "minimal parser. No client library can send the same decision for less on this machine."
        + ("" if results.get("floor_matches_check") else " (⚠ the floor's command did not match check's in this run)"),
        "- Client CPU is `time.thread_time_ns` over each batch divided by its decisions: Python work plus "
        "syscalls, not the time spent waiting for Redis.",
        "- Penalties are on (the default) for every row. The penalised row is a member with a penalty in "
        "force, refused by the same single `EVALSHA`.",
        f"- Every other timed decision is the common case: each user stays far below {MAX_COUNT} per "
        f"{PERIOD} s, so all are admitted"
        + (f" (refused anyway: {refused})." if refused else ".")
        + (
            f" {results['backend_failures']} throttling decisions met a Redis timeout on the loaded machine "
            "and failed open; they are counted with their time."
            if results["backend_failures"]
            else ""
        ),
        "- Contenders take turns in shuffled order every round, so noise on the machine falls on all alike.",
        f"- Exactness: {EXACT_PROCESSES} forked processes × {EXACT_ATTEMPTS} simultaneous attempts by one "
        f"user against {EXACT_LIMIT} per {PERIOD} s; anything above {EXACT_LIMIT} is a read-modify-write race.",
        "",
    ]
    return "\n".join(lines)


def render_http(http):
    lines = [
        f"HTTP: gunicorn ({http['workers']} sync workers) serving one DRF `POST` endpoint per contender, "
        f"driven by `wrk` ({http['connections']} connections, {http['duration']} s per round, "
        f"{http['rounds']} interleaved rounds, members rotated per request); worker CPU from `/proc`.",
        "",
        "| Endpoint | req/s (median of rounds) | p50 ms | p99 ms | Worker CPU µs per request | Added CPU vs no throttle |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for _name, row in http["endpoints"].items():
        added = "—" if row.get("added_cpu_us") is None else f"{row['added_cpu_us']:.0f} µs"
        lines.append(
            f"| {row['label']} | {row['rps']:,.0f} | {row['p50_ms']:.2f} | {row['p99_ms']:.2f} | "
            f"{row['cpu_us']:.0f} | {added} |"
        )
    return lines


if __name__ == "__main__":
    sys.exit(main())
