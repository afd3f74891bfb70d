"""Redis access: the throttle's bounded-timeout client, the registered Lua scripts, error mapping."""

import logging
import os
import socket
import struct
import threading
import time
from contextlib import contextmanager
from importlib.resources import files

from django.core.cache import caches
from django.core.signals import setting_changed
from django.dispatch import receiver
from redis import Redis
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError, NoScriptError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from ..conf import settings
from ..keys import bulk
from ..exceptions import BackendError, BackendTimeout, ImproperlyConfiguredBackend

logger = logging.getLogger("throttling")

try:  # the `redis` extra brings hiredis; without it redis-py reads the replies
    from hiredis import Reader as _HiredisReader
except ImportError:  # pragma: no cover - exercised in a venv without the extra
    _HiredisReader = None

_LUA = files("throttling.backends") / "lua"


def _script_source(name):
    """A script's text, with the shared decision prelude spliced in where it says "-- @prelude"."""
    text = (_LUA / f"{name}.lua").read_text(encoding="utf-8")
    if "-- @prelude" in text:
        text = text.replace("-- @prelude", (_LUA / "_prelude.lua").read_text(encoding="utf-8"), 1)
    return text


# One decision script per algorithm (the values of ActionPolicy.algorithm).
DECISION_SCRIPTS = ("sliding_log", "token_bucket")


def _bounded_client(alias):
    """A client on the alias's server whose timeouts are ours, with no retries.

    django-redis pools have no timeouts unless CACHES says so, and redis-py
    retries three times with back-off by default; either would let a stalled
    Redis hold a request for seconds (DESIGN trap 8). We reuse the connection
    parameters of the alias and replace only the timing behaviour.
    """
    try:
        cache = caches[alias]
    except Exception as exc:  # InvalidCacheBackendError, import errors
        raise ImproperlyConfiguredBackend(
            f"THROTTLING_CACHE_ALIAS={alias!r} is not a configured cache: {exc}"
        ) from exc
    get_client = getattr(getattr(cache, "client", None), "get_client", None)
    if get_client is None:
        raise ImproperlyConfiguredBackend(
            f"THROTTLING_CACHE_ALIAS={alias!r} is not a django-redis cache "
            f"({type(cache).__module__}.{type(cache).__name__})."
        )
    base = get_client(True)
    pool = base.connection_pool
    kwargs = dict(pool.connection_kwargs)
    kwargs.update(
        socket_connect_timeout=settings.SOCKET_CONNECT_TIMEOUT,
        socket_timeout=settings.SOCKET_TIMEOUT,
        # A lost reply might belong to a script that already ran; retrying it
        # would count the request twice, so a failed call is simply a failure.
        retry=Retry(NoBackoff(), 0),
        retry_on_error=[],
        retry_on_timeout=False,
    )
    try:
        if hasattr(pool, "service_name"):  # Sentinel
            kwargs.pop("connection_class", None)
            new_pool = type(pool)(pool.service_name, pool.sentinel_manager, **kwargs)
        else:
            kwargs.pop("connection_class", None)
            new_pool = type(pool)(connection_class=pool.connection_class, **kwargs)
    except TypeError:
        logger.warning(
            "throttling: could not apply THROTTLING_SOCKET_*_TIMEOUT to the %r pool; "
            "using it as configured in CACHES",
            alias,
        )
        return base
    return Redis(connection_pool=new_pool)


# Seconds a held connection may sit idle before it is checked for EOF before use.
_IDLE_CHECK = 0.05
_getpid = os.getpid


def _kernel_timeouts(sock, seconds):
    """Move a socket's timeout into the kernel (SO_RCVTIMEO/SO_SNDTIMEO) and make it blocking.

    With a Python-level timeout every send and recv is preceded by a poll()
    syscall; with the kernel's, a recv that times out fails with EAGAIN instead,
    and the same bound holds for one syscall less each way. redis-py may put its
    own timeout back (its health checks do); the next call moves it again.
    """
    if seconds is None:
        return
    sec = int(seconds)
    usec = max(1, int(round((seconds - sec) * 1_000_000))) if seconds > sec else 0
    value = struct.pack("ll", sec, usec)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)
    sock.settimeout(None)


