"""`make demo`: a throwaway Redis, a migrated and seeded SQLite database, then
runserver, a Celery worker and Celery beat until Ctrl-C.

    python -m demo_site.run

Environment: DEMO_ADDR (default 127.0.0.1:8000), DEMO_DIR (default ./.demo),
DEMO_REDIS_URL (use that Redis and start none), DEMO_DEBUG (default on).
While it runs, the URL of the Redis it started is in DEMO_DIR/redis-url, where the
demo's settings find it: other manage.py commands use the same Redis.
"""

import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import DEMO_ADMIN, DEMO_MEMBERS, DEMO_PASSWORD
from .redis_server import RedisServer

BASE_DIR = Path(__file__).resolve().parent.parent
MANAGE = str(BASE_DIR / "manage.py")
DEFAULT_ADDR = "127.0.0.1:8000"
STOP_TIMEOUT = 10
READY_TIMEOUT = 60

_print_lock = threading.Lock()


def say(text=""):
    # The children's output is relayed by threads: one whole line at a time.
    with _print_lock:
        print(text, flush=True)


def manage(env, *args):
    subprocess.run([sys.executable, MANAGE, *args], env=env, cwd=BASE_DIR, check=True)


class Child:
    """A child process whose output is printed line by line behind its name.

    `ready` is set when the child prints `ready_text`, the line it prints once
    it serves (runserver), consumes (worker) or schedules (beat).
    """

    def __init__(self, name, env, args, ready_text):
        self.name = name
        self.ready_text = ready_text
        self.ready = threading.Event()
        # Its own session: the terminal's Ctrl-C reaches this script, which then
        # signals each child exactly once (a Celery worker that got two signals
        # would cut its warm shutdown short).
        self.process = subprocess.Popen(
            [sys.executable, *args],
            env=env,
            cwd=BASE_DIR,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        self._relay = threading.Thread(target=self._print_output, name=f"relay-{name}", daemon=True)
        self._relay.start()

    @property
    def pid(self):
        return self.process.pid

    def _print_output(self):
        try:
            for line in self.process.stdout:
                say(f"{self.name:<6} | {line.rstrip()}")
                if self.ready_text in line:
                    self.ready.set()
        except (OSError, ValueError):
            pass  # our own stdout is gone (closed terminal): nothing left to show

    def poll(self):
        return self.process.poll()

    def stop(self):
        process = self.process
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                say(f"{self.name} did not stop within {STOP_TIMEOUT} s; killing it")
                process.kill()
                process.wait()
        # Its last lines (the worker's "Warm shutdown") come before ours.
        self._relay.join(timeout=2)


def web_args(addr):
    # --noreload: one process per child to stop. --insecure: the admin keeps
    # its CSS when DEMO_DEBUG=0 (runserver serves static files only in DEBUG).
    return [MANAGE, "runserver", "--noreload", "--insecure", addr]


def worker_args():
    # One process: the demo may run on two cores, and its tasks are tiny.
    # -q drops the start-up banner; no gossip or mingle: a lone worker has no peers.
    return [
        "-m",
        "celery",
        "-q",
        "-A",
        "demo_site",
        "worker",
        "--loglevel=INFO",
        "--pool=solo",
        "--without-gossip",
        "--without-mingle",
        "-n",
        "demo@%h",
    ]


def beat_args(demo_dir):
    # The schedule file lives with the rest of the demo's state, never in the repository.
    return [
        "-m",
        "celery",
        "-q",
        "-A",
        "demo_site",
        "beat",
        "--loglevel=INFO",
        "-s",
        str(Path(demo_dir) / "celerybeat-schedule"),
    ]


def traffic_command(env):
    """How to play the spammer from another terminal, with the settings this demo uses."""
    python = Path(sys.executable)
    if python.is_relative_to(BASE_DIR):
        python = python.relative_to(BASE_DIR)
    prefix = [f"{name}={shlex.quote(env[name])}" for name in ("DEMO_DIR", "DEMO_ADDR") if env.get(name)]
    return " ".join([*prefix, shlex.quote(str(python)), "manage.py", "demo_traffic"])


def wait_until_ready(children, timeout=READY_TIMEOUT):
    """True once every child is ready; False when one exits first or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(child.poll() is not None for child in children):
            return False
        if all(child.ready.is_set() for child in children):
            return True
        time.sleep(0.1)
    return False


def port_in_use(addr):
    """True when something already listens on DEMO_ADDR's host and port."""
    host, _, port = addr.rpartition(":")
    with socket.socket(socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host.strip("[]") or "127.0.0.1", int(port)))
        except OSError:
            return True
    return False


