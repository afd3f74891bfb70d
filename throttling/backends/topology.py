"""The three shapes of the throttle's Redis (a standalone server, Sentinel, Cluster) and how each finds its master.

A standalone server (``redis://``, ``rediss://``, ``unix://``) is one fixed address.
Behind Sentinel (``redis+sentinel://``) the address is the master the sentinels
name now; it is asked again every second and after any sign of a failover, so
decisions follow a new master within about a second. A Redis Cluster
(``redis+cluster://``) is a table of 16384 slots, each owned by one master; a
decision goes straight to the master owning its identity's slot, and the whole
table is relearnt as soon as a master fails or a node names a new one.

Discovery uses short-lived connections with the throttle's own timeouts, in a
synchronous and an asynchronous flavour, and never retries a decision: only
the routing is looked up again.
"""

import asyncio
import logging
import threading
import time

from redis import asyncio as aioredis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.retry import Retry

from ..exceptions import BackendError

logger = logging.getLogger("throttling")

SLOTS = 16384
SENTINEL_PORT = 26379
REDIS_PORT = 6379
# Seconds between looks at who the sentinels name as master, when nothing went wrong.
SENTINEL_RECHECK = 1.0
# Least seconds between two rediscoveries after errors (a dead node must not
# turn every request into a round of discovery).
REDISCOVER_EVERY = 0.5
# Least seconds between two relearnings of a cluster's slot table after a failed master or a
# MOVED reply, while nodes answer: small, so that a dead master's members follow its promoted
# replica as soon as the cluster names it, yet a dead master with no replica costs each process
# at most this many CLUSTER SLOTS a second (see Architecture › Failover on a cluster).
RELEARN_EVERY = 0.05

_ASYNC_CLASS = {
    Connection: aioredis.Connection,
    SSLConnection: aioredis.SSLConnection,
    UnixDomainSocketConnection: aioredis.UnixDomainSocketConnection,
}

# Connection keyword arguments taken from a django-redis pool (and every ssl_* one).
ADDRESS_KWARGS = frozenset(
    {
        "host",
        "port",
        "db",
        "username",
        "password",
        "path",
        "client_name",
        "credential_provider",
        "socket_keepalive",
        "socket_keepalive_options",
    }
)
# No CLIENT SETINFO and no HELLO (protocol 2) on connect: round trips a new connection
# does not need, and which a stalled server would make every new connection wait out.
# Replies of the scripts are the same in either protocol.
_QUIET = {"driver_info": None, "protocol": 2}
# Connection keyword arguments every address of a topology shares.
SHARED = ("username", "password", "db")


def _bound(timeouts):
    """Seconds one call may take in all: a connection (waiting for one included), then the reply."""
    connect = timeouts.get("socket_connect_timeout")
    reply = timeouts.get("socket_timeout")
    if connect is None or reply is None:
        return None
    return connect + reply


class Standalone:
    """One server at one address."""

    routed = False
    kind = "standalone"

    def __init__(self, connection_class, kwargs):
        self.connection_class = connection_class
        self.kwargs = kwargs

    @property
    def bound(self):
        return _bound(self.kwargs)

    def connection_args(self, address=None):
        return self.connection_class, {**self.kwargs, **_QUIET, "retry": Retry(NoBackoff(), 0)}

    def async_connection_args(self, address=None):
        return _ASYNC_CLASS[self.connection_class], {**self.kwargs, **_QUIET, "retry": AsyncRetry(NoBackoff(), 0)}