class _Held:
    """One thread's connection: redis-py connects it (AUTH, SELECT, TLS, timeouts), then
    commands go straight to its socket and replies come back through hiredis."""

    __slots__ = ("conn", "reader", "pid", "used_at")

    def __init__(self, pool):
        self.conn = pool.connection_class(**pool.connection_kwargs)
        self.reader = _HiredisReader(replyError=ResponseError) if _HiredisReader else None
        self.pid = _getpid()
        self.used_at = time.monotonic()

    def call(self, packed):
        conn = self.conn
        sock = conn._sock
        if sock is None:
            conn.connect()
            sock = conn._sock
        if sock.gettimeout() is not None:
            _kernel_timeouts(sock, conn.socket_timeout)
        reader = self.reader
        if reader is None:
            conn.send_packed_command(packed, check_health=False)
            return conn.read_response()
        try:
            sock.sendall(packed)
            reply = reader.gets()
            while reply is False:
                data = sock.recv(65536)
                if not data:
                    raise ConnectionError("Connection closed by server.")
                reader.feed(data)
                reply = reader.gets()
        except (TimeoutError, BlockingIOError) as exc:  # the kernel's timeout: EAGAIN
            raise RedisTimeoutError(f"Timeout reading from socket: {exc}") from exc
        except OSError as exc:
            raise ConnectionError(f"Error talking to Redis: {exc}") from exc
        if isinstance(reply, ResponseError):
            message = str(reply)
            raise NoScriptError(message) if message.startswith("NOSCRIPT") else reply
        return reply

    def stale(self):
        """True when the socket has something to read before a command was sent: EOF or junk."""
        if self.conn._sock is None:
            return False
        try:
            return self.conn.can_read(timeout=0)
        except (RedisError, OSError):
            return True

    def close(self):
        # Never close a parent's socket from a forked child: just let it go.
        if self.pid == _getpid():
            self.conn.disconnect()


