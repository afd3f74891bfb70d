"""Offence history for the report: counted in process, handed to Celery in batches."""

import atexit
import logging
import os
import threading
import time
from collections import Counter
from datetime import UTC, datetime

from django.db import DataError, IntegrityError, transaction
from django.db.models import F

from ...conf import settings
from ...models import OffenceRecord
from ..background.task_sender import current_celery_app, sender

logger = logging.getLogger("throttling")

RECORD_TASK = "throttling.tasks.record_offences"


class OffenceBuffer:
    """Refused attempts per (identity, member, action, hour), waiting to be stored.

    A refusal costs a dict update here; the database sees one row per identity,
    action and hour per batch, written by a Celery task, never one write per
    refused request. A batch is sent when THROTTLING_OFFENCE_FLUSH_SIZE
    rows wait or THROTTLING_OFFENCE_FLUSH_INTERVAL seconds after its first
    offence, by a short-lived timer thread so an idle process still sends it.
    What a process holds when it is killed is lost: these are statistics,
    never the enforcement, which lives in Redis.
    """

    def __init__(self):
        self._reset()
        os.register_at_fork(after_in_child=self._reset)
        atexit.register(self.flush)

    def _reset(self):
        self._lock = threading.Lock()
        self._rows = Counter()
        self._timer = None
        self._app = None

    def add(self, identity, user_id, action, when=None, shadow=False, blocked=False, duplicate=False):
        if not settings.PENALTIES:
            return  # without penalties nothing goes to Celery: no history is kept to send
        hour = int((when or time.time()) // 3600 * 3600)
        with self._lock:
            self._rows[(identity, user_id, action, hour, shadow, blocked, duplicate)] += 1
            full = len(self._rows) >= settings.OFFENCE_FLUSH_SIZE
            if self._app is None:
                self._app = current_celery_app()
            if not full and self._timer is None:
                self._timer = threading.Timer(settings.OFFENCE_FLUSH_INTERVAL, self.flush)
                self._timer.daemon = True
                self._timer.start()
        if full:
            self.flush()

    def discard(self):
        """Drop what is waiting (tests; a process that must not report)."""
        with self._lock:
            self._rows = Counter()
            self._app = None
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def pending(self):
        with self._lock:
            return sum(self._rows.values())

    def batch(self):
        """What waits, as flush() would hand it to the task (store()'s rows), without taking it."""
        with self._lock:
            return batch_of(self._rows)

    def flush(self):
        """Hand what is waiting to Celery now (through the sender thread); returns how many offences."""
        with self._lock:
            # Each batch goes with the app current at its first offence.
            rows, self._rows = self._rows, Counter()
            app, self._app = self._app, None
            timer, self._timer = self._timer, None
        if timer is not None and timer is not threading.current_thread():
            timer.cancel()
        if not rows:
            return 0
        # The app current where the offences happened, not the timer thread's.
        sender.send(RECORD_TASK, (batch_of(rows),), app=app)
        return sum(rows.values())


def batch_of(rows):
    """The task's rows of buffered counts. A sixth element only for shadow, blocked and duplicate rows,
    a seventh only for blocked and duplicate ones, an eighth only for refusals of repeated content: a
    worker of an earlier release reads the rows it knows as before."""
    batch = []
    for (identity, user_id, action, hour, shadow, blocked, duplicate), n in rows.items():
        row = [identity, user_id, action, hour, n]
        if duplicate:
            row += [shadow, blocked, True]
        elif blocked:
            row += [shadow, True]
        elif shadow:
            row.append(True)
        batch.append(row)
    return batch


buffer = OffenceBuffer()


def store(batch):
    """Add a batch of [identity, user_id, action, hour_epoch, count(, shadow(, blocked(, duplicate)))] rows to
    OffenceRecord.

    One UPDATE per row, and an INSERT for a row not seen yet; a concurrent
    batch that inserted the same row first turns the INSERT into an UPDATE.
    """
    stored = 0
    for identity, user_id, action, hour, count, *rest in batch:
        shadow = bool(rest and rest[0])
        blocked = bool(len(rest) > 1 and rest[1])
        duplicate = bool(len(rest) > 2 and rest[2])
        moment = datetime.fromtimestamp(int(hour), tz=UTC)
        rows = OffenceRecord.objects.filter(
            identity=identity, action=action, hour=moment, shadow=shadow, blocked=blocked, duplicate=duplicate
        )
        try:
            with transaction.atomic():
                if not rows.update(count=F("count") + count):
                    try:
                        with transaction.atomic():
                            OffenceRecord.objects.create(
                                identity=identity,
                                user_id=user_id,
                                action=action,
                                hour=moment,
                                count=count,
                                shadow=shadow,
                                blocked=blocked,
                                duplicate=duplicate,
                            )
                    except IntegrityError:
                        rows.update(count=F("count") + count)
        except DataError as exc:
            # A row no column can hold (identities are bounded, so only a
            # hand-made batch gets here) is skipped; the rest of the batch is kept.
            logger.error("throttling: offence row %r for %r not stored: %s", identity, action, exc)
            continue
        stored += count
    return stored
