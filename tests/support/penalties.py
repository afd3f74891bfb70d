"""Helpers shared by the penalty tests (tests/penalties/; their fixtures are in tests/conftest.py)."""

import base64
import json
import threading
import time

import throttling
from tests.support.helpers import wait_for
from throttling.engine.background.poller import poller
from throttling.engine.identity import member_identity
from throttling.engine.keys import log_keys


def queued(broker, queue):
    """The tasks waiting in a queue, oldest first, as [(task name, args)].

    kombu's Redis transport keeps a queue as a list named after it (LPUSH, BRPOP),
    each item a JSON envelope whose body is the base64 of [args, kwargs, embed].
    """
    tasks = []
    for raw in reversed(broker.lrange(queue, 0, -1)):
        envelope = json.loads(raw)
        args, _kwargs, _embed = json.loads(base64.b64decode(envelope["body"]))
        tasks.append((envelope["headers"]["task"], args))
    return tasks


def pending_key(user_id, action):
    return log_keys(member_identity(user_id), action)[3]


def offences_key(user_id, action):
    return log_keys(member_identity(user_id), action)[1]


def open_run(client, user_id, action, run, offences=3):
    """Redis as the decision script leaves it at a crossing: offences counted, the run pending."""
    client.set(offences_key(user_id, action), offences, ex=600)
    client.set(pending_key(user_id, action), run, ex=300)


def spam_until_escalated(who, action, timeout=5):
    """Refused attempts until one reports that it queued an escalation.

    A refusal answered from memory never crosses: once a run is closed (its rung applied), the
    next run is counted by Redis from this process's next look at the markers.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        d = throttling.check(who, action)
        if d.escalated:
            return d
    raise AssertionError("no escalation after %s s of attempts" % timeout)


def cross(member, action, redis_client, timeout=20):
    """One offence run through the real path: spam, the worker applies a rung, the mirror is written.

    Returns the new penalty once the worker has finished with it (its pending
    mark is gone, so the mirror is in Redis) and this process has seen it.
    """
    from throttling.models import Penalty

    before = set(Penalty.objects.filter(user=member).values_list("pk", flat=True))
    spam_until_escalated(member, action)
    penalty = wait_for(
        lambda: Penalty.objects.filter(user=member).exclude(pk__in=before).first(),
        timeout=timeout,
        message=f"a penalty for the run on {action!r}",
    )
    wait_for(
        lambda: not redis_client.exists(pending_key(member.pk, action)), timeout=timeout, message="the run to close"
    )
    # The look the process's background thread makes every THROTTLING_POLICY_REFRESH seconds: the
    # worker moved the refusals marker, so refusals remembered from the run are forgotten.
    poller.look(markers=True)
    return penalty


def run_together(n, target):
    """Call target(i) from n threads released at once; returns [(result, exception)] in order.

    Each thread closes its own database connection, so none is left open when the
    test database is dropped.
    """
    from django.db import connection

    barrier = threading.Barrier(n)
    outcome = [None] * n

    def work(i):
        try:
            barrier.wait(5)
            outcome[i] = (target(i), None)
        except Exception as exc:  # reported to the test, which decides
            outcome[i] = (None, exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return outcome


class Signals:
    """Collects what a signal sends in this process: a context manager."""

    def __init__(self, signal):
        self.signal = signal
        self.sent = []
        self._lock = threading.Lock()

    def _receive(self, sender, **kwargs):
        with self._lock:
            self.sent.append(kwargs)

    def __enter__(self):
        self.signal.connect(self._receive, weak=False)
        return self

    def __exit__(self, *exc):
        self.signal.disconnect(self._receive)


def seconds_until(moment):
    from django.utils import timezone

    return (moment - timezone.now()).total_seconds()
