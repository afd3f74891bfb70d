"""Behind Sentinel with min-replicas-to-write 1: a failover loses no admission, fails open meanwhile, and resumes."""

import time

import pytest
import redis
from django.test.utils import override_settings

import throttling
import throttling.engine.decision
from tests.support.processes.topology import SentinelGroup
from tests.support.traffic import Traffic

pytestmark = [pytest.mark.topology, pytest.mark.django_db(transaction=True)]

MIN_REPLICAS = ["--min-replicas-to-write", "1", "--min-replicas-max-lag", "10"]


@pytest.fixture
def guarded_group():
    """A master and its one replica, both refusing writes without a replica in sync."""
    group = SentinelGroup()
    group.master.extra_args = list(MIN_REPLICAS)
    group.start()
    replica = redis.Redis(port=group.replica.port)
    replica.config_set("min-replicas-to-write", 1)
    replica.config_set("min-replicas-max-lag", 10)
    with override_settings(THROTTLING_REDIS_URL=group.url):
        yield group
    group.stop()


def test_a_failover_loses_no_admission_and_decisions_resume_on_the_new_master(guarded_group, policy):
    policy("reply", 3600, 1000)
    with Traffic("reply") as traffic:
        time.sleep(0.5)
        new = guarded_group.failover()
        # The new master refuses writes (NOREPLICAS) until the old one replicates it: then
        # a fresh member is counted there.
        resumed = None
        deadline = time.monotonic() + 45
        n = 0
        while resumed is None and time.monotonic() < deadline:
            n += 1
            if throttling.check(f"after-{n}", "reply").reason == throttling.engine.decision.ADMITTED:
                resumed = n
            time.sleep(0.1)
    assert traffic.errors == []
    assert resumed is not None, "decisions never resumed on the new master"
    reasons = {d.reason for d in traffic.decided}
    assert reasons <= {throttling.engine.decision.ADMITTED, throttling.engine.decision.BACKEND_FAILURE}
    assert all(d.allowed for d in traffic.decided)  # failed open, as configured
    # Replication is asynchronous: the promoted replica holds the old master's writes up to some point,
    # then its own. So the admissions missing from the new master are one unbroken run of the newest
    # the old master made, all before the decisions failed over (on a healthy machine at most the last
    # one, on its way to the replica; behind a replica that lagged, more: see Operations).
    assert guarded_group.master_port() == new, "the sentinel failed over again"
    master = redis.Redis(port=new)
    decided = traffic.decided
    failed = [i for i, d in enumerate(decided) if d.reason == throttling.engine.decision.BACKEND_FAILURE]
    assert failed, "the old master never refused a write"
    admitted = [i for i, d in enumerate(decided) if d.reason == throttling.engine.decision.ADMITTED]
    lost = [i for i in admitted if master.zscore(decided[i].log_key, decided[i].entries[0]) is None]
    run = admitted.index(lost[0]) if lost else 0
    assert admitted and lost == admitted[run : run + len(lost)], (len(admitted), lost, failed)
    assert not lost or lost[-1] < failed[-1], (lost, failed)
