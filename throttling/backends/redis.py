"""Redis access: the throttle's bounded-timeout client, the registered Lua scripts, error mapping."""

import logging
import threading
from contextlib import contextmanager
from importlib.resources import files

from django.core.cache import caches
from django.core.signals import setting_changed
from django.dispatch import receiver
from redis import Redis
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, RedisError, ResponseError
from redis.retry import Retry

from ..conf import settings
from ..exceptions import BackendError, ImproperlyConfiguredBackend

logger = logging.getLogger("throttling")

_LUA = files("throttling.backends") / "lua"


def _script_source(name):
    return (_LUA / f"{name}.lua").read_text(encoding="utf-8")


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


class RedisBackend:
    """One per process and alias; thread-safe (redis-py pools are)."""

    def __init__(self, alias):
        self.alias = alias
        self.client = _bounded_client(alias)
        self.sliding_log = self.client.register_script(_script_source("sliding_log"))
        self.mirror_script = self.client.register_script(_script_source("mirror_penalties"))
        self.close_run_script = self.client.register_script(_script_source("close_run"))

    def decide(self, keys, args):
        """Run the sliding-log script: one EVALSHA; after NOSCRIPT (a restart,
        SCRIPT FLUSH, failover) load it and run it once more. NOSCRIPT means the
        script did not run, so the retry cannot count twice."""
        script = self.sliding_log
        with _as_backend_error():
            try:
                return self._evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:
                script.sha = self.client.script_load(script.script)
                return self._evalsha(script.sha, len(keys), *keys, *args)

    def _evalsha(self, *args):
        """EVALSHA on a pooled connection, without the client's per-command layers.

        Redis.execute_command adds retry closures, OpenTelemetry-style
        recording and response callbacks, none of which this call uses (no
        retries by design, a raw reply), at a cost comparable to the script's own
        run time on loopback. Errors are handled as the client does: a reply
        error leaves the connection usable, anything else drops it.
        """
        pool = self.client.connection_pool
        conn = pool.get_connection()
        try:
            conn.send_command("EVALSHA", *args)
            return conn.read_response()
        except ResponseError:
            raise
        except BaseException:
            conn.disconnect()
            raise
        finally:
            pool.release(conn)

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
        _backend = None
