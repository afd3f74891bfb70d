"""Changes pushed on the change channel: each process's background thread holds one subscriber, applies
a message as a marker read, and still reads the markers once a look for a message it missed."""

import multiprocessing

import pytest

import throttling
from tests.support.helpers import Monitor, subscribers, wait_for
from throttling.backends.redis import get_backend
from throttling.backends.scripts import Script
from throttling.engine.background.poller import bump, poller
from throttling.engine.keys import changes_channel, log_keys, refusals_version_key
from throttling.engine.refusal_memory import local_refusals

pytestmark = [pytest.mark.django_independent, pytest.mark.django_db]


def _refused(who):
    """A refusal this process now answers from memory."""
    throttling.check(who, "reply")
    assert not throttling.check(who, "reply").allowed
    assert any(key[0] == f"s:{who}" for key in local_refusals.entries)


def _subscribed(client):
    """This process's background thread runs and has subscribed on the current settings' backend (so
    that a subscribe again, which ends every refusal, is not still to come), and the server (`client`)
    counts that subscriber: one an earlier test cut off stays referenced until the thread notices, and
    would hear nothing, nor be found by a kill. Returns the subscriber."""
    throttling.check("warm-up", "reply")
    backend = get_backend()
    wait_for(
        lambda: poller._subscribed_on is backend and poller._subscriber is not None and subscribers(client) == 1,
        message="the background thread subscribed on this server",
    )
    return poller._subscriber


def _moved_by_another_process(client, key):
    """What another process's reset or lift sends: the marker moved and published in one script call."""
    script = Script("bump_marker")
    return client.eval(script.source, 1, key, changes_channel())


def test_each_process_holds_one_subscriber_to_the_change_channel(redis_server, redis_client, policy):
    policy("reply", 60, 1)
    throttling.check("ann", "reply")
    wait_for(lambda: subscribers(redis_client), message="the background thread subscribed")
    assert subscribers(redis_client) == 1
    # What a reset sends: the new value and the marker it moved, on the prefix's channel.
    channel = redis_client.pubsub()
    channel.subscribe(changes_channel())
    assert channel.get_message(timeout=1)["type"] == "subscribe"
    throttling.reset("ann", "reply")
    message = channel.get_message(timeout=1)
    assert message["channel"].decode() == changes_channel() == "throttling:changes"
    value, key = message["data"].decode().split(" ", 1)
    assert key == refusals_version_key() and value == redis_client.get(key).decode()
    channel.close()


def _first_decision_in_child(queue):
    try:
        throttling.check("child", "reply")  # the child's first decision starts its own background thread
        wait_for(lambda: poller._subscriber is not None and poller._read_at > float("-inf"), timeout=10)
        queue.put(True)
    except Exception as exc:  # reported to the parent
        queue.put(repr(exc))
    finally:
        poller.stop()  # as at exit: multiprocessing's children end with os._exit


def test_a_new_process_subscribes_before_its_first_read_of_the_markers(redis_server, policy):
    """A change saved while a process's background thread starts is in its first read of the markers or
    in a message: its SUBSCRIBE comes before that read's MGET, never after (then only the read a period
    later would bring it)."""
    policy("reply", 60, 5)
    throttling.check("warm-up", "reply")
    poller.stop()  # this process sends neither while the child starts
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    with Monitor(redis_server.url) as monitor:
        child = ctx.Process(target=_first_decision_in_child, args=(queue,))
        child.start()
        assert queue.get(timeout=15) is True
        child.join(10)
    assert child.exitcode == 0
    commands = [c for c in monitor.commands if c in ("SUBSCRIBE", "MGET")]
    assert commands[:2] == ["SUBSCRIBE", "MGET"]


def test_a_pushed_change_ends_refusals_without_a_marker_read(redis_server, redis_client, policy, settings):
    """The markers are read once an hour: only the message can end the refusals."""
    settings.THROTTLING_POLICY_REFRESH = 3600
    policy("reply", 60, 1)
    _subscribed(redis_client)
    _refused("ann")
    _moved_by_another_process(redis_client, refusals_version_key())
    wait_for(lambda: not local_refusals.entries, message="the refusals ended by the message")


@pytest.mark.slow
def test_a_cut_off_subscriber_comes_back_and_the_markers_bring_what_it_missed(
    redis_server, redis_client, policy, settings
):
    policy("reply", 60, 1)
    cut_off = _subscribed(redis_client)
    # Read since this test emptied Redis: the marker's next value is news.
    wait_for(lambda: local_refusals._seen is None, message="the markers read")
    assert redis_client.client_kill_filter(_type="pubsub") == 1
    wait_for(lambda: poller._subscriber not in (None, cut_off), message="subscribed again")
    # Refused since: a change whose message nobody heard now, and only the next look's MGET brings it.
    _refused("ann")
    redis_client.incr(refusals_version_key())
    wait_for(lambda: not local_refusals.entries, timeout=3, message="the refusals ended by the next look")
    # And messages are heard again: with the markers read once an hour, only the channel can tell.
    settings.THROTTLING_POLICY_REFRESH = 3600
    _subscribed(redis_client)
    _refused("bo")
    _moved_by_another_process(redis_client, refusals_version_key())
    wait_for(lambda: not local_refusals.entries, message="the refusals ended by the message")