class _Routed:
    """A topology whose address depends on the key (Cluster) or on time (Sentinel).

    Discovery comes in a synchronous and an asynchronous flavour that differ only
    in how they send a command (_ask / _aask); what to ask and what the answers
    mean is shared.
    """

    routed = True

    def __init__(self, node_kwargs, timeouts):
        self.node_kwargs = node_kwargs
        self.timeouts = timeouts
        self._lock = threading.Lock()
        self._looked_at = 0.0  # monotonic time of the last discovery attempt

    @property
    def bound(self):
        return _bound(self.timeouts)

    def _kwargs(self, address):
        host, port = address
        return {**self.node_kwargs, **self.timeouts, **_QUIET, "host": host, "port": port}

    def connection_args(self, address):
        return Connection, {**self._kwargs(address), "retry": Retry(NoBackoff(), 0)}

    def async_connection_args(self, address):
        return aioredis.Connection, {**self._kwargs(address), "retry": AsyncRetry(NoBackoff(), 0)}

    def _query_kwargs(self, address, auth):
        kwargs = {**(auth if auth is not None else self.node_kwargs), **self.timeouts, **_QUIET}
        kwargs.pop("db", None)
        return {**kwargs, "host": address[0], "port": address[1]}

    def _ask(self, address, *command, auth=None):
        """One command on a short-lived connection (discovery only); None when the node did not answer."""
        conn = Connection(retry=Retry(NoBackoff(), 0), **self._query_kwargs(address, auth))
        try:
            conn.send_command(*command)
            return conn.read_response()
        except Exception as exc:  # noqa: BLE001 - one node down: the caller asks the next
            logger.debug("throttling: %s:%s did not answer %s: %s", *address, command[0], exc)
            return None
        finally:
            conn.disconnect()

    async def _aask(self, address, *command, auth=None):
        conn = aioredis.Connection(retry=AsyncRetry(NoBackoff(), 0), **self._query_kwargs(address, auth))
        try:
            async with asyncio.timeout(self.timeouts["socket_timeout"] + self.timeouts["socket_connect_timeout"]):
                await conn.send_command(*command)
                return await conn.read_response()
        except Exception as exc:  # noqa: BLE001
            logger.debug("throttling: %s:%s did not answer %s: %s", *address, command[0], exc)
            return None
        finally:
            await conn.disconnect()

    def _may_look(self, now, every):
        with self._lock:
            if now - self._looked_at < every:
                return False
            self._looked_at = now
            return True


