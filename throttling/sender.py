"""Sends the app's Celery tasks from a background thread, so no request waits for the broker."""

import atexit
import logging
import os
import queue
import threading
import time

from .conf import settings

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
        atexit.register(self.join, 5)

    def _reset(self):
        self._queue = queue.Queue()
        self._thread = None
        self._lock = threading.Lock()

    def send(self, name, args, on_error=None, app=None):
        """Queue `name(*args)` for Celery; `on_error(exc)` runs (in the thread) if it cannot be sent.

        `app` defaults to the Celery app current in the calling thread.
        """
        app = app or current_celery_app()
        if app is None:
            return  # no Celery installed (system check W002)
        self._queue.put((app, name, args, on_error))
        if self._thread is None or not self._thread.is_alive():
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    thread = threading.Thread(target=self._run, name="throttling-sender", daemon=True)
                    try:
                        thread.start()
                    except RuntimeError:  # no thread starts at interpreter exit (3.12+): join() sends it
                        return
                    self._thread = thread

    def join(self, timeout=None):
        """Wait until everything queued so far has been sent or has failed; True if it has.

        Starts no thread: it runs at exit (atexit), when Python 3.12+ refuses to start one.
        What no sender thread will send (none could be started) is sent here, in order.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        done = self._queue.all_tasks_done
        while True:
            with done:
                if not self._queue.unfinished_tasks:
                    return True
                if self._thread is not None and self._thread.is_alive():
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    done.wait(remaining)
                    continue
            if deadline is not None and time.monotonic() >= deadline:
                return False
            try:
                item = self._queue.get_nowait()
            except queue.Empty:  # taken by a sender thread started meanwhile
                continue
            self._send(*item)

    def _run(self):
        while True:
            self._send(*self._queue.get())

    def _send(self, app, name, args, on_error):
        try:
            app.send_task(name, args=args, queue=settings.CELERY_QUEUE, retry=False)
        except Exception as exc:  # the broker's errors come in many classes (kombu, redis, OSError)
            logger.error("throttling: could not send %s to Celery: %s", name, exc)
            if on_error is not None:
                try:
                    on_error(exc)
                except Exception:
                    logger.exception("throttling: clean-up after a failed send of %s failed", name)
        finally:
            self._queue.task_done()


def current_celery_app():
    """The Celery app current in the calling thread; None when Celery is not installed.

    Celery is an extra: without it nothing is sent (system check W002 says what is lost).
    """
    global _celery_missing
    if _celery_missing:
        return None
    try:
        from celery import current_app
    except ImportError:
        _celery_missing = True  # a failed import is not cached by Python, and costs every refusal
        return None
    return current_app._get_current_object()


_celery_missing = False

sender = Sender()
