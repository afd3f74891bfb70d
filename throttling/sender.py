"""Sends the app's Celery tasks from a background thread, so no request waits for the broker."""

import atexit
import logging
import os
import queue
import threading

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
        self._queue.put((app or current_celery_app(), name, args, on_error))
        if self._thread is None or not self._thread.is_alive():
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._run, name="throttling-sender", daemon=True)
                    self._thread.start()

    def join(self, timeout=None):
        """Wait until everything queued so far has been sent or has failed; True if it has."""
        done = threading.Event()
        thread = threading.Thread(target=lambda: (self._queue.join(), done.set()), daemon=True)
        thread.start()
        return done.wait(timeout)

    def _run(self):
        while True:
            app, name, args, on_error = self._queue.get()
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
    from celery import current_app

    return current_app._get_current_object()


sender = Sender()
