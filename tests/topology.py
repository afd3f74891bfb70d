"""The local Redis topologies now live in tests/support/topology.py; bench/cluster.py imports them from here."""

from tests.support.topology import LocalCluster, SentinelGroup  # noqa: F401
