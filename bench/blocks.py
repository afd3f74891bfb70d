"""The blocks benchmark: an address's block among up to 100,000 ranges, and what blocks and surges add to a decision.

    python -m bench.blocks [--quick]

Starts its own redis-server (never the machine's) and a throwaway SQLite database, then measures:

- the lookup: BlockSet.find() (both indexes, the member's blocks, the expiry check) among 1,000,
  10,000 and 100,000 random ranges, nested and apart, IPv4 and IPv6 apart, for addresses inside
  ranges and outside any; and the client address read from a request (the NUM_PROXIES rule);
- a decision: throttling.check(request, action) with no block, 1,000 and 100,000 blocks in place,
  and a surge on, in interleaved rounds on the same Redis; client CPU per decision, and the
  commands Redis received per decision;
- the load: a process's first load (its first decision waits for it) with 0, 1,000 and 100,000
  blocks; and with 100,000 in place, a change read and indexed again by the builder thread, with
  the decisions made on another thread meanwhile against as many made while nothing is built.

The table goes to docs/benchmarks/blocks.md (not with --quick).
"""

import argparse
import datetime
import gc
import ipaddress
import platform
import random
import statistics
import sys
import time
from pathlib import Path

from .run import bench_site, publish

HERE = Path(__file__).resolve().parent
RESULTS_MD = HERE.parent / "docs" / "benchmarks" / "blocks.md"
RESULTS_JSON = HERE / "results-blocks.json"

SIZES = (1_000, 10_000, 100_000)
TARGET_LOOKUP_US = 5.0
ACTION = "bench-blocks"


# Decisions are timed from addresses of this range, which no random block holds.
CLEAR = ipaddress.ip_network("192.0.2.0/24")


def random_rows(count, seed):
    """`count` blocks as BlockSet rows: random ranges (two in three IPv4; nested and apart), every
    severity, a third of them for some actions only; none holds CLEAR."""
    from decimal import Decimal

    rng = random.Random(seed)
    rows = []
    while len(rows) < count:
        if len(rows) % 3:
            prefix = rng.choice((16, 20, 24, 24, 24, 28, 32, 32, 32))
            value = rng.getrandbits(32) >> (32 - prefix) << (32 - prefix)
            network = ipaddress.IPv4Network((value, prefix))
            if network.overlaps(CLEAR):
                continue
        else:
            prefix = rng.choice((32, 48, 56, 64, 64, 128))
            value = (0x2001 << 112 | rng.getrandbits(112)) >> (128 - prefix) << (128 - prefix)
            network = ipaddress.IPv6Network((value, prefix))
        pk = len(rows) + 1
        severity = ("refuse", "shadow", "tighten", "loosen")[pk % 4]
        multiplier = {"tighten": Decimal("0.5"), "loosen": Decimal("2")}.get(severity)
        rows.append((pk, str(network), None, "" if pk % 3 else "post,reply", severity, multiplier, None, None))
    return rows


def random_blocks(count, seed):
    """random_rows() as unsaved Block rows, for the database."""
    from throttling.models import Block

    return [
        Block(network=network, actions=actions, severity=severity, multiplier=multiplier, reason="bench")
        for _pk, network, _u, actions, severity, multiplier, _e, _f in random_rows(count, seed)
    ]


def probes(rows, seed, n=2000):
    """(version, number) of addresses: half inside a block's range, half anywhere."""
    rng = random.Random(seed + 1)
    out = []
    for i in range(n):
        if i % 2:
            network = ipaddress.ip_network(rng.choice(rows)[1])
            number = int(network.network_address) + rng.randrange(network.num_addresses)
            out.append((network.version, number))
        elif i % 4:
            out.append((4, rng.getrandbits(32)))
        else:
            out.append((6, 0x2001 << 112 | rng.getrandbits(112)))
    return out


def time_per_call(call, args, rounds):
    """(median, slowest) ns per call over `rounds` passes through `args`."""
    per_round = []
    clock = time.perf_counter_ns
    for _ in range(rounds):
        start = clock()
        for a in args:
            call(*a)
        per_round.append((clock() - start) / len(args))
    return statistics.median(per_round), max(per_round)


def lookups(rounds):
    from throttling.engine.countermeasures.block_lookup import BlockSet

    out = {}
    now = time.time()
    for size in SIZES:
        rows = random_rows(size, size)
        build, paused = [], []
        for _ in range(3):
            gc.collect()
            started = time.perf_counter()
            indexed = BlockSet(rows)  # as load_blocks() builds it: the collector running
            build.append(time.perf_counter() - started)
            del indexed
            gc.collect()
            gc.disable()  # what pausing the collector would save, for the comparison only
            started = time.perf_counter()
            indexed = BlockSet(rows)
            paused.append(time.perf_counter() - started)
            gc.enable()
        found = probes(rows, size)
        hits = sum(1 for p in found if indexed.find("post", p, None, now) is not None)
        median, slowest = time_per_call(indexed.find, [("post", p, None, now) for p in found], rounds)
        out[size] = {
            "median_us": median / 1000,
            "slowest_round_us": slowest / 1000,
            "found": hits,
            "probes": len(found),
            "index_s": statistics.median(build),
            "index_paused_s": statistics.median(paused),
        }
        print(size, out[size], flush=True)
    return out


