"""The backend for async code (ASGI views): the same calls as RedisBackend, on redis.asyncio.

Each event loop has its own connections per node, so a decision never blocks
the loop and never shares a socket with another loop. The topology (standalone
server, Sentinel master, cluster slot table) is the synchronous backend's, so
both learn the same routing; asynchronous discovery looks it up without
blocking.
"""

import asyncio
import threading
import time
import weakref

from redis.exceptions import NoScriptError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .connection import IDLE_CHECK, NotSent
from .errors import as_backend_error, backend_error
from .redis import get_backend
from .resp import bulk, pack
from .routing import ASKING, asked, follow, slot_of

# Connections one event loop may hold to one node; further calls wait for a free one,
# never past their deadline.
MAX_CONNECTIONS = 16
# Connections being opened at once: a burst of decisions (asyncio.gather) reuses the first
# ones to open instead of opening one each, which under load could outlast the connect timeout.
MAX_OPENING = 2


def _deadline(topology):
    """The loop time by which a call must be over (None: no bound), see Architecture › Backend failure is not a 500."""
    bound = topology.bound
    return None if bound is None else asyncio.get_running_loop().time() + bound


_background = set()  # tasks of looks at the topology that no call waits for


def _in_background(coroutine):
    task = asyncio.ensure_future(coroutine)
    _background.add(task)
    task.add_done_callback(_background.discard)


class _Pool:
    """The connections of one event loop to one address, each used by one call at a time.

    A call has one deadline, which covers waiting for a connection, opening one
    and the reply: however many calls wait on a stalled server, each ends at its
    own deadline, not after the calls queued before it.
    """

    def __init__(self, connection_class, kwargs, limit=MAX_CONNECTIONS):
        self.connection_class = connection_class
        self.kwargs = kwargs
        self.free = []  # (connection, last used)
        self.slots = asyncio.Semaphore(limit)
        self.opening = asyncio.Semaphore(MAX_OPENING)

    def _take(self):
        while self.free:
            conn, used_at = self.free.pop()
            reader = getattr(conn, "_reader", None)
            if time.monotonic() - used_at > IDLE_CHECK and reader is not None and reader.at_eof():
                # Closed by Redis while idle: drop it before anything is sent on it.
                conn._close()
                continue
            return conn
        return None

    async def _connection(self, deadline):
        conn = self._take()
        if conn is not None:
            return conn
        try:
            async with asyncio.timeout_at(deadline), self.opening:
                conn = self._take()  # one may have come free while this call waited its turn
                if conn is not None:
                    return conn
                conn = self.connection_class(**self.kwargs)
                try:
                    await conn.connect()
                except BaseException:
                    await conn.disconnect(nowait=True)
                    raise
                return conn
        except TimeoutError:
            raise NotSent("no connection to Redis could be opened within the call's bound") from None
        except RedisError as exc:
            raise NotSent(str(exc)) from exc

    async def call(self, packed, replies=None, deadline=None):
        try:
            async with asyncio.timeout_at(deadline):
                await self.slots.acquire()
        except TimeoutError:
            raise NotSent("no connection to Redis came free within the call's bound") from None
        try:
            conn = await self._connection(deadline)  # connected: a fresh one, or one returned in good order
            return await self._exchange(conn, packed, replies, deadline)
        finally:
            self.slots.release()

    async def _exchange(self, conn, packed, replies, deadline):
        try:
            async with asyncio.timeout_at(deadline):
                await conn.send_packed_command(packed, check_health=False)
                if replies is None:
                    reply = await conn.read_response()
                else:
                    reply = []
                    for _ in range(replies):
                        try:
                            reply.append(await conn.read_response())
                        except ResponseError as exc:
                            reply.append(exc)
        except ResponseError:
            self.free.append((conn, time.monotonic()))
            raise
        except TimeoutError:
            # Sent and maybe run: a timeout, like a read that outlasted socket_timeout.
            await conn.disconnect(nowait=True)
            raise RedisTimeoutError("no reply from Redis within the call's bound") from None
        except BaseException:
            # A timeout, a reset or a cancelled task: the reply may still come,
            # so the connection is never reused.
            await conn.disconnect(nowait=True)
            raise
        self.free.append((conn, time.monotonic()))
        return reply


