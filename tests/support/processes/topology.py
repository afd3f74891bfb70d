"""Real Redis topologies on free loopback ports: a cluster (3 masters, with or without replicas), and a master, replica and sentinel.

Both are built from plain `redis-server` processes (or `valkey-server` ones: THROTTLING_TEST_SERVER,
see demo_site/redis_server.py; no redis-cli needed): the
cluster's nodes are given their slot ranges and introduced to each other (and
replicas told whom to follow), the Sentinel group is a master, a replica of
it, and one sentinel watching them.
"""

import time

import redis
import redis.crc

from demo_site.redis_server import RedisServer, free_port

SLOTS = 16384


def _wait(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except redis.RedisError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"timed out after {timeout}s waiting for {what}")


def free_cluster_port():
    """A free port P whose cluster bus port P + 10000 is free too, both below the ephemeral range and
    neither handed out again in this process until the node is stopped."""
    return free_port(also=(10000,))


class LocalCluster:
    """Three masters, the slots split evenly, and `replicas` replicas of each master (none by
    default); full coverage not required, so a dead master without a replica stops only its
    own slots. Which node is a master changes with failovers: ask `master_of`/`node_of`."""

    def __init__(self, masters=3, node_timeout_ms=2000, replicas=0):
        self.masters = masters
        self.nodes = [
            RedisServer(
                free_cluster_port(),
                extra_args=[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    str(node_timeout_ms),
                    "--cluster-require-full-coverage",
                    "no",
                ],
            )
            for _ in range(masters * (1 + replicas))
        ]

    @property
    def url(self):
        # Two seeds of three: the third node is discovered.
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes[:2])

    def client(self, node):
        return redis.Redis(host="127.0.0.1", port=node.port)

    def start(self):
        for node in self.nodes:
            node.start()
        clients = [self.client(n) for n in self.nodes]
        per = SLOTS // self.masters
        for i, c in enumerate(clients):
            if i < self.masters:
                start = i * per
                end = SLOTS - 1 if i == self.masters - 1 else (i + 1) * per - 1
                c.execute_command("CLUSTER", "ADDSLOTSRANGE", start, end)
            c.execute_command("CLUSTER", "SET-CONFIG-EPOCH", i + 1)
        for node in self.nodes[1:]:
            clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)
        if len(self.nodes) > self.masters:
            ids = [_text(c.cluster("myid")) for c in clients]
            _wait(lambda: all(self._knows(c, ids) for c in clients), 15, "every node to know every other")
            for i, c in enumerate(clients[self.masters :]):
                c.execute_command("CLUSTER", "REPLICATE", ids[i % self.masters])
        _wait(self.healthy, 20, "the cluster to agree on every slot (cluster_state:ok) and its replicas to sync")
        return self

    @staticmethod
    def _knows(client, ids):
        known = {line.split()[0] for line in _text(client.execute_command("CLUSTER", "NODES")).splitlines()}
        return known >= set(ids)

    def healthy(self):
        """Every node up and consistent, and every replica in sync with its master."""
        if not (all(n.running for n in self.nodes) and self._consistent()):
            return False
        for node in self.nodes:
            info = self.client(node).info("replication")
            if info["role"] == "slave" and info.get("master_link_status") != "up":
                return False
        return len(self.master_ports()) == self.masters

    def _consistent(self):
        """Every node up says ok and every node reports the same owner for every slot."""
        tables = []
        for node in self.nodes:
            c = self.client(node)
            if c.cluster("info")["cluster_state"] != "ok":
                return False
            slots = c.execute_command("CLUSTER", "SLOTS")
            if sum(int(e) - int(s) + 1 for s, e, *_ in slots) != SLOTS:
                return False
            tables.append(sorted((int(s), int(e), int(m[1])) for s, e, m, *_ in slots))
        return all(t == tables[0] for t in tables)

    def wait_for_slots(self, timeout=15):
        """Until every node up agrees on the owner of every slot (after a node restarted)."""
        _wait(self._consistent, timeout, "the cluster to agree on every slot again")

    def _table(self):
        """CLUSTER SLOTS of the first node that answers."""
        for node in self.nodes:
            if node.running:
                try:
                    return self.client(node).execute_command("CLUSTER", "SLOTS")
                except redis.RedisError:
                    continue
        raise LookupError("no node of the cluster answers")

    def master_ports(self):
        """The ports of the masters that own slots now (as a node that answers sees it)."""
        return sorted({int(master[1]) for _s, _e, master, *_ in self._table()})

    def by_port(self, port):
        return next(n for n in self.nodes if n.port == port)

    def node_of(self, key):
        """The server owning `key`'s slot."""
        slot = redis.crc.key_slot(key.encode() if isinstance(key, str) else key)
        for start, end, master, *_ in self._table():
            if int(start) <= slot <= int(end):
                return self.by_port(int(master[1]))
        raise LookupError(key)

    def replica_of(self, master):
        """The running replica following `master`."""
        for node in self.nodes:
            if node is not master and node.running:
                info = self.client(node).info("replication")
                if info["role"] == "slave" and int(info["master_port"]) == master.port:
                    return node
        raise LookupError(f"no replica follows {master.port}")

    def wait_replicated(self, timeout=10):
        """Until every replica has every write its master acknowledged so far."""

        def caught_up():
            for port in self.master_ports():
                info = self.client(self.by_port(port)).info("replication")
                offset = info["master_repl_offset"]
                followers = [v for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)]
                if any(int(f["offset"]) < offset for f in followers):
                    return False
            return True

        _wait(caught_up, timeout, "the replicas to catch up")

    def flush(self):
        for node in self.nodes:
            if node.running:
                c = self.client(node)
                if c.info("replication")["role"] == "master":
                    c.flushall()

    def stop(self):
        for node in self.nodes:
            node.stop()


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


