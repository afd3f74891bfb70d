"""Redis access: the throttle's bounded-timeout client, the registered Lua scripts, error mapping."""

import logging
import threading
import time

from django.core.signals import setting_changed
from django.dispatch import receiver
from redis._parsers.helpers import parse_info
from redis.exceptions import NoScriptError, RedisError, ResponseError

from ..conf import settings
from . import redis_urls, topology
from .connection import IDLE_CHECK, Held, NotSent, getpid
from .errors import as_backend_error, backend_error
from .pubsub import Subscriber
from .resp import bulk, pack
from .routing import ASKING, asked, follow, slot_of
from .scripts import DECISION_SCRIPTS, OTHER_SCRIPTS, Script

logger = logging.getLogger("throttling")


def _topology():
    """The throttle's Redis: THROTTLING_REDIS_URL when set, else the django-redis cache alias.

    Either way the connections get the throttle's own timeouts and no retries:
    django-redis pools have no timeouts unless CACHES says so, and redis-py
    retries three times with back-off by default; either would let a stalled
    Redis hold a request for seconds (see Architecture › Backend failure is not a 500). A lost reply might
    belong to a script that already ran; retrying it would count the request
    twice, so a failed call is simply a failure.
    """
    url = settings.REDIS_URL
    if url:
        topo = redis_urls.parse(url)
    else:
        topo = redis_urls.from_alias_pool(redis_urls.alias_pool(settings.CACHE_ALIAS))
    return topology.with_timeouts(topo, settings.SOCKET_CONNECT_TIMEOUT, settings.SOCKET_TIMEOUT)


