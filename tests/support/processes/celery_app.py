"""The suite's Celery app. Its broker is the suite's own Redis (db 1), set by tests/conftest.py;
a worker process started by a test reads THROTTLING_TEST_REDIS_URL instead.

A worker started by the suite also prints a line for every penalty signal it sends
(SIGNAL_MARK, read back by tests/support/processes/celery_worker.py), since signals sent in the worker
never reach the test process. With THROTTLING_TEST_DIE_AFTER_COMMIT set, the worker
SIGKILLs itself when it sends penalty_applied: the penalty row is committed, but the
Redis mirror is not written and the message not acknowledged (a worker lost mid-task).
"""

import os
import signal

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

SIGNAL_MARK = "[throttling-test-signal]"

app = Celery("tests")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["throttling"])
# INSTALLED_APPS loads demo_site, whose Celery app came first and so is the
# default of every thread but this one; tasks sent from other threads (a test's
# thread pool, the offence buffer's timer) must use this app and its broker too.
app.set_default()
# kombu sweeps unacknowledged messages back into their queue only every
# interval x throttle seconds (100 s by default); with these a message whose
# worker died is delivered again within a second or so after the visibility
# timeout, so a test can wait for it.
app.conf.broker_transport_options = {
    **app.conf.broker_transport_options,
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
}


def _report(kind):
    def receiver(sender, penalty, **kwargs):
        print(f"{SIGNAL_MARK} {kind} {penalty.pk} {penalty.crossing or '-'}", flush=True)

    return receiver


def _die(sender, penalty, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)


@worker_init.connect
def _connect_test_receivers(**kwargs):
    from throttling import signals

    for kind in ("penalty_applied", "penalty_lifted", "penalty_expired"):
        getattr(signals, kind).connect(_report(kind), weak=False, dispatch_uid=f"throttling-test-{kind}")
    if os.environ.get("THROTTLING_TEST_DIE_AFTER_COMMIT"):
        # Connected after the reporter, so the signal is seen before the worker dies.
        signals.penalty_applied.connect(_die, weak=False, dispatch_uid="throttling-test-die")
