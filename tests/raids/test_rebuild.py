"""Blocks indexed again off the request path: decisions go on with the index in place while a thread of
their own reads and indexes a change."""

import gc
import threading

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import RequestFactory

import throttling
import throttling.engine.countermeasures.in_force as measures_module
from throttling.engine.background.poller import UNREAD, bump, poller
from throttling.engine.countermeasures.block_lookup import BlockSet, load_blocks
from throttling.engine.countermeasures.in_force import measures
from throttling.engine.keys import measures_version_key
from throttling.engine.policies.cache import policies
from throttling.models import Block


def request_from(address):
    request = RequestFactory().post("/reply/", REMOTE_ADDR=address)
    request.user = AnonymousUser()
    return request


def many_blocks(count):
    """`count` refusing blocks of single addresses in 10.0.0.0/8, written in one statement."""
    Block.objects.bulk_create(
        [Block(network=f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}/32", reason="wave") for i in range(count)]
    )


@pytest.mark.django_db(transaction=True)
def test_a_decision_during_a_rebuild_answers_from_the_index_in_place_without_waiting(redis_server, policy, monkeypatch):
    policy("reply", 60, 5)
    many_blocks(5000)
    old = Block.objects.create(network="203.0.113.0/24", reason="raid")
    assert throttling.check(request_from("10.0.0.7"), "reply").reason == "blocked"  # the first load
    assert measures.settle(30)
    started, release = threading.Event(), threading.Event()
    read = measures_module.load_blocks

    def held_read():
        # The builder has read the fingerprint and is about to read the rows: held there until the
        # decisions below are made.
        started.set()
        assert release.wait(30)
        return read()

    monkeypatch.setattr(measures_module, "load_blocks", held_read)
    old.delete()
    Block.objects.create(network="198.51.100.0/24", reason="the next wave")
    assert started.wait(30), "no thread began reading the changed blocks"
    builder = measures._builder
    assert builder is not None and builder is not threading.current_thread()
    # Decided on this thread while the builder holds: the index in place answers, and nothing waits.
    assert throttling.check(request_from("203.0.113.9"), "reply").reason == "blocked"
    assert throttling.check(request_from("198.51.100.9"), "reply").allowed
    assert throttling.check(request_from("10.0.0.8"), "reply").reason == "blocked"
    assert builder.is_alive() and not release.is_set()
    release.set()
    assert measures.settle(30)
    assert throttling.check(request_from("203.0.113.9"), "reply").allowed
    assert throttling.check(request_from("198.51.100.9"), "reply").reason == "blocked"
    assert throttling.check(request_from("10.0.0.8"), "reply").reason == "blocked"


@pytest.mark.django_db
def test_a_fresh_process_refuses_a_blocked_address_at_its_first_decision(redis_server, policy):
    policy("reply", 60, 5)
    many_blocks(1000)
    # No index yet: the first decision waits for the blocks rather than admit a blocked address.
    assert throttling.check(request_from("10.0.3.231"), "reply").reason == "blocked"
    assert throttling.check(request_from("10.0.3.232"), "reply").allowed


@pytest.mark.django_db(transaction=True)
def test_a_block_saved_elsewhere_reaches_a_process_that_read_the_marker_during_its_first_load(
    redis_server, policy, monkeypatch
):
    policy("reply", 60, 5)
    # As in a process just started, whose background thread reads the markers for the first time
    # while its first decision loads: the thread's looks are made here, in that order.
    poller.stop()
    parked = threading.Event()
    stand_in = threading.Thread(target=parked.wait, daemon=True)
    stand_in.start()
    poller.thread = stand_in
    measures._seen = policies._seen = UNREAD
    load_surges = measures_module.load_surges

    def read_during_the_load():
        poller.look(markers=True)
        return load_surges()

    monkeypatch.setattr(measures_module, "load_surges", read_during_the_load)
    try:
        assert throttling.check(request_from("203.0.113.9"), "reply").allowed
        monkeypatch.setattr(measures_module, "load_surges", load_surges)
        # Another process saves a block: its row, and the marker it moves.
        Block.objects.bulk_create([Block(network="203.0.113.0/24", reason="raid")])
        bump(measures_version_key)
        poller.look(markers=True)  # the next safety read
        assert measures.settle(30)
        assert throttling.check(request_from("203.0.113.9"), "reply").reason == "blocked"
    finally:
        poller.thread = None
        parked.set()


@pytest.mark.django_db
def test_indexing_blocks_leaves_the_collector_running(monkeypatch):
    # Pausing it is process-wide: every other thread's garbage would wait for the build too.
    many_blocks(5000)
    building, collected = [False], []

    def on_collect(phase, info):
        if phase == "start" and building[0]:
            collected.append(info["generation"])

    index = BlockSet.__init__

    def watched(self, rows=()):
        building[0] = True
        try:
            index(self, rows)
        finally:
            building[0] = False

    monkeypatch.setattr(BlockSet, "__init__", watched)
    gc.callbacks.append(on_collect)
    try:
        assert load_blocks().count == 5000
    finally:
        gc.callbacks.remove(on_collect)
    assert collected, "the cyclic collector did not run while 5,000 blocks were indexed"


@pytest.mark.django_db(transaction=True)
def test_a_process_that_never_decided_indexes_no_blocks(redis_server):
    # A Celery worker starting a surge, an admin-only process: they save, and keep no index.
    Block.objects.create(network="203.0.113.0/24", reason="raid")
    assert measures._builder is None and measures.settle(0)
    assert measures.blocks.count == 0
