"""One background thread per process that keeps the in-process state current, off the request path.

A decision sends exactly one command, its script call (see Architecture › One command per decision).
Everything else a process must learn from Redis, or hand to it, is done here: the change markers
(pushed on the change channel the moment one moves, and read with one MGET every
THROTTLING_POLICY_REFRESH seconds in case a message was missed), the offences of refusals answered
from memory, the undo of decisions that timed out, and the eviction watch (INFO every
THROTTLING_EVICTION_CHECK seconds).
"""

import atexit
import logging
import os
import threading
import time

from redis.exceptions import RedisError

from ...backends.redis import get_backend
from ...conf import settings
from ...exceptions import BackendError
from ..keys import changes_channel
from .eviction_watch import eviction_watch
from .undo_timeouts import in_doubt

logger = logging.getLogger("throttling")

# Least seconds between two looks, whatever THROTTLING_POLICY_REFRESH says: a refresh of 0 must
# not make the thread spin.
MIN_INTERVAL = 0.05
# Most seconds between two looks: the offences of local refusals reach Redis at least this often,
# and a changed THROTTLING_POLICY_REFRESH applies within it.
MAX_INTERVAL = 1.0
# A wait may end a hair early: the markers are still due after it.
TOLERANCE = 0.01
# Least seconds between two warnings of the thread.
LOG_EVERY = 60.0
# Seconds before subscribing again after a failed attempt: doubled at each failure up to
# SUBSCRIBE_RETRY_MOST. A subscriber that was cut off subscribes again at once, unless it had
# subscribed less than SUBSCRIBE_RETRY_MOST seconds before: that counts as a failure.
SUBSCRIBE_RETRY = 0.5
SUBSCRIBE_RETRY_MOST = 10.0