class AsyncRedisBackend:
    def __init__(self, sync_backend):
        self.sync = sync_backend
        self.topology = sync_backend.topology
        self.routed = self.topology.routed
        self.scripts = sync_backend.scripts
        self._pools = weakref.WeakKeyDictionary()  # event loop -> {address: _Pool}

    def _pool(self, address):
        loop = asyncio.get_running_loop()
        pools = self._pools.get(loop)
        if pools is None:
            pools = self._pools[loop] = {}
        pool = pools.get(address)
        if pool is None:
            pool = pools[address] = _Pool(*self.topology.async_connection_args(address))
        return pool

    async def decide_packed(self, algorithm, nkeys, body, count, key=None):
        """RedisBackend.decide_packed for async code."""
        script = self.scripts[algorithm]
        packed = b"*%d\r\n$7\r\nEVALSHA\r\n%s%s%s" % (count + 3, script.packed_sha, bulk(nkeys), body)
        try:
            return await self._run(key, packed, script)
        except RedisError as exc:
            raise backend_error(exc) from exc

    async def decide(self, algorithm, keys, args):
        return await self.decide_packed(
            algorithm, len(keys), b"".join(map(bulk, (*keys, *args))), len(keys) + len(args), keys[0]
        )

    async def command(self, key, *args):
        with as_backend_error():
            return await self._run(key, pack(*args))

    async def script_call(self, name, keys, args):
        """RedisBackend.script_call for async code."""
        script = self.scripts[name]
        with as_backend_error():
            return await self._run(keys[0], pack("EVALSHA", script.sha, len(keys), *keys, *args), script)

    async def delete(self, *keys):
        groups = {}
        for key in dict.fromkeys(keys):
            groups.setdefault(slot_of(key) if self.routed else 0, []).append(key)
        for group in groups.values():
            await self.command(group[0], "DEL", *group)

    async def refund_log(self, key, members, channel, index=None, target=None):
        """RedisBackend.refund_log for async code."""
        keys, args = [key], [channel, *members]
        if index is not None:
            keys, args = [key, index], [channel, target, *members]
        return await self.script_call("refund", keys, args)

    async def _run(self, key, packed, script=None):
        deadline = _deadline(self.topology)
        if self.routed:
            return await self._route(slot_of(key), packed, script, deadline)
        pool = self._pool(None)
        try:
            return await pool.call(packed, deadline=deadline)
        except NoScriptError:
            if script is None:
                raise
            await pool.call(pack("SCRIPT", "LOAD", script.source), deadline=deadline)
            return await pool.call(packed, deadline=deadline)

    async def _route(self, slot, packed, script, deadline):
        """RedisBackend._route, awaiting: the same rules on what may be sent again, within one deadline."""
        topo = self.topology
        address = await self._discover(topo.aaddress(slot), deadline)
        followed = set()
        asking = False  # the slot is being migrated to `address`, and the key is already there
        while True:
            try:
                if asking:
                    return asked(await self._pool(address).call(ASKING + packed, 2, deadline))
                return await self._pool(address).call(packed, deadline=deadline)
            except NoScriptError:
                if script is None or "NOSCRIPT" in followed:
                    raise
                followed.add("NOSCRIPT")
                await self._pool(address).call(pack("SCRIPT", "LOAD", script.source), deadline=deadline)
            except ResponseError as exc:
                step, target = follow(exc, followed, topo)
                asking = step == "ask"  # a script it does not know yet is loaded there (NOSCRIPT) too
                address = target if step != "elsewhere" else await self._elsewhere(address, slot, exc, deadline)
            except NotSent as exc:
                if "connect" in followed:
                    raise
                followed.add("connect")
                asking = False
                address = await self._elsewhere(address, slot, exc, deadline)
            except RedisError:
                # Sent, and maybe run: never again, and the error is the call's answer (a
                # timeout must stay one, to be undone later), so the look runs on its own.
                _in_background(topo.alost(address))
                raise

    async def _elsewhere(self, address, slot, exc, deadline):
        await self._discover(self.topology.alost(address), deadline)
        new = await self._discover(self.topology.aaddress(slot), deadline)
        if new == address:
            raise exc
        return new

    @staticmethod
    async def _discover(lookup, deadline):
        """A look at the topology, within the call's deadline: a call never waits on discovery past it."""
        try:
            async with asyncio.timeout_at(deadline):
                return await lookup
        except TimeoutError:
            raise NotSent("the Redis topology could not be looked up within the call's bound") from None


_backend = None
_lock = threading.Lock()


def get_async_backend():
    """The process's async backend: one per synchronous backend, whose topology it shares (a
    settings change that replaces that backend replaces this one too); connections per event loop."""
    global _backend
    backend = _backend
    sync = get_backend()
    if backend is None or backend.sync is not sync:
        with _lock:
            if _backend is None or _backend.sync is not sync:
                _backend = AsyncRedisBackend(sync)
            backend = _backend
    return backend