class RedisBackend:
    """One per process and alias; thread-safe (each thread holds its own decision connection)."""

    def __init__(self, alias):
        self.alias = alias
        self.client = _bounded_client(alias)
        self.scripts = {name: self.client.register_script(_script_source(name)) for name in DECISION_SCRIPTS}
        self.sliding_log = self.scripts["sliding_log"]
        self.token_bucket = self.scripts["token_bucket"]
        self.mirror_script = self.client.register_script(_script_source("mirror_penalties"))
        self.close_run_script = self.client.register_script(_script_source("close_run"))
        self.forget_script = self.client.register_script(_script_source("forget"))
        self._local = threading.local()
        pool = self.client.connection_pool
        # A held connection needs a pool that builds plain connections; a
        # Sentinel pool's connections must ask the pool for the master.
        self._hold = not hasattr(pool, "service_name")

    def decide(self, algorithm, keys, args):
        """Run an algorithm's decision script with KEYS `keys` and ARGV `args` (see decide_packed)."""
        return self.decide_packed(algorithm, len(keys), b"".join(map(bulk, (*keys, *args))), len(keys) + len(args))

    def decide_packed(self, algorithm, nkeys, body, count):
        """Run an algorithm's decision script: one EVALSHA whose `count` KEYS and ARGV are
        already RESP in `body` (the first `nkeys` of them keys). After NOSCRIPT (a restart,
        SCRIPT FLUSH, failover) load it and run it once more: NOSCRIPT means the script
        did not run, so the retry cannot count twice."""
        script = self.scripts[algorithm]
        try:
            try:
                return self._evalsha(script.sha, nkeys, body, count)
            except NoScriptError:
                script.sha = self.client.script_load(script.script)
                return self._evalsha(script.sha, nkeys, body, count)
        except RedisError as exc:  # every Redis failure leaves as BackendError, never a 500
            error = BackendTimeout if isinstance(exc, RedisTimeoutError) else BackendError
            raise error(f"{type(exc).__name__}: {exc}") from exc

    def _evalsha(self, sha, nkeys, body, count):
        """EVALSHA on this thread's held connection, without the client's per-command layers.

        A pool check-out costs a poll() syscall and bookkeeping per command, and
        Redis.execute_command adds retry closures, metrics recording and
        response callbacks, none of which this call uses (no retries by design,
        a raw reply); on loopback they cost about as much as the round trip. So
        each thread keeps one connection (the pool's parameters and timeouts),
        opened on first use and again in a forked child, writes the command as
        RESP packed here and reads the reply with hiredis when installed. A
        reply error leaves the connection usable; anything else (a timeout, a
        reset) drops it, so a half-read reply is never read as the next one.
        """
        packed = b"*%d\r\n$7\r\nEVALSHA\r\n%s%s%s" % (count + 3, bulk(sha), bulk(nkeys), body)
        if not self._hold:
            return self._pooled_call(packed)
        local = self._local
        held = getattr(local, "held", None)
        now = time.monotonic()
        if held is None or held.pid != _getpid():
            held = local.held = _Held(self.client.connection_pool)
        elif now - held.used_at > _IDLE_CHECK and held.stale():
            # Idle long enough for Redis to have restarted or closed it: a
            # socket that already reads EOF is replaced before anything is sent
            # on it. A busy thread skips this syscall.
            held.close()
            held = local.held = _Held(self.client.connection_pool)
        try:
            reply = held.call(packed)
        except ResponseError:
            held.used_at = now
            raise
        except BaseException:
            local.held = None
            held.close()
            raise
        held.used_at = now
        return reply

    def _pooled_call(self, packed):
        pool = self.client.connection_pool
        conn = pool.get_connection()
        try:
            conn.send_packed_command(packed)
            return conn.read_response()
        except ResponseError:
            raise
        except BaseException:
            conn.disconnect()
            raise
        finally:
            pool.release(conn)

    def close(self):
        """Drop this thread's held connection (tests, settings changes)."""
        held = getattr(self._local, "held", None)
        self._local.held = None
        if held is not None:
            held.close()

    def mirror_penalties(self, mirrors):
        """Replace penalty mirrors: `mirrors` is [(key, expire_at_ms, {field: value}), ...].

        One pipeline of per-key atomic scripts (safe to repeat, so a retry after
        a lost reply is harmless).
        """
        script = self.mirror_script
        with _as_backend_error():
            for attempt in (1, 2):
                pipe = self.client.pipeline(transaction=False)
                for key, expire_at_ms, fields in mirrors:
                    args = [int(expire_at_ms)]
                    for name, value in fields.items():
                        args += [name, value]
                    pipe.evalsha(script.sha, 1, key, *args)
                try:
                    return pipe.execute()
                except NoScriptError:
                    if attempt == 2:
                        raise
                    script.sha = self.client.script_load(script.script)

    def close_run(self, offences_key, pending_key, run):
        """Delete an offence run's counter and pending mark if the mark is this run's (close_run.lua)."""
        with _as_backend_error():
            return self.close_run_script(keys=[offences_key, pending_key], args=[run], client=self.client)

    def forget(self, state_key, pending_key, kind, token, cost):
        """Undo what a timed-out decision may have written (forget.lua); returns [removed, mark]."""
        with _as_backend_error():
            return self.forget_script(keys=[state_key, pending_key], args=[kind, token, cost], client=self.client)

    def keep_unsent(self, unsent_key, failures_key, member, when):
        with _as_backend_error():
            pipe = self.client.pipeline(transaction=True)  # both keys share one hash tag
            pipe.zadd(unsent_key, {member: when})
            pipe.incr(failures_key)
            pipe.execute()

    def unsent(self, unsent_key):
        with _as_backend_error():
            return self.client.zrange(unsent_key, 0, -1)

    def forget_unsent(self, unsent_key, member):
        with _as_backend_error():
            self.client.zrem(unsent_key, member)

    def unsent_counts(self, unsent_key, failures_key):
        with _as_backend_error():
            pipe = self.client.pipeline(transaction=True)
            pipe.get(failures_key)
            pipe.zcard(unsent_key)
            failures, waiting = pipe.execute()
            return int(failures or 0), waiting

    def remove_members(self, key, members):
        with _as_backend_error():
            self.client.zrem(key, *members)

    def delete(self, *keys):
        with _as_backend_error():
            if keys:
                self.client.delete(*keys)

    def get(self, key):
        with _as_backend_error():
            return self.client.get(key)

    def incr(self, key):
        with _as_backend_error():
            return self.client.incr(key)

    def info(self, section):
        with _as_backend_error():
            return self.client.info(section)

    def set_nx(self, key, value, seconds):
        """SET key value NX EX seconds: True when this call set it."""
        with _as_backend_error():
            return bool(self.client.set(key, value, nx=True, ex=seconds))


@contextmanager
def _as_backend_error():
    """Every Redis failure leaves this module as BackendError, never as a 500."""
    try:
        yield
    except RedisError as exc:
        raise BackendError(f"{type(exc).__name__}: {exc}") from exc


_backend = None
_lock = threading.Lock()


def get_backend():
    """The process's backend, built on first use and again after a settings change."""
    global _backend
    backend = _backend
    if backend is None:
        with _lock:
            if _backend is None:
                _backend = RedisBackend(settings.CACHE_ALIAS)
            backend = _backend
    return backend


@receiver(setting_changed)
def _forget_clients(setting, **kwargs):
    global _backend
    if setting == "CACHES" or setting.startswith("THROTTLING_"):
        if _backend is not None:
            _backend.close()
        _backend = None