def address_read(rounds):
    """ns to read a request's client address as (version, int), cached and not."""
    from django.test import RequestFactory

    from throttling.engine import identity

    factory = RequestFactory()
    requests = [(factory.post("/", REMOTE_ADDR=f"198.51.{i // 256}.{i % 256}"),) for i in range(2000)]
    cached, _ = time_per_call(identity.client_number, requests, rounds)
    identity._short_number.cache_clear()
    started = time.perf_counter_ns()
    for (request,) in requests:
        identity.client_number(request)
    cold = (time.perf_counter_ns() - started) / len(requests)
    return {"cached_us": cached / 1000, "first_us": cold / 1000}


def decisions(server, rounds, batch):
    """check() under each state, interleaved: median µs, client CPU µs, commands sent per decision."""
    import redis
    from django.contrib.auth.models import AnonymousUser
    from django.test import RequestFactory

    import throttling
    from throttling.engine.countermeasures.in_force import measures
    from throttling.models import ActionPolicy, Block, Surge

    ActionPolicy.objects.create(action=ACTION, period=60, max_count=1_000_000, algorithm="token_bucket")
    factory = RequestFactory()
    requests = []
    for i in range(batch * 4):
        request = factory.post("/", REMOTE_ADDR=str(CLEAR[i % 250 + 1]))  # in no block's range
        request.user = AnonymousUser()
        requests.append(request)
    client = redis.Redis.from_url(server.url)

    def loaded(name):
        """(blocks, surges, active) of a process that loaded this state from the database."""
        Block.objects.all().delete()
        Surge.objects.all().delete()
        if name.startswith("blocks"):
            count = int(name.split("-")[1])
            Block.objects.bulk_create(random_blocks(count, count), batch_size=5000)
        elif name == "surge":
            throttling.start_surge(0.5, 60, "bench")
        measures.forget()  # as a process starting: its first decision loads what is in the database
        throttling.check(requests[0], ACTION)  # loaded now, not in the timing
        return measures.blocks, measures.surges, measures.active

    states = {}

    def state(name):
        # Loaded once each, then put back in turn: the rounds interleave the states, not the loads.
        if name not in states:
            states[name] = loaded(name)
        measures.blocks, measures.surges, measures.active = states[name]

    names = ["none", "blocks-1000", "blocks-100000", "surge"]
    samples = {n: [] for n in names}
    cpu = dict.fromkeys(names, 0)
    calls = dict.fromkeys(names, 0)
    count = dict.fromkeys(names, 0)
    rng = random.Random(3)
    for name in names:
        state(name)  # each state loaded before any timing
    measures.settle(60)  # no read of the blocks under way in the builder thread while decisions are timed
    for _ in range(rounds):
        order = names[:]
        rng.shuffle(order)
        for name in order:
            state(name)
            chosen = rng.sample(requests, batch)
            before = client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
            cpu_start = time.thread_time_ns()
            for request in chosen:
                start = time.perf_counter_ns()
                throttling.check(request, ACTION)
                samples[name].append(time.perf_counter_ns() - start)
            cpu[name] += time.thread_time_ns() - cpu_start
            calls[name] += client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0) - before
            count[name] += batch
    # The question a decision asks (engine.measures.applied), alone, in this process.
    from throttling.engine.policies.cache import policies

    policy = policies.get(ACTION)
    hook = {}
    for name in names:
        state(name)
        if not measures.active:
            hook[name] = 0.0
            continue
        args = [(policy, request, None, "ip:x", 1, True) for request in requests]
        hook[name] = time_per_call(measures.applied, args, 20)[0] / 1000
    out = {}
    base = statistics.median(samples["none"])
    for name in names:
        median = statistics.median(samples[name])
        out[name] = {
            "hook_us": hook[name],
            "median_us": median / 1000,
            "vs_none": median / base,
            "cpu_us": cpu[name] / count[name] / 1000,
            "evalsha_per_decision": calls[name] / count[name],
            "n": count[name],
        }
        print(name, out[name], flush=True)
    Block.objects.all().delete()
    Surge.objects.all().delete()
    return out