class SentinelTopology(_Routed):
    """A master named by sentinels; asked again every SENTINEL_RECHECK seconds and after errors."""

    kind = "sentinel"

    def __init__(self, sentinels, service, node_kwargs, *, sentinel_auth=None, timeouts=None):
        super().__init__(node_kwargs, timeouts or {})
        self.sentinels = list(sentinels)
        self.service = service
        self.sentinel_auth = sentinel_auth or {}
        self.master = None
        self._checked_at = 0.0

    def address(self, slot=None):
        now = time.monotonic()
        if self._due(now):
            for sentinel in list(self.sentinels):
                if self._answer(sentinel, self._ask(sentinel, *self._question, auth=self.sentinel_auth), now):
                    break
        return self._master()

    async def aaddress(self, slot=None):
        now = time.monotonic()
        if self._due(now):
            for sentinel in list(self.sentinels):
                if self._answer(sentinel, await self._aask(sentinel, *self._question, auth=self.sentinel_auth), now):
                    break
        return self._master()

    @property
    def _question(self):
        return ("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)

    def _due(self, now):
        """Time to ask the sentinels: no master known, or the last answer is a second old (and
        nobody asked in the last REDISCOVER_EVERY seconds)."""
        stale = self.master is None or now - self._checked_at >= SENTINEL_RECHECK
        return stale and self._may_look(now, REDISCOVER_EVERY)

    def _master(self):
        if self.master is None:
            raise BackendError(f"no sentinel named a master for {self.service!r}")
        return self.master

    def lost(self, address):
        """The master at `address` failed or refused a write: ask the sentinels at the next chance."""
        if address == self.master:
            self._checked_at = 0.0

    async def alost(self, address):
        self.lost(address)

    def _answer(self, sentinel, reply, now):
        """Take a sentinel's reply; True when it named a master."""
        if not (reply and len(reply) == 2):
            return False
        host, port = reply
        master = (host.decode() if isinstance(host, bytes) else host, int(port))
        # The sentinel that answered is asked first next time.
        self.sentinels = [sentinel, *(s for s in self.sentinels if s != sentinel)]
        if master != self.master and self.master is not None:
            logger.warning("throttling: Sentinel names a new master for %r: %s:%s", self.service, *master)
        self.master = master
        self._checked_at = now
        return True

    def masters(self):
        return [self.address()]


class ClusterTopology(_Routed):
    """Redis Cluster: the slot table, learnt from CLUSTER SLOTS, relearnt whole after a MOVED
    reply or a failed master."""

    kind = "cluster"

    def __init__(self, nodes, node_kwargs, *, timeouts=None):
        node_kwargs = {k: v for k, v in node_kwargs.items() if k != "db"}
        super().__init__(node_kwargs, timeouts or {})
        self.seeds = list(nodes)
        self.known = list(nodes)
        self.slots = None  # list of SLOTS addresses, once learnt
        self.named = None  # a master a MOVED reply named: the table is relearnt, from it first
        self._answered = True  # the last look found a node that answered
        self._first = threading.Lock()

    def _first_table(self):
        """Learn the table when none is known; a thread that finds another learning it waits for
        its answer instead of failing (a process's decisions and its background thread start together)."""
        with self._first:
            if self.slots is None:
                self.refresh()

    def address(self, slot):
        if self.slots is None:
            self._first_table()
        elif self.named is not None:
            self.refresh(force=False, first=self.named)
        return self._owner(slot)

    async def aaddress(self, slot):
        if self.slots is None:
            await self.arefresh()
            while self.slots is None and self._first.locked():
                # A thread (the process's background thread, say) is learning it: its answer, within
                # the call's deadline (the caller bounds this look).
                await asyncio.sleep(0.005)
        elif self.named is not None:
            await self.arefresh(force=False, first=self.named)
        return self._owner(slot)

    def _owner(self, slot):
        slots = self.slots
        if slots is None:
            raise BackendError("no node of the Redis Cluster answered CLUSTER SLOTS")
        address = slots[slot]
        if address is None:
            raise BackendError(f"no node of the Redis Cluster serves slot {slot}")
        return address

    def moved(self, slot, address):
        """A MOVED reply: the slot is served elsewhere now, and so, after a failover or during a
        resharding, may others be. The slot is corrected at once; the whole table is relearnt
        before the next call is routed (here nothing is asked: the caller may be sync or async)."""
        if self.slots is not None:
            self.slots[slot] = address
        self.named = address

    def lost(self, address):
        """A master failed: relearn the table (at most every RELEARN_EVERY seconds), asking it last."""
        self.refresh(force=False, avoid=address)

    async def alost(self, address):
        await self.arefresh(force=False, avoid=address)

    def refresh(self, force=True, avoid=None, first=None):
        nodes = self._to_ask(force, avoid, first)
        for node in nodes:
            if self._learn(self._ask(node, "CLUSTER", "SLOTS"), node):
                return
        self._answered = self._answered and not nodes

    async def arefresh(self, force=True, avoid=None, first=None):
        nodes = self._to_ask(force, avoid, first)
        for node in nodes:
            if self._learn(await self._aask(node, "CLUSTER", "SLOTS"), node):
                return
        self._answered = self._answered and not nodes

    def _to_ask(self, force, avoid, first):
        """The nodes to ask for the table, in order (`first` first, `avoid` last), or none when
        it is too soon.

        The very first look is never held back. After a failure or a MOVED the table is
        relearnt at every chance, at most every RELEARN_EVERY seconds: a master's death is
        answered by its replica's promotion seconds later, and until the cluster names it every
        decision for its slots fails, so each failure looks again rather than waiting. While
        no node answers at all, at most every REDISCOVER_EVERY seconds.
        """
        if force and self.slots is None and not self._looked_at:
            every = 0
        else:
            every = RELEARN_EVERY if self._answered else REDISCOVER_EVERY
        if not self._may_look(time.monotonic(), every):
            return []
        nodes = [n for n in dict.fromkeys([first, *self.known, *self.seeds]) if n is not None and n != avoid]
        return nodes + ([avoid] if avoid else [])

    def _learn(self, reply, asked):
        if not reply:
            return False
        table = [None] * SLOTS
        known = []
        for start, end, master, *_replicas in reply:
            host = master[0].decode() if isinstance(master[0], bytes) else master[0]
            # A node may announce an empty host: it means "the address you asked me on".
            address = (host or asked[0], int(master[1]))
            known.append(address)
            table[int(start) : int(end) + 1] = [address] * (int(end) - int(start) + 1)
        self.slots = table
        self.known = list(dict.fromkeys(known))
        self.named = None
        self._answered = True
        return True

    def masters(self):
        if self.slots is None:
            self._first_table()
        return sorted({a for a in (self.slots or ()) if a is not None})


def with_timeouts(topology, connect_timeout, timeout):
    """Apply the throttle's timeouts (and no retries) to every connection of `topology`."""
    timeouts = {"socket_connect_timeout": connect_timeout, "socket_timeout": timeout}
    if topology.routed:
        topology.timeouts = timeouts
    else:
        topology.kwargs = {**topology.kwargs, **timeouts}
        for name in ("retry", "retry_on_error", "retry_on_timeout", "connection_pool"):
            topology.kwargs.pop(name, None)
    return topology