def busy_port_message(addr):
    host, _, port = addr.rpartition(":")
    other = f"{host or '127.0.0.1'}:{int(port) + 1}"
    return (
        f"Something is already listening on {addr}. Pick another address with DEMO_ADDR, "
        f"for example:  DEMO_ADDR={other} make demo"
    )


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main():
    # Ctrl-C, `kill` and a closed terminal all end the same way: children stopped,
    # Redis gone. SIGINT is set explicitly because a shell that starts us in the
    # background (`make demo &` in a script) leaves it ignored.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)

    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "demo_site.settings")
    env["PYTHONUNBUFFERED"] = "1"
    addr = env.get("DEMO_ADDR", DEFAULT_ADDR)
    # Absolute, so the children (run from the repository) and the banner's
    # demo_traffic line name the same directory as the caller meant.
    demo_dir = Path(env.get("DEMO_DIR") or BASE_DIR / ".demo").resolve()
    if env.get("DEMO_DIR"):
        env["DEMO_DIR"] = str(demo_dir)
    if port_in_use(addr):
        say(busy_port_message(addr))
        return 1
    redis = None
    url_file = demo_dir / "redis-url"
    children = []  # stopped in reverse order
    try:
        if env.get("DEMO_REDIS_URL"):
            redis_line = f"{env['DEMO_REDIS_URL']} (from DEMO_REDIS_URL; not started or stopped here)"
        else:
            redis = RedisServer(own_session=True).start()
            env["DEMO_REDIS_URL"] = redis.url
            demo_dir.mkdir(parents=True, exist_ok=True)
            url_file.write_text(redis.url + "\n", encoding="utf-8")
            redis_line = f"{redis.url} (throwaway redis-server, pid {redis.pid}; stopped on exit)"
        say(f"Redis     {redis_line}")

        say("Database  migrating…")
        manage(env, "migrate", "--noinput", "--verbosity", "0")
        manage(env, "demo_seed", "--password", DEMO_PASSWORD)
        manage(env, "demo_history")

        # Stopped in reverse: beat first (nothing new gets scheduled), then the
        # worker (it finishes the task in hand), then the web server.
        children.append(Child("web", env, web_args(addr), "Quit the server with"))
        children.append(Child("worker", env, worker_args(), " ready."))
        children.append(Child("beat", env, beat_args(demo_dir), "beat: Starting"))
        # The banner waits for the children's start-up lines, so it stays last on screen.
        ready = wait_until_ready(children)
        for child in children:
            if child.poll() is not None:
                say(f"{child.name} exited with status {child.process.returncode}; stopping the demo")
                return child.process.returncode or 1

        url = f"http://{addr}/"
        _web, worker, beat = children
        say()
        say("=" * 72)
        say(f"  Demo community   {url}")
        say(f"  Admin            {url}admin/")
        say(f"  Penalties        {url}admin/throttling/penalty/")
        say(f"  Penalty report   {url}admin/throttling/penalty/report/")
        say(f"  Accounts         {DEMO_ADMIN} (staff, exempt from limits), {', '.join(DEMO_MEMBERS)}")
        say(f"  Password         {DEMO_PASSWORD}   (the same for all three)")
        say(f"  Celery worker    pid {worker.pid}: applies penalties, stores the offence history")
        say(f"  Celery beat      pid {beat.pid}: re-mirrors penalties to Redis every minute")
        say("  Play a spammer   in another terminal, in this directory:")
        say(f"                   {traffic_command(env)}")
        say("  Ctrl-C stops the server, the worker, beat and Redis.")
        if not ready:
            say(f"  (not every process reported ready within {READY_TIMEOUT} s; see the lines above)")
        say("=" * 72)
        say()

        while True:
            for child in children:
                if child.poll() is not None:
                    say(f"{child.name} exited with status {child.process.returncode}; stopping the demo")
                    return child.process.returncode or 1
            time.sleep(0.5)
    except KeyboardInterrupt:
        say("\nStopping the demo…")
        return 0
    except subprocess.CalledProcessError as exc:
        say(f"`manage.py {' '.join(exc.cmd[2:])}` failed with status {exc.returncode}")
        return exc.returncode or 1
    finally:
        # A second Ctrl-C must not cut the clean-up short and orphan Redis.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for child in reversed(children):
            child.stop()
        if redis is not None:
            redis.stop()
            url_file.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
