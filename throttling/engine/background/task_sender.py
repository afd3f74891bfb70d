"""Sends the app's Celery tasks from a background thread, so no request waits for the broker."""

import atexit
import logging
import os
import queue
import threading
import time

from ...conf import settings

try:
    from celery import current_app as _celery_app
except ImportError:  # Celery is optional; system check W002 says what this costs
    _celery_app = None

logger = logging.getLogger("throttling")


class Sender:
    """One daemon thread per process that publishes tasks by name, in order.

    Even with retry=False, kombu keeps trying to connect to a broker that is
    down for seconds (broker_connection_timeout and its own retries); a refused
    request must not wait for that. The Celery app is taken in the caller's
    thread (Celery's current app is thread-local) and used by the thread.
    """

    def __init__(self):
        self._reset()
        os.register_at_fork(after_in_child=self._reset)
        atexit.register(self.at_exit)

    def _reset(self):
        self._queue = queue.Queue()
        self._thread = None
        self._lock = threading.Lock()
        self._current = None

    def send(self, name, args, on_error=None, app=None, before=None, on_sent=None):
        """Queue `name(*args)` for Celery; `on_error(exc)` runs (in the thread) if it cannot be sent.
        With THROTTLING_PENALTIES off nothing is sent at all.

        `app` defaults to the Celery app current in the calling thread. In the
        thread, `before()` runs first and a false answer skips the send (somebody
        else sent it); `on_sent()` runs once the broker has taken the task.
        """
        if not settings.PENALTIES:
            # A site that turned penalties off runs without Celery: nothing is sent, and nothing is
            # said about it (the site asked for it).
            return
        app = app or current_celery_app()
        if app is None:
            _warn_no_celery(name)
            if on_error is not None:
                on_error(RuntimeError("Celery is not installed"))
            return
        self._queue.put(_Item(app, name, args, on_error, before, on_sent))
        if self._thread is None or not self._thread.is_alive():
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    thread = threading.Thread(target=self._run, name="throttling-sender", daemon=True)
                    try:
                        thread.start()
                    except RuntimeError:
                        # At interpreter exit no thread may start: send what waits here.
                        self._drain()
                        return
                    self._thread = thread

    def join(self, timeout=None):
        """Wait until everything queued so far has been sent or has failed; True if it has.

        Waits on the queue's own condition, starting no thread: this also runs
        at interpreter exit, when no new thread may start.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        q = self._queue
        with q.all_tasks_done:
            while q.unfinished_tasks:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                q.all_tasks_done.wait(left)
        return True

    def at_exit(self, timeout=5):
        """At interpreter exit: wait up to `timeout` s for what is queued, then give up the rest.

        A broker that is down holds each send for seconds, longer than an exiting
        process should wait. What is still queued, and the send in hand, are not
        sent: their `on_error` runs here, so their owners can leave them for
        another process (escalations wait in Redis for the next resync).
        """
        if self.join(timeout):
            return
        abandoned = [self._current] if self._current is not None else []
        while True:
            try:
                abandoned.append(self._queue.get_nowait())
            except queue.Empty:
                break
            self._queue.task_done()
        exc = RuntimeError("the process exited before the broker took it")
        for item in abandoned:
            logger.error("throttling: %s not sent: the process is exiting", item.name)
            item.failed(exc)

    def _run(self):
        while True:
            self._send(self._queue.get())

    def _drain(self):
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            self._send(item)

    def _send(self, item):
        self._current = item
        try:
            if item.before is not None and not item.before():
                return
            item.app.send_task(item.name, args=item.args, queue=settings.CELERY_QUEUE, retry=False)
        except Exception as exc:  # the broker's errors come in many classes (kombu, redis, OSError)
            logger.error("throttling: could not send %s to Celery: %s", item.name, exc)
            item.failed(exc)
        else:
            if item.on_sent is not None:
                try:
                    item.on_sent()
                except Exception:
                    logger.exception("throttling: book-keeping after sending %s failed", item.name)
        finally:
            self._current = None
            self._queue.task_done()


class _Item:
    """One task waiting for the sender thread, with what its owner wants done around the send."""

    __slots__ = ("app", "name", "args", "on_error", "before", "on_sent")

    def __init__(self, app, name, args, on_error, before, on_sent):
        self.app, self.name, self.args = app, name, args
        self.on_error, self.before, self.on_sent = on_error, before, on_sent

    def failed(self, exc):
        if self.on_error is not None:
            try:
                self.on_error(exc)
            except Exception:
                logger.exception("throttling: clean-up after a failed send of %s failed", self.name)


def current_celery_app():
    """The Celery app current in this thread, or None when Celery is not installed."""
    return None if _celery_app is None else _celery_app._get_current_object()


_warned = []


def _warn_no_celery(name):
    if not _warned:
        _warned.append(True)
        logger.warning("throttling: Celery is not installed; %s and later tasks are not sent", name)


sender = Sender()