def load_time(rounds=3):
    """A process's first load (0, 1,000 and 100,000 blocks), and with 100,000 in place a change read and
    indexed again by the builder thread while this thread decides."""
    import throttling
    from throttling.engine.countermeasures.block_lookup import fingerprint
    from throttling.engine.countermeasures.in_force import measures
    from throttling.engine.policies.cache import policies
    from throttling.models import ActionPolicy, Block

    ActionPolicy.objects.get_or_create(action=ACTION, defaults={"period": 60, "max_count": 1_000_000})
    out = {"first": {}}
    for size in (0, 1_000, 100_000):
        Block.objects.all().delete()
        Block.objects.bulk_create(random_blocks(size, 11), batch_size=5000)
        times = []
        for _ in range(rounds):
            measures.forget()
            policies.clear()
            started = time.perf_counter()
            policies.get(ACTION)  # what a process's first decision loads before it asks Redis
            times.append(time.perf_counter() - started)
        assert measures.blocks.count == size
        out["first"][size] = statistics.median(times)
        print("first load", size, out["first"][size], flush=True)
    checks = []
    for _ in range(rounds):
        started = time.perf_counter()
        fingerprint()
        checks.append(time.perf_counter() - started)
    out["fingerprint_ms"] = statistics.median(checks) * 1000
    out["blocks"] = measures.blocks.count

    from django.contrib.auth.models import AnonymousUser
    from django.test import RequestFactory

    factory = RequestFactory()
    requests = []
    for i in range(250):
        request = factory.post("/", REMOTE_ADDR=str(CLEAR[i + 1]))
        request.user = AnonymousUser()
        requests.append(request)
    throttling.check(requests[0], ACTION)
    rebuilds, during, idle = [], [], []
    clock = time.perf_counter_ns
    for n in range(rounds):
        # First a second of decisions with nothing being built, then as long with a build: the same
        # noise on the machine falls on both.
        until = time.perf_counter() + 1.0
        while time.perf_counter() < until:
            begun = clock()
            throttling.check(requests[len(idle) % len(requests)], ACTION)
            idle.append(clock() - begun)
        index = measures.blocks
        started = time.perf_counter()
        # A moderator's save in this process: committed at once, the builder thread is asked.
        Block.objects.create(network=f"198.51.100.{n}/32", reason="bench")
        decided = 0
        while not measures.settle(0):
            begun = clock()
            throttling.check(requests[decided % len(requests)], ACTION)
            during.append(clock() - begun)
            decided += 1
        rebuilds.append(time.perf_counter() - started)
        assert measures.blocks is not index, "the builder did not index the change"
        print("rebuild", rebuilds[-1], "decisions meanwhile", decided, flush=True)
    Block.objects.all().delete()
    measures.forget()

    def spread(samples):
        ordered = sorted(samples)
        return {
            "n": len(ordered),
            "median_us": statistics.median(ordered) / 1000,
            "p99_us": ordered[int(len(ordered) * 0.99)] / 1000,
            "max_us": ordered[-1] / 1000,
        }

    out["rebuild_s"] = statistics.median(rebuilds)
    out["during"], out["idle"] = spread(during), spread(idle)
    return out


def _hook_cell(row):
    return f"{row['hook_us']:.2f}" if row["hook_us"] else "not called"