class Poller:
    """Started by the first decision of a process (and again in a forked child), never at import.

    `watch(key, on_read)` registers a marker: every look reads all markers in one MGET (they share a
    slot) and calls `on_read(value)` with each answer. `hear(word, on_message, on_gap)` registers
    messages that name no marker (a refund's). `every_look(task)` registers work done at each look
    (flushing buffers to Redis). A look that fails changes nothing and is tried again at the next
    one, a period later: a Redis that is down costs one failed connect a period, and one warning a minute.

    Between two looks the thread waits on one connection of its own SUBSCRIBEd to the change channel:
    whoever moves a marker publishes its new value there (bump_marker.lua), and `on_read(value)` is
    called as soon as the message arrives, as if a look had read it (with `pushed=True`: a message
    is a change even when the value is the one last read). A subscriber that is cut off
    subscribes again at once, then with a growing pause while Redis does not answer; meanwhile the
    looks' MGET still brings every change. The subscriber follows the backend (a settings change)
    and the node it should listen to (a failover), and is cut off by stop() to end a wait at once.
    """

    def __init__(self):
        self._markers = []  # (key function, on_read)
        self._hearers = {}  # first word of a message -> (on_message, on_gap)
        self._tasks = []
        self._reset()
        os.register_at_fork(after_in_child=self._reset)
        atexit.register(self.stop)

    def _reset(self):
        self.thread = None
        self._read_at = -float("inf")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._warned_at = {}
        # The subscriber (a forked child drops its parent's, unclosed, and opens its own), the
        # backend it was opened on, when to try again after a failure, and the pause before that.
        self._subscriber = None
        self._subscribed_on = None
        self._subscribe_at = -float("inf")
        self._subscribe_pause = 0.0
        # True from a loss of the subscriber (cut off, a failover, a failed subscribe) to the next
        # subscribe: messages may have been missed meanwhile. Not after a settings change, which
        # ends what they would have.
        self._gap = False

    def watch(self, key, on_read):
        self._markers.append((key, on_read))

    def every_look(self, task):
        self._tasks.append(task)

    def hear(self, word, on_message, on_gap):
        """Messages of the change channel "<word> <text>": `on_message(text)` as each arrives. No read
        brings back a message sent while there was no subscriber (cut off, a failover, subscribing
        failing), so `on_gap()` is called when it subscribes again after such a gap: whatever those
        messages would have ended must end then."""
        self._hearers[word.encode()] = (on_message, on_gap)

    def start(self):
        """Start the thread if it is not running (each decision calls this when `thread` is None)."""
        with self._lock:
            if self.thread is not None and self.thread.is_alive():
                return
            thread = threading.Thread(target=self._run, args=(self._stop,), name="throttling-poller", daemon=True)
            try:
                thread.start()
            except RuntimeError:  # the interpreter is exiting: no thread may start
                return
            self.thread = thread

    def stop(self, timeout=1.0):
        """Stop the thread and do the last look's work (at interpreter exit; tests)."""
        thread = self.thread
        self._stop.set()
        subscriber = self._subscriber
        if subscriber is not None:
            subscriber.wake()
        if thread is not None:
            thread.join(timeout)
            self.thread = None
            self._run_tasks()
        self._stop = threading.Event()

    def _run(self, stop):
        try:
            # Subscribed before the first look reads the markers: a change saved while the thread
            # starts is then either in that read or in a message, never only in the read a period later.
            try:
                self._subscribed()
            except Exception:  # as in listen(): the looks bring the changes meanwhile
                self._listening_failed("subscribing to")
            while not stop.is_set():
                try:
                    self.look()
                except Exception:  # the thread must outlive anything one look meets
                    self._warn("look", "throttling: the background look at Redis failed", exc_info=True)
                due = time.monotonic() + min(max(settings.POLICY_REFRESH, MIN_INTERVAL), MAX_INTERVAL)
                while not stop.is_set() and (left := due - time.monotonic()) > 0:
                    try:
                        self.listen(stop, left)
                    except Exception:  # as a look: the thread goes on, the looks bring the changes
                        self._listening_failed("reading")
                        stop.wait(left)
        finally:
            self._drop_subscriber()

    def _listening_failed(self, doing):
        self._drop_subscriber()
        self._warn("listen", "throttling: %s the change channel failed", doing, exc_info=True)

    def listen(self, stop, timeout):
        """Wait up to `timeout` seconds for pushed changes on the subscriber, and apply those that came."""
        subscriber = self._subscribed()
        if subscriber is None:
            stop.wait(min(timeout, max(self._subscribe_at - time.monotonic(), SUBSCRIBE_RETRY)))
            return
        try:
            messages = subscriber.read(timeout)
        except (RedisError, OSError) as exc:
            self._drop_subscriber()
            if time.monotonic() - subscriber.since < SUBSCRIBE_RETRY_MOST:
                # Cut off soon after subscribing: wait as after a failure, so a server that keeps
                # closing it is not asked again and again.
                self._failed()
            else:
                self._subscribe_pause = 0.0
            # Subscribed again at the next wait: a warning only if that fails.
            logger.debug("throttling: the subscriber of the change channel was cut off (%s)", exc)
            return
        for message in messages:
            self.pushed(message)

    def pushed(self, message):
        """A message of the change channel: "<new value> <marker key>" (that marker read that value), or
        "<word> <text>" for a word registered with hear()."""
        value, _, key = message.partition(b" ")
        hearer = self._hearers.get(value)
        if hearer is not None:
            hearer[0](key.decode(errors="replace"))
            return
        key = key.decode(errors="replace")
        for marker, on_read in self._markers:
            if marker() == key:
                on_read(value, pushed=True)

    def _subscribed(self):
        """The subscriber, subscribed again when the backend or the node to listen to changed
        (a settings change, a failover); None while subscribing is failing."""
        if not self._markers:
            return None
        subscriber = self._subscriber
        backend = get_backend()
        channel = changes_channel()
        try:
            address = backend.subscriber_address(self._markers[0][0]())
        except BackendError:
            return subscriber  # no master named just now: the one listened to may still be it
        if subscriber is not None:
            if (
                self._subscribed_on is backend
                and subscriber.address == address
                and subscriber.channel == channel.encode()
            ):
                return subscriber
            # Another node (a failover) is a gap; other settings end what was remembered anyway.
            self._drop_subscriber(gap=self._subscribed_on is backend)
        if time.monotonic() < self._subscribe_at:
            return None
        try:
            subscriber = backend.subscribe(channel, address)
        except BackendError as exc:
            self._failed()
            self._gap = True
            self._warn(
                "subscriber",
                "throttling: could not subscribe to the change channel (%s); changes arrive with the markers "
                "read every THROTTLING_POLICY_REFRESH seconds meanwhile",
                exc,
            )
            return None
        if self._gap:
            # Messages sent while there was none are lost; those on the new one are read from now on.
            for _, on_gap in self._hearers.values():
                on_gap()
            self._gap = False
        self._subscriber, self._subscribed_on = subscriber, backend
        return subscriber

    def _failed(self):
        self._subscribe_pause = min(max(2 * self._subscribe_pause, SUBSCRIBE_RETRY), SUBSCRIBE_RETRY_MOST)
        self._subscribe_at = time.monotonic() + self._subscribe_pause

    def _drop_subscriber(self, gap=True):
        subscriber, self._subscriber = self._subscriber, None
        if subscriber is not None:
            self._gap = self._gap or gap
            subscriber.close()

    def look(self, now=None, *, markers=False):
        """One look: the markers when THROTTLING_POLICY_REFRESH seconds have passed (or `markers`),
        the registered tasks, the undo of timed-out decisions, the eviction watch when it is due."""
        now = time.monotonic() if now is None else now
        if markers or now - self._read_at >= settings.POLICY_REFRESH - TOLERANCE:
            self._read_at = now
            self._read_markers()
        self._run_tasks()
        if in_doubt.entries:
            in_doubt.settle()
        eviction_watch.look_if_due(now)

    def _read_markers(self):
        if not self._markers:
            return
        keys = [key() for key, _ in self._markers]
        try:
            values = get_backend().mget(*keys)
        except BackendError as exc:
            # The cached state stays in force and the markers are read again at the next look
            # (see Architecture › Policies in every process).
            self._warn(
                "markers",
                "throttling: could not read the change markers (%s); the cached policies stay in force "
                "and the markers are read again at the next look",
                exc,
            )
            return
        for (_, on_read), value in zip(self._markers, values):
            on_read(value)

    def _run_tasks(self):
        for task in self._tasks:
            try:
                task()
            except BackendError as exc:
                self._warn(
                    task, "throttling: %s could not reach Redis (%s); tried at the next look", task.__qualname__, exc
                )

    def _warn(self, what, message, *args, **kwargs):
        now = time.monotonic()
        if now - self._warned_at.get(what, -LOG_EVERY) >= LOG_EVERY:
            self._warned_at[what] = now
            logger.warning(message, *args, **kwargs)