class RedisBackend:
    """One per process; thread-safe (each thread holds its own connection per node).

    Standalone: one address. Sentinel: the master the sentinels name. Cluster:
    the master owning the slot of the call's keys (every key of one call shares
    the identity's hash tag). Every call is one command sent once; only
    replies that prove the command did not run (NOSCRIPT, MOVED, ASK, a write
    refused by a former master, a failed connect) send it again, once.
    """

    def __init__(self, topo):
        self.topology = topo
        self.routed = topo.routed
        self.scripts = {name: Script(name) for name in (*DECISION_SCRIPTS, *OTHER_SCRIPTS)}
        self._local = threading.local()
        if not self.routed:
            self._connection_args = topo.connection_args()

    # ----------------------------------------------------------------- decisions

    def decide(self, algorithm, keys, args):
        """Run an algorithm's decision script with KEYS `keys` and ARGV `args` (see decide_packed)."""
        return self.decide_packed(
            algorithm, len(keys), b"".join(map(bulk, (*keys, *args))), len(keys) + len(args), keys[0]
        )

    def decide_packed(self, algorithm, nkeys, body, count, key=None):
        """Run an algorithm's decision script: one EVALSHA whose `count` KEYS and ARGV are
        already RESP in `body` (the first `nkeys` of them keys; `key` is the first, which
        routes the call on a cluster). After NOSCRIPT (a restart, SCRIPT FLUSH, failover)
        load it and run it once more: NOSCRIPT means the script did not run, so the
        retry cannot count twice."""
        script = self.scripts[algorithm]
        packed = b"*%d\r\n$7\r\nEVALSHA\r\n%s%s%s" % (count + 3, script.packed_sha, bulk(nkeys), body)
        try:  # as_backend_error(), without a context manager's cost on the request path
            return self._run(key, packed, script)
        except RedisError as exc:
            raise backend_error(exc) from exc

    def _run(self, key, packed, script=None):
        """`packed` (about `key`) to the node that should run it; a script the node does not
        know (NOSCRIPT: it did not run) is loaded there and run once more."""
        if self.routed:
            return self._route(slot_of(key), packed, script)
        try:
            return self._call(packed)
        except NoScriptError:
            if script is None:
                raise
            self._call(pack("SCRIPT", "LOAD", script.source))
            return self._call(packed)

    def _call(self, packed, replies=None, address=None):
        """`packed` on this thread's held connection to `address`, a node of a routed topology (None:
        the standalone server).

        A pool check-out costs a poll() syscall and bookkeeping per command, and
        Redis.execute_command adds retry closures, metrics recording and
        response callbacks, none of which this call uses (no retries by design,
        a raw reply); on loopback they cost about as much as the round trip. So
        each thread keeps one connection per node (the pool's parameters and
        timeouts), opened on first use and again in a forked child, writes the
        command as RESP and reads the reply with hiredis when installed. A reply
        error leaves the connection usable; anything else (a timeout, a reset)
        drops it, so a half-read reply is never read as the next one.
        """
        local = self._local
        nodes = getattr(local, "nodes", None)
        if nodes is None or local.pid != getpid():
            nodes = local.nodes = {}
            local.pid = getpid()
        held = nodes.get(address)
        now = time.monotonic()
        if held is None or (now - held.used_at > IDLE_CHECK and held.stale()):
            # Idle long enough for Redis to have restarted or closed it: a socket that already reads
            # EOF is replaced before anything is sent on it. A busy thread skips this syscall.
            if held is not None:
                held.close()
            args = self._connection_args if address is None else self.topology.connection_args(address)
            held = nodes[address] = Held(*args)
        try:
            reply = held.call(packed, replies)
        except ResponseError:
            held.used_at = now
            raise
        except BaseException:
            nodes.pop(address, None)
            held.close()
            raise
        held.used_at = now
        return reply

    def held(self, address=None):
        """This thread's held connection to `address` (None: the standalone server), or None."""
        nodes = getattr(self._local, "nodes", None)
        return None if nodes is None or self._local.pid != getpid() else nodes.get(address)

    def _route(self, slot, packed, script=None):
        """One command to the node that should run it, following what proves it did not run."""
        topo = self.topology
        address = topo.address(slot)
        followed = set()
        asking = False  # the slot is being migrated to `address`, and the key is already there
        while True:
            try:
                if asking:
                    return asked(self._call(ASKING + packed, 2, address))
                return self._call(packed, address=address)
            except NoScriptError:
                if script is None or "NOSCRIPT" in followed:
                    raise
                followed.add("NOSCRIPT")
                self._call(pack("SCRIPT", "LOAD", script.source), address=address)
            except ResponseError as exc:
                step, target = follow(exc, followed, topo)
                asking = step == "ask"  # a script it does not know yet is loaded there (NOSCRIPT) too
                address = target if step != "elsewhere" else self._elsewhere(address, slot, exc)
            except NotSent as exc:
                if "connect" in followed:
                    raise
                followed.add("connect")
                asking = False
                address = self._elsewhere(address, slot, exc)
            except RedisError:
                # Sent, and maybe run: never again. Look the topology up again soon.
                topo.lost(address)
                raise

    def _elsewhere(self, address, slot, exc):
        """The address to try after `address` proved not to be the master; raises `exc` if none."""
        self.topology.lost(address)
        new = self.topology.address(slot)
        if new == address:
            raise exc
        return new

    # ----------------------------------------------------------------- other calls

    def _command(self, key, *args):
        """One command about `key` (on a cluster, sent to the key's node)."""
        with as_backend_error():
            return self._run(key, pack(*args))

    def script_call(self, name, keys, args):
        """One call of script `name` (not a decision), its `keys` in one slot."""
        script = self.scripts[name]
        with as_backend_error():
            return self._run(keys[0], pack("EVALSHA", script.sha, len(keys), *keys, *args), script)

    def _nodes(self):
        """The addresses of every master (None: the standalone server)."""
        if not self.routed:
            return [None]
        return self.topology.masters()

    def close(self):
        """Drop this thread's held connections (tests, settings changes)."""
        nodes = getattr(self._local, "nodes", None) or {}
        self._local.nodes = None
        for conn in nodes.values():
            conn.close()

    def mirror_penalties(self, mirrors, batch=500):
        """Replace penalty mirrors: `mirrors` is [(key, expire_at_ms, {field: value}), ...].

        Per-key atomic scripts, safe to repeat (see run_scripts).
        """
        calls = []
        for key, expire_at_ms, fields in mirrors:
            args = [int(expire_at_ms)]
            for name, value in fields.items():
                args += [name, value]
            calls.append(([key], args))
        self.run_scripts("mirror_penalties", calls, batch)

    def run_scripts(self, name, calls, batch=500):
        """Run script `name` once per (keys, args) in `calls`, each call's keys in one slot: per node,
        pipelines of up to `batch` calls. Only a call the node proves it did not run (NOSCRIPT, MOVED,
        ASK) is sent again, so a script that counts counts once."""
        script = self.scripts[name]
        with as_backend_error():
            groups = {}
            for keys, args in calls:
                address = self.topology.address(slot_of(keys[0])) if self.routed else None
                packed = pack("EVALSHA", script.sha, len(keys), *keys, *args)
                groups.setdefault(address, []).append((keys[0], packed))
            for address, items in groups.items():
                for start in range(0, len(items), batch):
                    self._script_batch(address, items[start : start + batch], script)

    def _script_batch(self, address, items, script):
        replies = self._call(b"".join(p for _, p in items), len(items), address)
        missing = [item for item, reply in zip(items, replies) if isinstance(reply, NoScriptError)]
        if missing:
            self._call(pack("SCRIPT", "LOAD", script.source), address=address)
            items, replies = missing, self._call(b"".join(p for _, p in missing), len(missing), address)
        for (key, packed), reply in zip(items, replies):
            if isinstance(reply, ResponseError):
                if not self.routed:
                    raise reply
                self._route(slot_of(key), packed, script)  # MOVED, ASK: one at a time

    def close_run(self, offences_key, pending_key, run):
        """Delete an offence run's counter and pending mark if the mark is this run's (close_run.lua)."""
        return self.script_call("close_run", [offences_key, pending_key], [run])

    def forget(self, state_key, pending_key, kind, token, cost):
        """Undo what a timed-out decision may have written (forget.lua); returns [removed, mark]."""
        return self.script_call("forget", [state_key, pending_key], [kind, token, cost])

    def keep_unsent(self, unsent_key, failures_key, member, when):
        self._command(unsent_key, "ZADD", unsent_key, repr(float(when)), member)
        self._command(failures_key, "INCR", failures_key)

    def unsent(self, unsent_key):
        return self._command(unsent_key, "ZRANGE", unsent_key, 0, -1)

    def forget_unsent(self, unsent_key, member):
        self._command(unsent_key, "ZREM", unsent_key, member)

    def unsent_counts(self, unsent_key, failures_key):
        failures = self._command(failures_key, "GET", failures_key)
        return int(failures or 0), self._command(unsent_key, "ZCARD", unsent_key)

    def remove_members(self, key, members):
        self._command(key, "ZREM", key, *members)

    def refund_log(self, key, members, channel, index=None, target=None):
        """Remove a decision's entries from its log and, when any was there, publish the refund on
        `channel` (refund.lua); per target, `index` and `target` let an emptied log leave its targets
        index. Returns how many were removed."""
        keys, args = [key], [channel, *members]
        if index is not None:
            keys, args = [key, index], [channel, target, *members]
        return self.script_call("refund", keys, args)

    def delete(self, *keys):
        groups = {}
        for key in dict.fromkeys(keys):
            groups.setdefault(slot_of(key) if self.routed else 0, []).append(key)
        for group in groups.values():
            self._command(group[0], "DEL", *group)

    def get(self, key):
        return self._command(key, "GET", key)

    def mget(self, *keys):
        """MGET of keys that share one slot (a hash tag, on a cluster)."""
        return self._command(keys[0], "MGET", *keys)

    def incr(self, key):
        return self._command(key, "INCR", key)

    def bump(self, key, channel):
        """INCR the change marker `key` and PUBLISH "<new value> <key>" on `channel`, in one call
        (bump_marker.lua); returns the new value."""
        return self.script_call("bump_marker", [key], [channel])

    def subscriber_address(self, key):
        """Where the subscriber of the change channel connects: the standalone server (None), the master
        the sentinels name now, or on a cluster the master of `key`'s slot (a classic PUBLISH reaches
        every node of a cluster: any node would do, this one is known)."""
        if not self.routed:
            return None
        with as_backend_error():
            return self.topology.address(slot_of(key))

    def subscribe(self, channel, address):
        """A Subscriber to `channel` on `address` (subscriber_address()), on a connection of its own."""
        args = self._connection_args if address is None else self.topology.connection_args(address)
        with as_backend_error():
            return Subscriber(args, channel, address)

    def infos(self, section):
        """INFO `section` of every master, parsed."""
        with as_backend_error():
            raws = [self._call(pack("INFO", section), address=address) for address in self._nodes()]
        return [parse_info(raw.decode() if isinstance(raw, bytes) else raw) for raw in raws]

    def scan(self, pattern, count=1000):
        """The keys of every master matching `pattern` (SCAN MATCH), each once: a moderator's act."""
        with as_backend_error():
            for address in self._nodes():
                cursor, found = None, set()  # SCAN may return a key twice
                while cursor != b"0":
                    cursor, keys = self._call(
                        pack("SCAN", cursor or 0, "MATCH", pattern, "COUNT", count), address=address
                    )
                    found.update(keys)
                yield from (key.decode() for key in found)

    def count_window(self, key, seconds, n):
        """Add `n` to the current window of `seconds` of the counts hash `key` (count_window.lua):
        [current window's count, previous window's, ms into the current window]."""
        return self.script_call("count_window", [key], [int(seconds), int(n)])

    def set(self, key, value, seconds):
        """SET key value EX seconds."""
        self._command(key, "SET", key, value, "EX", int(seconds))

    def set_nx(self, key, value, seconds):
        """SET key value NX EX seconds: True when this call set it."""
        return self._command(key, "SET", key, value, "NX", "EX", int(seconds)) is not None


# Scripts other than decisions, run by the penalties and the undo of timed-out decisions.


_backend = None
_lock = threading.Lock()


def get_backend():
    """The process's backend, built on first use and again after a settings change."""
    global _backend
    backend = _backend
    if backend is None:
        with _lock:
            if _backend is None:
                _backend = RedisBackend(_topology())
            backend = _backend
    return backend


@receiver(setting_changed)
def _forget_clients(setting, **kwargs):
    global _backend
    if setting == "CACHES" or setting.startswith("THROTTLING_"):
        # Whichever receiver Django calls first: the settings this process remembers are forgotten
        # before the backend built from them, so no thread builds a new one from the old ones.
        if setting.startswith("THROTTLING_"):
            settings.reload()
        # Under the lock: a backend another thread is building from the settings before this change
        # is finished first, then forgotten, never stored after this and kept.
        with _lock:
            backend, _backend = _backend, None
        if backend is not None:
            backend.close()