class SentinelGroup:
    """A master, one replica of it, and one sentinel (quorum 1) watching them as `service`.

    The tests ask for every failover (SENTINEL FAILOVER), so by default the sentinel is slow to find a
    server down by itself (5 s) and gives a promotion 15 s: on a busy machine a second's silence
    must not start a failover of its own, nor a slow promotion abort one. bench.sentinel, which
    measures failovers the sentinel starts, passes 1 s and 5 s.
    """

    def __init__(self, service="throttle", down_after_ms=5000, failover_timeout_ms=15000):
        self.service = service
        self.down_after_ms, self.failover_timeout_ms = down_after_ms, failover_timeout_ms
        self.master = RedisServer()
        self.replica = RedisServer()
        self.sentinel = None

    @property
    def url(self):
        return f"redis+sentinel://127.0.0.1:{self.sentinel.port}/{self.service}"

    def start(self):
        self.master.start()
        self.replica.extra_args = ["--replicaof", "127.0.0.1", str(self.master.port)]
        self.replica.start()
        _wait(
            lambda: redis.Redis(port=self.replica.port).info("replication")["master_link_status"] == "up",
            15,
            "the replica to sync",
        )
        self.sentinel = RedisServer(
            sentinel=True,
            config=(
                f"sentinel monitor {self.service} 127.0.0.1 {self.master.port} 1\n"
                f"sentinel down-after-milliseconds {self.service} {self.down_after_ms}\n"
                f"sentinel failover-timeout {self.service} {self.failover_timeout_ms}\n"
            ),
        )
        self.sentinel.start()
        _wait(self._replica_known, 20, "the sentinel to see the replica")
        return self

    def _sentinel(self):
        return redis.Redis(port=self.sentinel.port, decode_responses=True)

    def _replica_known(self):
        replicas = self._sentinel().execute_command("SENTINEL", "REPLICAS", self.service)
        for r in replicas:
            fields = r if isinstance(r, dict) else dict(zip(r[::2], r[1::2]))
            flags = fields.get("flags", "")
            flags = flags if isinstance(flags, str) else ",".join(sorted(k for k, v in fields.items() if v is True))
            if "down" not in flags and "disconnected" not in flags and fields.get("master-link-status", "ok") == "ok":
                return True
        return False

    def master_port(self):
        host, port = self._sentinel().execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
        return int(port)

    def server(self, port):
        return self.master if self.master.port == port else self.replica

    def failover(self, timeout=30):
        """SENTINEL FAILOVER; returns once the sentinel names the other server and it takes writes.

        Asked once the sentinel sees a replica it can promote (after an earlier failover, the old master
        is one only once it has synced with the new master), and given 30 s: on a loaded CI run a second
        failover in a row named no new master within 15 s."""
        before = self.master_port()
        _wait(self._replica_known, timeout, "the sentinel to see a replica it can promote")
        self._sentinel().execute_command("SENTINEL", "FAILOVER", self.service)
        _wait(lambda: self.master_port() != before, timeout, "the sentinel to name a new master")
        new = self.master_port()
        _wait(
            lambda: redis.Redis(port=new).info("replication")["role"] == "master",
            timeout,
            "the new master to take writes",
        )
        return new

    def stop(self):
        for server in (self.sentinel, self.replica, self.master):
            if server is not None:
                server.stop()