def render(results):
    lookups_, decided, address, load = results["lookups"], results["decisions"], results["address"], results["load"]
    rows = "\n".join(
        f"| {size:,} | {r['median_us']:.2f} | {r['slowest_round_us']:.2f} | {r['found']:,} of {r['probes']:,} "
        f"| {r['index_s'] * 1000:.0f} | {r['index_paused_s'] * 1000:.0f} |"
        for size, r in lookups_.items()
    )
    first_rows = "\n".join(f"| {size:,} | {seconds * 1000:.0f} |" for size, seconds in load["first"].items())
    during, idle = load["during"], load["idle"]
    labels = {
        "none": "no block, no surge (the decision as before)",
        "blocks-1000": "1,000 blocks in place",
        "blocks-100000": "100,000 blocks in place",
        "surge": "a surge on (every limit × 0.5)",
    }
    decision_rows = "\n".join(
        f"| {labels[name]} | {r['median_us']:.1f} | {r['vs_none']:.2f}× | {r['cpu_us']:.1f} | {_hook_cell(r)} "
        f"| {r['evalsha_per_decision']:.2f} |"
        for name, r in decided.items()
    )
    worst = max(r["median_us"] for r in lookups_.values())
    largest = lookups_[SIZES[-1]]
    return f"""# Blocks benchmark

*Written by `make bench` (`python -m bench.blocks`): this page is generated, never edited by hand.*

{results["date"]} · Python {results["python"]} · {results["machine"]}; its own redis-server and a
throwaway SQLite database ({results["elapsed_s"]} s in all).

How a request's block is found among the blocks in force (see
[Raids › How a block is found](../raids.md#how-a-block-is-found)): ranges flattened into disjoint
integer segments, IPv4 and IPv6 apart, one bisect per index (every action's, and the action's own),
the member's blocks from a dict, and each block's end checked at decision time. Random ranges
(/12 to /32, /32 to /128; nested and apart), every severity, a third of them for some actions only;
2,000 addresses, half inside a range, half anywhere.

| Ranges in force | µs per lookup (median of {results["rounds"]} rounds) | slowest round, µs per lookup | addresses with a block | building the index (ms) | the same, collector paused (ms) |
|--:|--:|--:|--:|--:|--:|
{rows}

Target: a lookup among 100,000 ranges ≤ {TARGET_LOOKUP_US:g} µs: **{largest["median_us"]:.2f} µs**
({"met" if worst <= TARGET_LOOKUP_US else "**not met**"}). Reading the client address from a request
(the `NUM_PROXIES` rule, parsed once per address and remembered): {address["cached_us"]:.2f} µs,
{address["first_us"]:.2f} µs for an address not seen before.

## What blocks and surges add to a decision

`throttling.check(request, action)` (token bucket, admitted, from addresses in no range), in
{results["decision_rounds"]} interleaved rounds of {results["batch"]} decisions per state, on one Redis
on loopback. Commands are `INFO commandstats`' EVALSHA calls over the decisions.

| State | Median µs | vs no block | Client CPU µs per decision | the hook alone, µs | EVALSHA per decision |
|---|--:|--:|--:|--:|--:|
{decision_rows}

With no block, surge or trigger in the database a decision does not call into blocks at all (one
attribute read). With blocks in place a decision still sends one command and reads no SQL; a refusal
by a block sends none.

## Loading

**A process's first load**, which its first decision waits for (with no index in place nothing could
refuse a blocked address; see
[Raids › While blocks are indexed again](../raids.md#while-blocks-are-indexed-again)): the policies,
surges and triggers, the blocks' fingerprint, the blocks read and indexed (median of 3).

| Blocks in the table | First load (ms) |
|--:|--:|
{first_rows}

**A change with {load["blocks"]:,} blocks in place** (one block saved in this process, committed):
read and indexed again by the builder thread, from the save to the new index in force,
**{load["rebuild_s"]:.2f} s** (median of 3). This thread kept deciding meanwhile, with the index in
place; none of its decisions waited for the build. The builder shares the interpreter with them (the
GIL), so they are slower while it runs, not stopped: one that waits for the interpreter waits up to
Python's switch interval (5 ms), or for the end of a step Python makes in one go (a sort of the
ranges, a full collection). Each round decides for a second with nothing being built, then while
the builder works:

| `throttling.check()` on another thread | Decisions | Median µs | p99 µs | Slowest µs |
|---|--:|--:|--:|--:|
| while the builder reads and indexes {load["blocks"]:,} blocks | {during["n"]:,} | {during["median_us"]:.1f} | {during["p99_us"]:.1f} | {during["max_us"]:,.0f} |
| nothing being built | {idle["n"]:,} | {idle["median_us"]:.1f} | {idle["p99_us"]:.1f} | {idle["max_us"]:,.0f} |

The index is built with the cyclic collector running: the blocks are plain tuples and the range
tables hold their positions, none of which the collector keeps tracking, so pausing it would save
only the difference in the first table's last two columns, at the price of every other thread's
garbage waiting for the build too (pausing it is process-wide). The periodic check every `THROTTLING_POLICY_MAX_AGE` seconds
and a change of surges read one aggregate of the blocks in the builder thread
({load["fingerprint_ms"]:.1f} ms here) and keep the index when they have not changed.
"""


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.blocks", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="a smaller run (does not rewrite docs/benchmarks/blocks.md)"
    )
    options = parser.parse_args(argv)
    rounds = 20 if options.quick else 100
    decision_rounds, batch = (4, 100) if options.quick else (40, 100)
    started = time.monotonic()
    with bench_site("throttling-blocks-") as (server, _):
        import django

        results = {
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "python": platform.python_version(),
            "django": django.get_version(),
            "machine": f"{platform.system()} {platform.machine()}",
            "rounds": rounds,
            "decision_rounds": decision_rounds,
            "batch": batch,
        }
        results["lookups"] = lookups(rounds)
        results["address"] = address_read(rounds)
        results["decisions"] = decisions(server, decision_rounds, batch)
        results["load"] = load_time()
        results["elapsed_s"] = round(time.monotonic() - started, 1)
    publish(render(results), results, options.quick, RESULTS_MD, RESULTS_JSON)
    return 0


if __name__ == "__main__":
    sys.exit(main())
