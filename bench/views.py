"""Views through Django's handler: a view bound by THROTTLING_VIEWS (the middleware) beside the same
view decorated with @throttle_action, and beside no throttle at all.

    python -m bench.views [--rounds N] [--batch N] [--users N]

Each request is a real HttpRequest through a BaseHandler's whole path (URL resolution, view
middleware, the view, the response back through the middleware), built before the timing.
Scenarios take turns in shuffled order every round. Writes docs/benchmarks/views.md.
"""

import argparse
import datetime
import os
import platform
import random
import secrets
import statistics
import sys
from pathlib import Path

from .run import PERIOD, _percentile, _timed, bench_site

HERE = Path(__file__).resolve().parent
RESULTS_MD = HERE.parent / "docs" / "benchmarks" / "views.md"

MAX_COUNT = 1000
DECORATED_ACTION = "bench-decorated"
BOUND_ACTION = "bench-bound"
MIDDLEWARE = "throttling.middleware.ActionThrottleMiddleware"

NONE, DECORATED, BOUND = "none", "decorated", "bound"
SCENARIOS = {
    NONE: ("/views/none/", "the view alone, no throttle"),
    DECORATED: ("/views/decorated/", "`@throttle_action` on the view"),
    BOUND: ("/views/bound/", "the view bound by `THROTTLING_VIEWS`, through `ActionThrottleMiddleware`"),
}
TARGET = 1.05  # the bound view within 5 % of the decorated one


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bench.views", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=100, help="timed rounds (default 100)")
    parser.add_argument("--batch", type=int, default=50, help="requests per scenario per round")
    parser.add_argument("--users", type=int, default=500, help="members the requests are spread over")
    parser.add_argument("--seed", type=int, default=None, help="seed of the round order shuffle")
    options = parser.parse_args(argv)
    if options.seed is None:
        options.seed = secrets.randbelow(2**31)
    if options.rounds * options.batch > options.users * MAX_COUNT:
        parser.error("--rounds × --batch must stay under --users × 1000, so every request is admitted")
    return options


def main(argv=None):
    options = parse_args(argv)
    with bench_site():
        results = run(options)
    markdown = render(results)
    print(markdown)
    RESULTS_MD.write_text(markdown, encoding="utf-8")
    return 0


def _handler(middleware):
    from django.core.handlers.base import BaseHandler
    from django.test.utils import override_settings

    with override_settings(MIDDLEWARE=middleware):
        handler = BaseHandler()
        handler.load_middleware()
    return handler


def run(options):
    import django
    from django.contrib.auth import get_user_model
    from django.test import RequestFactory
    from django.test.utils import override_settings

    from throttling.models import ActionPolicy

    for action in (DECORATED_ACTION, BOUND_ACTION):
        ActionPolicy.objects.create(action=action, period=PERIOD, max_count=MAX_COUNT)
    User = get_user_model()
    User.objects.bulk_create(User(username=f"bench-view-{i}") for i in range(options.users))
    users = list(User.objects.filter(username__startswith="bench-view-"))

    # A site that decorates its views has no binding middleware; one that binds has it.
    with override_settings(ROOT_URLCONF="bench.urls", THROTTLING_VIEWS={"bench-bound": BOUND_ACTION}):
        handlers = {NONE: _handler([]), DECORATED: _handler([]), BOUND: _handler([MIDDLEWARE])}
        factory = RequestFactory()

        def prepare(name, chosen):
            path = SCENARIOS[name][0]
            batch = []
            for user in chosen:
                request = factory.post(path)
                request.user = user  # as AuthenticationMiddleware leaves it, already read
                batch.append((request,))
            return batch

        rng = random.Random(options.seed)
        samples = {name: [] for name in SCENARIOS}
        cpu = dict.fromkeys(SCENARIOS, 0)
        statuses = {name: {} for name in SCENARIOS}
        for name in SCENARIOS:  # warm: imports, connections, the policy cache, the bindings
            for (request,) in prepare(name, users[:100]):
                handlers[name].get_response(request)
        offset = 0
        for _ in range(options.rounds):
            chosen = [users[(offset + i) % len(users)] for i in range(options.batch)]
            offset += options.batch
            order = list(SCENARIOS)
            rng.shuffle(order)
            for name in order:
                times, responses, cpu_ns = _timed(handlers[name].get_response, prepare(name, chosen))
                samples[name].extend(times)
                cpu[name] += cpu_ns
                for response in responses:
                    statuses[name][response.status_code] = statuses[name].get(response.status_code, 0) + 1

    table = {
        name: {
            "n": len(data),
            "median_us": statistics.median(data) / 1000,
            "p99_us": _percentile(data, 99) / 1000,
            "cpu_us": cpu[name] / len(data) / 1000,
            "statuses": statuses[name],
        }
        for name, data in samples.items()
    }
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "django": django.get_version(),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
        "rounds": options.rounds,
        "batch": options.batch,
        "users": options.users,
        "seed": options.seed,
        "table": table,
    }


def render(results):
    table = results["table"]
    bare, decorated, bound = table[NONE], table[DECORATED], table[BOUND]
    lines = [
        "# Views: bound by URL name or decorated",
        "",
        "*Written by `python -m bench.views` (part of `make bench`): this page is generated, never edited by hand.*",
        "",
        f"{results['date']} · Python {results['python']} · Django {results['django']} · {results['machine']}",
        "",
        f"{results['rounds']} rounds × {results['batch']} requests per scenario ({decorated['n']:,} each), spread "
        f"over {results['users']} members, scenarios in shuffled order every round (seed {results['seed']}); one "
        "Redis on loopback. Each request goes through Django's handler: URL resolution, view middleware, the "
        "view (a plain `POST` view answering 200), the response back; every request is admitted.",
        "",
        "| Scenario | Median µs | p99 µs | Client CPU µs per request | Added median vs no throttle |",
        "|---|--:|--:|--:|--:|",
    ]
    for name, (_path, label) in SCENARIOS.items():
        row = table[name]
        added = "—" if name == NONE else f"{row['median_us'] - bare['median_us']:.1f} µs"
        lines.append(f"| {label} | {row['median_us']:.1f} | {row['p99_us']:.1f} | {row['cpu_us']:.1f} | {added} |")
    ratio = bound["median_us"] / decorated["median_us"]
    cpu_ratio = bound["cpu_us"] / decorated["cpu_us"]
    statuses = ", ".join(f"{name} {row['statuses']}" for name, row in table.items())
    lines += [
        "",
        "Target:",
        "",
        f"- a bound view's median within {TARGET - 1:.0%} of the decorated view's: **{ratio:.3f}×** "
        f"({'met' if ratio <= TARGET else '**not met**'}); client CPU {cpu_ratio:.3f}×",
        "",
        "Both make one Redis call per request (the same `EVALSHA`); the binding finds its view by the URL name "
        "Django has already resolved (`request.resolver_match`), one dictionary lookup.",
        "",
        f"Statuses: {statuses}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
