"""The test servers' ports: below the kernel's ephemeral range, never handed out twice in a process, and a
restart that finds its port taken fails loudly."""

import random

import pytest

from demo_site import redis_server
from demo_site.redis_server import RedisServer, _ephemeral_floor, free_port, release_port
from tests.support.processes.topology import free_cluster_port

pytestmark = pytest.mark.django_independent

BUS = 10000  # a cluster node's bus port is its port + 10000


def test_server_ports_stay_clear_of_outgoing_connections():
    """A node stopped and started again keeps its port (and its bus port, port + 10000): both come
    from below the kernel's ephemeral range, where no client's outgoing connection can take them
    while the node is down (what failed a restart before)."""
    floor = _ephemeral_floor()
    plain = [free_port() for _ in range(50)]
    nodes = [free_cluster_port() for _ in range(50)]
    try:
        assert all(port < floor for port in plain)
        assert all(port + BUS < floor for port in nodes)
    finally:
        for port in plain + nodes:
            release_port(port)


def test_six_cluster_nodes_never_share_a_port_or_a_bus_port_over_many_draws(monkeypatch):
    """Six nodes drawn before any starts (as a cluster with replicas is built): no node is given
    another's port or bus port, whatever the draws. The kernel cannot tell, since nothing listens yet.
    A seeded generator makes the draws the same on every run."""
    monkeypatch.setattr(redis_server, "_pick", random.Random(2025))
    for _ in range(5000):
        nodes = [free_cluster_port() for _ in range(6)]
        try:
            taken = [port + offset for port in nodes for offset in (0, BUS)]
            assert len(set(taken)) == len(taken), sorted(taken)
        finally:
            for port in nodes:
                release_port(port)


class Scripted:
    """Draws that return the given ports in order: the collisions a random generator meets by chance."""

    def __init__(self, *ports):
        self.ports = list(ports)

    def randint(self, low, high):
        port = self.ports.pop(0)
        assert low <= port <= high
        return port


def _bindable_ports(count):
    """Ports free here now (drawn for real, then released)."""
    ports = [free_port() for _ in range(count)]
    for port in ports:
        release_port(port)
    return ports


def test_a_port_handed_out_and_its_bus_port_are_never_handed_out_again_until_released(monkeypatch):
    # Free here now (drawn for real, then released): a node's port with its bus port, and another.
    node_port = free_cluster_port()
    other = free_port()
    release_port(node_port)
    release_port(other)
    # A node's port, then that port and its bus port offered to the next draw, then another.
    monkeypatch.setattr(redis_server, "_pick", Scripted(node_port, node_port, node_port + BUS, other))
    node = free_cluster_port()
    plain = free_port()
    try:
        assert node == node_port
        assert plain == other  # neither the node's port nor its bus port
    finally:
        release_port(plain)
        release_port(node)
    # Released: the same port may be handed out again.
    monkeypatch.setattr(redis_server, "_pick", Scripted(node_port))
    assert free_port() == node_port
    release_port(node_port)


def test_a_stopped_server_releases_its_port(monkeypatch):
    server = RedisServer().start()
    port = server.port
    (other,) = _bindable_ports(1)
    server.kill()  # down for an outage test: its port stays its own
    monkeypatch.setattr(redis_server, "_pick", Scripted(port, other))
    assert free_port() == other
    release_port(other)
    server.stop()
    monkeypatch.setattr(redis_server, "_pick", Scripted(port))
    assert free_port() == port
    release_port(port)


def test_a_server_restarted_on_a_port_a_stranger_took_fails_loudly():
    """start() waits for its own process to answer, not any Redis on the port: a restart whose port
    another server took meanwhile fails with redis-server's own reason, instead of the test going on
    against the stranger's data."""
    ours = RedisServer().start()
    port = ours.port
    ours.kill()
    stranger = RedisServer(port).start()
    try:
        with pytest.raises(RuntimeError, match="exited with status"):
            ours.start()
        assert stranger.running
    finally:
        stranger.stop()
        ours.stop()
