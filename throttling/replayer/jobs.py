"""Replays too large to answer within a request: run by a Celery task, their progress and result kept in
Redis for an hour under a random job id, so the admin page can show how far they got."""

import json
import logging
import time
import uuid
from datetime import datetime

from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError
from django.utils.translation import gettext

from ..backends.redis import get_backend
from ..conf import settings
from ..engine.background.task_sender import current_celery_app
from .whatif import what_if

logger = logging.getLogger("throttling")

TASK = "throttling.tasks.replay_history"
KEEP = 3600  # seconds a job's record stays in Redis
QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"


class NotStarted(Exception):
    """The replay could not be handed to Celery; its message says why, in words a moderator reads."""


def key(job):
    return f"{settings.KEY_PREFIX}:replay:{job}"


def save(job, record):
    get_backend().set(key(job), json.dumps(record), KEEP)


def load(job):
    """The job's record ({"state", "done", "total", "result" or "error", …}), or None once it is gone."""
    raw = get_backend().get(key(job))
    return json.loads(raw) if raw else None


def start(arguments, total):
    """Record a job for what_if(**arguments) over `total` rows and send it to Celery; returns its id.

    `arguments` carries only what JSON can (action, windows, algorithm, since/until as ISO text,
    members): the task receives the job's id, and reads them back from here.
    """
    if not settings.PENALTIES:
        # A site that turned penalties off runs without Celery: nothing is sent to it.
        raise NotStarted(
            gettext(
                "A history this long is replayed in the background by Celery, and THROTTLING_PENALTIES = False "
                "sends nothing to Celery: replay fewer days."
            )
        )
    app = current_celery_app()
    if app is None:
        raise NotStarted(gettext("Celery is not installed, and a history this long is replayed in the background."))
    job = uuid.uuid4().hex
    save(job, {"state": QUEUED, "done": 0, "total": total, "queued_at": time.time(), "arguments": arguments})
    try:
        app.send_task(TASK, args=[job], queue=settings.CELERY_QUEUE, retry=False)
    except Exception as exc:  # the broker's own errors are as many as its transports
        get_backend().delete(key(job))
        raise NotStarted(gettext("Celery could not take the replay (%(error)s).") % {"error": exc})
    return job


def run(job):
    """The task's work: replay, reporting progress, and keep the result (or the reason there is none).

    A job already finished is left as it is, so a message delivered twice does not replay twice.
    """
    record = load(job)
    if record is None or record["state"] in (DONE, FAILED):
        return record and record["state"]
    record.update(state=RUNNING, started_at=time.time())
    save(job, record)

    def progress(done):
        record["done"] = done
        save(job, record)

    arguments = dict(record["arguments"])
    for name in ("since", "until"):
        if arguments.get(name):
            arguments[name] = datetime.fromisoformat(arguments[name])
    try:
        result = what_if(**arguments, progress=progress)
    except (ValueError, ImproperlyConfigured, DatabaseError) as exc:
        logger.warning("throttling: the replay of %r failed: %s", arguments.get("action"), exc)
        record.update(state=FAILED, error=str(exc))
    except BaseException:
        # Whatever else stops it, the page waiting for this job must hear that it ended.
        record.update(state=FAILED, error=gettext("The replay failed; the Celery worker's log says why."))
        save(job, record)
        raise
    else:
        record.update(state=DONE, done=result.rows, result=result.as_dict())
    save(job, record)
    return record["state"]
