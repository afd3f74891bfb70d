"""The connection each thread holds for its decisions: fork-safe, dropped on errors, replaced when stale."""

import multiprocessing
import threading
import time

import pytest
import redis

import throttling
import throttling.engine.decision
from throttling.backends.redis import get_backend

pytestmark = [pytest.mark.django_independent, pytest.mark.django_db]


def _clients(url):
    """The connections that send commands (not this listing's, not the change channel's subscribers)."""
    return [c for c in redis.Redis.from_url(url).client_list(_type="normal") if c.get("cmd") != "client|list"]


def _decide_in_child(queue, inherited):
    try:
        reason = throttling.check("family", "reply").reason
        # The fork hook tells the child it is another process: it holds a connection of its own.
        queue.put((reason, get_backend().held() is not inherited))
    except Exception as exc:  # reported to the parent
        queue.put(repr(exc))


def test_a_forked_child_opens_its_own_connection_and_leaves_the_parents_alone(own_redis, policy):
    policy("reply", 60, 5)
    assert throttling.check("family", "reply").allowed
    held = get_backend().held()
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_decide_in_child, args=(queue, held))
    child.start()
    assert queue.get(timeout=10) == (throttling.engine.decision.ADMITTED, True)
    child.join(10)
    assert child.exitcode == 0
    # The parent's connection is the same one, still open and in step.
    second = throttling.check("family", "reply")
    assert get_backend().held() is held
    assert second.allowed and second.remaining == 2  # parent 2 + child 1 of 5


def test_each_thread_holds_one_connection(own_redis, policy):
    """Each thread's 20 decisions go over the one connection it opened, its own. Counted by the
    threads' own sockets, not by the server's client count, which the process's background thread
    may change at any moment."""
    policy("reply", 60, 1000)
    # The policy is read here, in the test's transaction: the threads' own database connections
    # cannot see its uncommitted row.
    throttling.peek("warm-up", "reply")
    ready, done = threading.Barrier(5), threading.Event()
    held = {}

    def decide(n):
        throttling.check("crowd", "reply")
        first = get_backend().held()
        for _ in range(19):
            throttling.check("crowd", "reply")
        mine = get_backend().held()
        host, port = mine.conn._sock.getsockname()[:2]
        held[n] = (mine is first, f"{host}:{port}")
        ready.wait(10)
        done.wait(10)

    threads = [threading.Thread(target=decide, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    ready.wait(10)
    on_server = {c["addr"] for c in _clients(own_redis.url)}
    done.set()
    for t in threads:
        t.join(10)
    assert all(same for same, _ in held.values()), held  # 20 decisions, one connection each
    addresses = {address for _, address in held.values()}
    assert len(addresses) == 4 and addresses <= on_server, (addresses, on_server)  # 4 threads: 4 open connections


def test_a_killed_connection_fails_one_busy_decision_then_is_replaced(own_redis, policy):
    policy("reply", 60, 5)
    assert throttling.check("kim", "reply").allowed
    redis.Redis.from_url(own_redis.url).client_kill_filter(_type="normal", skipme=True)
    # Used a moment ago, so not checked before sending: this one meets the dead socket.
    failed = throttling.check("kim", "reply")
    assert failed.reason == throttling.engine.decision.BACKEND_FAILURE and failed.allowed  # fails open, as configured
    assert get_backend().held() is None  # dropped, never reused half-read
    again = throttling.check("kim", "reply")
    assert again.reason == throttling.engine.decision.ADMITTED
    assert again.remaining == 3  # the failed call never reached the script: 2 of 5 used


def test_an_idle_connection_closed_by_redis_is_replaced_before_use(own_redis, policy):
    policy("reply", 60, 5)
    assert throttling.check("lee", "reply").allowed
    redis.Redis.from_url(own_redis.url).client_kill_filter(_type="normal", skipme=True)
    time.sleep(0.1)  # idle: the next decision looks at the socket first
    decision = throttling.check("lee", "reply")
    assert decision.reason == throttling.engine.decision.ADMITTED and decision.remaining == 3


def test_redis_restarted_between_decisions_costs_no_failure_when_idle(own_redis, policy):
    policy("reply", 60, 5)
    assert throttling.check("max", "reply").allowed
    own_redis.kill()
    own_redis.start()  # empty, same port
    time.sleep(0.1)
    decision = throttling.check("max", "reply")
    assert decision.reason == throttling.engine.decision.ADMITTED and decision.remaining == 4  # a fresh log
