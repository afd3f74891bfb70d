"""Changes pushed on the change channel: each process's background thread holds one subscriber, applies
a message as a marker read, and still reads the markers once a look for a message it missed."""

import multiprocessing

import pytest

import throttling
from tests.support.helpers import subscribers, wait_for
from throttling.backends.redis import get_backend
from throttling.backends.scripts import Script
from throttling.engine.keys import changes_channel, refusals_version_key
from throttling.engine.local import local_refusals
from throttling.engine.poller import poller

pytestmark = pytest.mark.django_db


def _refused(who):
    """A refusal this process now answers from memory."""
    throttling.check(who, "reply")
    assert not throttling.check(who, "reply").allowed
    assert any(key[0] == f"s:{who}" for key in local_refusals.entries)


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


def test_a_pushed_change_ends_refusals_without_a_marker_read(redis_server, redis_client, policy, settings):
    """The markers are read once an hour: only the message can end the refusals."""
    settings.THROTTLING_POLICY_REFRESH = 3600
    policy("reply", 60, 1)
    _refused("ann")
    backend = get_backend()
    wait_for(lambda: poller._subscribed_on is backend, message="the background thread subscribed")
    _moved_by_another_process(redis_client, refusals_version_key())
    wait_for(lambda: not local_refusals.entries, message="the refusals ended by the message")


@pytest.mark.slow
def test_a_cut_off_subscriber_comes_back_and_the_markers_bring_what_it_missed(
    redis_server, redis_client, policy, settings
):
    policy("reply", 60, 1)
    throttling.check("warm-up", "reply")
    # Read since this test emptied Redis: the marker's next value is news.
    wait_for(lambda: local_refusals._seen is None, message="the markers read")
    _refused("ann")
    wait_for(lambda: subscribers(redis_client), message="the background thread subscribed")
    assert redis_client.client_kill_filter(_type="pubsub") == 1
    # A change whose message nobody heard: the next look's MGET brings it.
    redis_client.incr(refusals_version_key())
    wait_for(lambda: not local_refusals.entries, timeout=3, message="the refusals ended by the next look")
    wait_for(lambda: subscribers(redis_client), message="subscribed again")
    # And messages are heard again: with the markers read once an hour, only the channel can tell.
    settings.THROTTLING_POLICY_REFRESH = 3600
    _refused("bo")
    backend = get_backend()
    wait_for(lambda: poller._subscribed_on is backend, message="subscribed on the new settings")
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
