"""The HTTP run: gunicorn serving DRF endpoints with no throttle, ActionThrottle and ScopedRateThrottle.

`wrk` drives one endpoint at a time at fixed concurrency; endpoints take turns in
shuffled order every round; each request names one of the benchmark's members in
a header (so every throttle sees the traffic of many members, as in production).
Worker CPU per request is read from /proc (utime + stime of the gunicorn workers)
around each round, so it is the server's cost alone, not the load tool's.
"""

import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from demo_site.redis_server import free_port

HERE = Path(__file__).resolve().parent
TICKS = os.sysconf("SC_CLK_TCK")

ENDPOINTS = {
    "none": "no throttle (the endpoint alone)",
    "action": "`ActionThrottle` (sliding log)",
    "scoped": "DRF `ScopedRateThrottle`",
}

WRK_SCRIPT = """
counter = 0
request = function()
  counter = counter + 1
  local member = (counter * 7919) %% %(members)d + 1
  return wrk.format("POST", nil, {["X-Bench-Member"] = tostring(member), ["Content-Type"] = "application/json"}, "{}")
end
"""


def _children(pid):
    try:
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        return []
    return [int(p) for p in out.stdout.split()]


def _cpu_seconds(pids):
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / TICKS


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def _ms(text):
    match = re.match(r"([\d.]+)(us|ms|s)", text)
    return float(match.group(1)) * _UNITS[match.group(2)]


def parse_wrk(output):
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))
    requests = int(re.search(r"(\d+) requests in", output).group(1))
    p50 = _ms(re.search(r"^\s+50%\s+(\S+)", output, re.M).group(1))
    p99 = _ms(re.search(r"^\s+99%\s+(\S+)", output, re.M).group(1))
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", output)
    errors = re.search(r"Socket errors:.*", output)
    return {
        "rps": rps,
        "requests": requests,
        "p50_ms": p50,
        "p99_ms": p99,
        "non_2xx": int(bad.group(1)) if bad else 0,
        "socket_errors": errors.group(0) if errors else "",
    }


def run_http(env, members, *, rounds=3, duration=4, connections=4, workers=2, seed=0):
    """Start gunicorn on bench.wsgi with `env` (settings, Redis URL, database), drive it, stop it."""
    wrk = shutil.which("wrk")
    if not wrk:
        print("HTTP run skipped: `wrk` is not installed (apt-get install wrk)", file=sys.stderr)
        return None
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="throttling-bench-http-")
    script = Path(workdir) / "members.lua"
    script.write_text(WRK_SCRIPT % {"members": members})
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "bench.wsgi:application",
            "--workers",
            str(workers),
            "--worker-class",
            "sync",
            "--bind",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
            "--timeout",
            "60",
        ],
        cwd=HERE.parent,
        env=dict(os.environ, **env),
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_http(base + "/http/none/", proc)
        worker_pids = _children(proc.pid)
        # Warm every worker: imports, connections, policy cache.
        for name in ENDPOINTS:
            subprocess.run(
                [wrk, "-t1", f"-c{connections}", "-d1s", "-s", str(script), f"{base}/http/{name}/"],
                capture_output=True,
                check=True,
            )
        rng = random.Random(seed)
        per = {name: [] for name in ENDPOINTS}
        cpu = dict.fromkeys(ENDPOINTS, 0.0)
        for _ in range(rounds):
            order = list(ENDPOINTS)
            rng.shuffle(order)
            for name in order:
                before = _cpu_seconds(worker_pids)
                out = subprocess.run(
                    [
                        wrk,
                        "-t1",
                        f"-c{connections}",
                        f"-d{duration}s",
                        "--latency",
                        "-s",
                        str(script),
                        f"{base}/http/{name}/",
                    ],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                cpu[name] += _cpu_seconds(worker_pids) - before
                per[name].append(parse_wrk(out))
        if sorted(_children(proc.pid)) != sorted(worker_pids):
            print("warning: gunicorn replaced a worker during the HTTP run", file=sys.stderr)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(workdir, ignore_errors=True)

    endpoints = {}
    for name, label in ENDPOINTS.items():
        runs = per[name]
        requests = sum(r["requests"] for r in runs)
        endpoints[name] = {
            "label": label,
            "rps": statistics.median(r["rps"] for r in runs),
            "p50_ms": statistics.median(r["p50_ms"] for r in runs),
            "p99_ms": statistics.median(r["p99_ms"] for r in runs),
            "cpu_us": cpu[name] / requests * 1e6,
            "requests": requests,
            "non_2xx": sum(r["non_2xx"] for r in runs),
        }
    bare = endpoints["none"]["cpu_us"]
    for name in ("action", "scoped"):
        endpoints[name]["added_cpu_us"] = endpoints[name]["cpu_us"] - bare
    action, scoped = endpoints["action"]["added_cpu_us"], endpoints["scoped"]["added_cpu_us"]
    return {
        "workers": workers,
        "connections": connections,
        "duration": duration,
        "rounds": rounds,
        "endpoints": endpoints,
        "added_cpu_ratio": action / scoped if scoped > 0 else None,
    }


def _wait_http(url, proc, timeout=30):
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {proc.returncode}")
        try:
            urllib.request.urlopen(urllib.request.Request(url, data=b"{}", headers={"X-Bench-Member": "1"}), timeout=2)
            return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("gunicorn did not answer within 30 s")