poller = Poller()

UNREAD = object()  # a marker's value before any read of it


def bump(key):
    """Move the marker `key()` names and publish its new value on the change channel
    (bump_marker.lua): that value as the markers' reads and messages give it. BackendError when
    Redis cannot be reached."""
    return b"%d" % get_backend().bump(key(), changes_channel())


def announce(cache, key, change):
    """Move the marker `key()` names after a save made in this process, so that every process reads
    the rows again: its new value is `cache`'s own save's (see out_of_date()). A Redis that cannot be
    reached is logged, naming the `change`; the other processes then pick it up within
    THROTTLING_POLICY_MAX_AGE seconds."""
    try:
        # Seen as read: a marker lost with Redis later (a flush, a restart) is a change too.
        cache._seen = cache._own = bump(key)
    except BackendError as exc:
        logger.warning(
            "throttling: %s could not be announced (%s); other processes pick it up within "
            "THROTTLING_POLICY_MAX_AGE seconds",
            change,
            exc,
        )


def out_of_date(cache, version, pushed):
    """Whether a read of `cache`'s change marker (or, `pushed`, a message of the change channel) leaves
    the rows it loaded out of date: any message does, and a value other than the one they were loaded
    at (a save elsewhere, or the marker lost with Redis); the message of this process's own save does
    not, when a load since already read what was saved. `cache` keeps the value its rows were loaded
    at in `_version`, and the value its own last save gave the marker in `_own` until that message
    comes back."""
    if pushed and version == cache._own:
        # The message of this process's own save: it cleared its cache then, and a reload since
        # (a decision in between) already read what was saved. Reloading again for it would
        # only repeat that read, from whatever process (or forked child) decides next.
        cache._own = None
        if version == cache._version:
            return False
    return pushed or version != cache._version