def test_a_message_naming_no_marker_changes_nothing(redis_server, redis_client, policy):
    policy("reply", 60, 1)
    _refused("ann")
    poller.pushed(b"7 throttling:unknown")
    poller.pushed(b"garbage")
    assert local_refusals.entries
    poller.pushed(b"7 " + refusals_version_key().encode())
    assert not local_refusals.entries


def _subscribe_in_child(queue, url):
    import redis

    try:
        throttling.check("child", "reply")  # starts the child's own background thread
        client = redis.Redis.from_url(url)
        queue.put(wait_for(lambda: subscribers(client) == 2 and poller._subscriber is not None, timeout=10))
    except Exception as exc:  # reported to the parent
        queue.put(repr(exc))
    finally:
        poller.stop()  # as at exit: multiprocessing's children end with os._exit


def test_a_forked_child_subscribes_on_its_own_and_leaves_the_parents_subscriber_alone(
    redis_server, redis_client, policy, settings
):
    settings.THROTTLING_POLICY_REFRESH = 3600
    policy("reply", 60, 1)
    throttling.check("warm-up", "reply")
    backend = get_backend()
    wait_for(lambda: poller._subscribed_on is backend, message="the parent subscribed")
    parents = poller._subscriber
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_subscribe_in_child, args=(queue, redis_server.url))
    child.start()
    assert queue.get(timeout=15) is True  # the parent's subscriber and the child's own
    child.join(10)
    assert child.exitcode == 0
    wait_for(lambda: subscribers(redis_client) == 1, message="the child's subscriber gone with it")
    # The parent's is the same one, still subscribed: a message still ends its refusals.
    assert poller._subscriber is parents
    _refused("ann")
    _moved_by_another_process(redis_client, refusals_version_key())
    wait_for(lambda: not local_refusals.entries, message="the refusals ended by the message")


def test_a_refund_is_heard_and_ends_only_the_refusals_of_its_state(redis_server, redis_client, policy, settings):
    """The markers are read once an hour: only the refund's own message can end the refusals."""
    settings.THROTTLING_POLICY_REFRESH = 3600
    policy("reply", 60, 1)
    _subscribed(redis_client)
    _refused("ann")
    _refused("bo")
    # What another process's refund of one of ann's entries sends: the entry removed, and the
    # message, in one script call.
    ann_log = log_keys("s:ann", "reply")[0]
    (entry,) = redis_client.zrange(ann_log, 0, -1)
    assert redis_client.eval(Script("refund").source, 1, ann_log, changes_channel(), entry) == 1
    wait_for(lambda: all(key[0] != "s:ann" for key in local_refusals.entries), message="ann's refusal ended")
    assert [key[0] for key in local_refusals.entries] == ["s:bo"]
    assert throttling.check("ann", "reply").allowed
    # A second refund of the same entry gives nothing back and tells nobody.
    channel = redis_client.pubsub()
    channel.subscribe(changes_channel())
    assert channel.get_message(timeout=1)["type"] == "subscribe"
    assert redis_client.eval(Script("refund").source, 1, ann_log, changes_channel(), entry) == 0
    assert channel.get_message(timeout=0.5) is None
    channel.close()


def test_refusals_end_when_the_subscriber_comes_back_after_a_gap(redis_server, redis_client, policy, settings):
    """A refund's message missed while the subscriber was cut off is never read back: coming back ends them all."""
    settings.THROTTLING_POLICY_REFRESH = 3600
    policy("reply", 60, 1)
    cut_off = _subscribed(redis_client)
    _refused("ann")
    assert redis_client.client_kill_filter(_type="pubsub") == 1
    wait_for(lambda: poller._subscriber not in (None, cut_off), message="subscribed again")
    assert not local_refusals.entries


def test_a_marker_moved_after_redis_restarted_never_repeats_a_value_read_before(own_redis, policy):
    """Redis comes back empty: a marker counted up from nothing again must not meet the value the
    processes last read (see Architecture › Policies in every process)."""
    before = [bump(refusals_version_key) for _ in range(3)]
    assert before == sorted(set(before))
    own_redis.kill()
    own_redis.start()
    after = bump(refusals_version_key)
    assert int(after) > int(before[-1])
