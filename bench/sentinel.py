"""Sentinel failover measured: seconds of failed decisions and admissions lost, with and without min-replicas-to-write.

    python -m bench.sentinel [--faults kill stall failover] [--runs N]

A master, one replica and one sentinel (tests.support.processes.topology.SentinelGroup:
down-after 1 s, failover-timeout 5 s), once without `min-replicas-to-write` and
once with `min-replicas-to-write 1` and `min-replicas-max-lag 10` on every
server; then with a second replica, min-replicas-to-write 1. One thread makes a
decision every few milliseconds (a log policy of 1,000 an hour, members in
rotation, so none is refused) while one fault is played:

* kill:     the master is killed (SIGKILL) and its supervisor starts it again,
            empty, 10 s later; the sentinel turns it into a replica.
* stall:    the master stops (SIGSTOP) for 5 s, then resumes as a master that
            the sentinel has replaced.
* failover: SENTINEL FAILOVER, the planned switch.

Reported per run: the seconds during which decisions failed (open, as
configured), how many did, and the admissions lost: decisions answered
"admitted" whose log entry is absent from the final master once everything has
settled (counts that never reached the surviving server). Prints a Markdown table.
"""

import argparse
import logging
import os
import signal
import tempfile
import threading
import time

import redis

from demo_site.redis_server import RedisServer
from tests.support.processes.topology import SentinelGroup, _wait

from .run import setup_django

ACTION = "bench-failover"
MEMBERS = 100
PAUSE = 0.005  # seconds between two decisions
BEFORE = 2.0  # seconds of traffic before the fault
KILL_DOWN = 10.0  # seconds the killed master stays down
STALL = 5.0  # seconds the stalled master stays stopped
SETTLE = 25.0  # seconds of traffic after the fault is over (the sentinel demotes an old master ~10 s late)
MIN_REPLICAS = ["--min-replicas-to-write", "1", "--min-replicas-max-lag", "10"]
# (replicas, min-replicas-to-write 1 on every server)
SETUPS = ((1, False), (1, True), (2, True))


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bench.sentinel", description=__doc__.split("\n")[0])
    parser.add_argument("--faults", nargs="+", default=["kill", "stall", "failover"])
    parser.add_argument("--runs", type=int, default=1, help="runs of each fault and configuration")
    return parser.parse_args(argv)


class Traffic(threading.Thread):
    """Decisions in a loop: [(end time, reason, who, log key, entries)]."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.seen = []

    def run(self):
        from django.db import connection

        import throttling

        i = 0
        try:
            while not self.stop.is_set():
                who = f"walker-{i % MEMBERS}"
                i += 1
                d = throttling.check(who, ACTION)
                self.seen.append((time.monotonic(), d.reason, who, d.log_key if d.entries else None, d.entries))
                time.sleep(PAUSE)
        finally:
            connection.close()


def _play(group, fault):
    if fault == "kill":
        old = group.server(group.master_port())
        old.kill()
        time.sleep(KILL_DOWN)
        old.start()  # empty (no persistence), a master until the sentinel demotes it
    elif fault == "stall":
        old = group.server(group.master_port())
        os.kill(old.pid, signal.SIGSTOP)
        try:
            time.sleep(STALL)
        finally:
            os.kill(old.pid, signal.SIGCONT)
    else:
        group.failover()


def _settled(group):
    """Wait until the sentinel's master takes writes and its replica is in sync."""
    port = group.master_port()
    master = redis.Redis(port=port)
    _wait(lambda: master.info("replication")["role"] == "master", 30, "the new master")
    other = group.replica if group.master.port == port else group.master
    _wait(
        lambda: redis.Redis(port=other.port).info("replication").get("master_link_status") == "up",
        30,
        "the old master to replicate the new one",
    )
    return master


def _second_replica(group, min_replicas):
    """Another replica of the master, known to the sentinel."""
    extra = RedisServer(extra_args=["--replicaof", "127.0.0.1", str(group.master.port)])
    if min_replicas:
        extra.extra_args += MIN_REPLICAS
    extra.start()

    def known():
        replicas = group._sentinel().execute_command("SENTINEL", "REPLICAS", group.service)
        return len(replicas) == 2 and group._replica_known()

    _wait(known, 30, "the sentinel to see the second replica")
    return extra


def measure(fault, min_replicas, replicas=1):
    from django.test.utils import override_settings

    import throttling.engine.decision
    import throttling.engine.policies.cache
    from throttling.models import ActionPolicy

    group = SentinelGroup(down_after_ms=1000, failover_timeout_ms=5000)
    if min_replicas:
        group.master.extra_args = list(MIN_REPLICAS)  # kept when the killed master is started again
    group.start()
    extra = _second_replica(group, min_replicas) if replicas == 2 else None
    try:
        if min_replicas:
            redis.Redis(port=group.replica.port).config_set("min-replicas-to-write", 1)
            redis.Redis(port=group.replica.port).config_set("min-replicas-max-lag", 10)
        with override_settings(THROTTLING_REDIS_URL=group.url):
            ActionPolicy.objects.update_or_create(action=ACTION, defaults={"period": 3600, "max_count": 1000})
            throttling.engine.policies.cache.invalidate_policies(broadcast=False)
            traffic = Traffic()
            traffic.start()
            time.sleep(BEFORE)
            started = time.monotonic()
            _play(group, fault)
            time.sleep(SETTLE)
            traffic.stop.set()
            traffic.join(10)
            master = _settled(group)
            time.sleep(1.0)  # in-doubt decisions settle on the next ones; none of these is in doubt now
        seen = traffic.seen
        failed = [(t, prev) for (t, reason, *_), (prev, *_) in zip(seen[1:], seen) if reason == "backend_failure"]
        failed_seconds = sum(t - prev for t, prev in failed)
        admitted = [(t, key, entries) for t, reason, _, key, entries in seen if reason == "admitted"]
        lost_at = [t for t, key, entries in admitted if master.zscore(key, entries[0]) is None]
        lost = len(lost_at)
        first = next((t for t, _ in failed), started)
        last = failed[-1][0] if failed else started
        assert throttling.engine.decision.THROTTLED not in {r for _, r, *_ in seen}
        return {
            "fault": fault,
            "replicas": replicas,
            "min_replicas": min_replicas,
            "decisions": len(seen),
            "failed": len(failed),
            "failed_seconds": failed_seconds,
            "failing_span": last - first,
            "admitted": len(admitted),
            "lost": lost,
            "lost_span": (lost_at[-1] - lost_at[0]) if lost_at else 0.0,
        }
    finally:
        if extra is not None:
            extra.stop()
        group.stop()


def main(argv=None):
    options = parse_args(argv)
    logging.getLogger("throttling").setLevel(logging.ERROR)
    setup_django("redis://127.0.0.1:1/0", tempfile.mkdtemp(prefix="throttling-bench-"))
    rows = []
    for fault in options.faults:
        for replicas, min_replicas in SETUPS:
            for _ in range(options.runs):
                row = measure(fault, min_replicas, replicas)
                rows.append(row)
                print(row, flush=True)
    print()
    print(
        "| fault | replicas | min-replicas-to-write | decisions | failed | seconds failing | admitted | admissions lost |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        lost = f"{r['lost']:,}" + (f" (over {r['lost_span']:.1f} s)" if r["lost"] else "")
        print(
            f"| {r['fault']} | {r['replicas']} | {'1' if r['min_replicas'] else 'off'} | {r['decisions']:,} | "
            f"{r['failed']:,} | {r['failed_seconds']:.1f} | {r['admitted']:,} | {lost} |"
        )


if __name__ == "__main__":
    main()
