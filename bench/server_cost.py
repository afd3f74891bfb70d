"""What a decision costs inside Redis, and what it keeps there.

Every figure here comes from the command `throttling.check` really sends
(captured with MONITOR, see capture.py), replayed on a held raw socket and
re-targeted at synthetic members, so it follows the scripts as they change:

- server µs per call: `INFO commandstats` (usec_per_call of EVALSHA) after a
  `CONFIG RESETSTAT`, and Redis's own CPU (`INFO cpu`) per decision;
- decisions/s of one Redis core: calls divided by the Redis process's CPU
  seconds while it served a pipelined stream (one core is all a Redis
  main thread ever uses), beside the wall-clock rate this client reached;
- memory: `MEMORY USAGE ... SAMPLES 0` summed over every key of one
  (member, action).
"""

import re
import secrets
import statistics
import time
from dataclasses import dataclass, field

from .capture import capture, per_call_positions
from .resp import RawConnection, encode

_TAG = re.compile(rb"\{[^}]*\}")
_SCRIPT_CALLS = {b"EVALSHA", b"EVAL", b"EVALSHA_RO", b"FCALL"}


class Template:
    """The command `call()` sends, re-targetable at synthetic members, with fresh per-call tokens."""

    def __init__(self, url, call):
        call()  # connection, policy cache and script cache warm: no NOSCRIPT in the capture
        first, second = (self._script_call(capture(url, call)) for _ in range(2))
        self.args = first
        self.per_call = per_call_positions(first, second)
        tags = {m for arg in first[2:] for m in _TAG.findall(arg)}
        if len(tags) != 1:
            raise RuntimeError(f"expected one hash tag in the decision's keys, found {tags}")
        self.tag = tags.pop()
        self.prefix = secrets.token_hex(3).encode()
        self.counter = 0

    @staticmethod
    def _script_call(commands):
        scripts = [c for c in commands if c[0].upper() in _SCRIPT_CALLS]
        if len(scripts) != 1:
            raise RuntimeError(f"expected one script call per decision, saw {commands}")
        return scripts[0]

    def member_tag(self, member):
        return self.tag[:-1] + b"~%d}" % member

    def args_for(self, member=None):
        args = list(self.args)
        if member is not None:
            new = self.member_tag(member)
            args = [arg.replace(self.tag, new) for arg in args]
        for i in self.per_call:
            self.counter += 1
            args[i] = self.prefix + b"%x" % self.counter
        return args

    def command(self, member=None):
        return encode(self.args_for(member))


@dataclass
class Scenario:
    name: str
    algorithm: str
    windows: list  # [(period, max_count), ...]
    prefill: int = 0  # decisions per member before the measured stream
    members: int = 1000
    calls: int = 10000
    outcome: str = "admitted"
    target: str | None = None  # counted per (member, target): check(..., target=target)
    fresh: bool = False  # every call of every stream by a member never seen before (its first decision)
    result: dict = field(default_factory=dict)


def _info(conn, section):
    raw = conn.call(encode(["INFO", section])).decode()
    return dict(line.split(":", 1) for line in raw.splitlines() if ":" in line and not line.startswith("#"))


def _redis_cpu(conn):
    info = _info(conn, "cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def _evalsha_stats(conn):
    info = _info(conn, "commandstats")
    for name in ("cmdstat_evalsha", "cmdstat_eval"):
        if name in info:
            return dict(part.split("=") for part in info[name].split(","))
    return {"calls": "0", "usec": "0", "usec_per_call": "0"}


def prepare(url, template, scenario, expect_reply):
    """Fill the scenario's members (the log entries or bucket levels it starts from) and
    check, on one untouched and one filled member, that it decides as intended."""
    conn = RawConnection.from_url(url)
    try:
        if scenario.prefill:
            members = range(scenario.members)
            conn.pipeline([template.command(m) for m in members for _ in range(scenario.prefill)])
        probe = conn.call(template.command(scenario.members))
        sample = conn.call(template.command(0))
    finally:
        conn.close()
    scenario.result = {
        "calls": scenario.calls,
        "errors": 0,
        "runs": [],
        "as_expected": bool(expect_reply(sample)),
        "fresh_member_admitted": bool(probe and probe[0] == 1),
    }


def stream(url, template, scenario):
    """One pipelined stream of scenario.calls decisions spread over scenario.members."""
    conn = RawConnection.from_url(url)
    try:
        if scenario.fresh:
            # Past the members prepare() decided for; each stream goes on where the last one stopped.
            first = scenario.result.setdefault("next_member", scenario.members + 1)
            scenario.result["next_member"] = first + scenario.calls
            commands = [template.command(first + i) for i in range(scenario.calls)]
        else:
            commands = [template.command(i % scenario.members) for i in range(scenario.calls)]
        conn.call(encode(["CONFIG", "RESETSTAT"]))
        cpu_before = _redis_cpu(conn)
        started = time.perf_counter()
        scenario.result["errors"] += conn.pipeline(commands)
        wall = time.perf_counter() - started
        cpu = _redis_cpu(conn) - cpu_before
        stats = _evalsha_stats(conn)
    finally:
        conn.close()
    calls = int(stats["calls"])
    scenario.result["runs"].append((float(stats["usec_per_call"]), cpu * 1e6 / max(calls, 1), calls / wall))


def summarise(scenario):
    """Medians over the scenario's streams (they were interleaved with every other scenario's)."""
    result, runs = scenario.result, scenario.result["runs"]
    cpu_us = statistics.median(r[1] for r in runs)
    result.update(
        repeats=len(runs),
        usec_per_call=statistics.median(r[0] for r in runs),
        usec_per_call_runs=[r[0] for r in runs],
        redis_cpu_us_per_call=cpu_us,
        per_core_per_s=1e6 / cpu_us if cpu_us else float("nan"),
        pipelined_wall_per_s=statistics.median(r[2] for r in runs),
    )
    result["as_expected"] = result["as_expected"] and result["errors"] == 0
    return result


def reference_template(url, script, args):
    """A Template for a script the app does not send (the reference rows), called with `args`
    where b"{tag}" marks the member's hash tag and b"{token}" a per-call token."""
    conn = RawConnection.from_url(url)
    sha = conn.call(encode(["SCRIPT", "LOAD", script]))
    conn.close()
    template = Template.__new__(Template)
    template.args = [b"EVALSHA", sha, *args]
    template.per_call = [i for i, a in enumerate(template.args) if a == b"{token}"]
    template.tag = b"{ref}"
    template.args = [a.replace(b"{tag}", template.tag) for a in template.args]
    template.prefix = secrets.token_hex(3).encode()
    template.counter = 0
    return template


def memory_of_member(url, template, member):
    """MEMORY USAGE summed over every key carrying the synthetic member's hash tag."""
    conn = RawConnection.from_url(url)
    try:
        pattern = b"*" + template.member_tag(member).replace(b"[", b"\\[") + b"*"
        keys, cursor = [], b"0"
        while True:
            cursor, batch = conn.call(encode(["SCAN", cursor, "MATCH", pattern, "COUNT", 1000]))
            keys += batch
            if cursor == b"0":
                break
        total = sum(conn.call(encode(["MEMORY", "USAGE", key, "SAMPLES", 0])) or 0 for key in keys)
        return total, len(keys)
    finally:
        conn.close()
