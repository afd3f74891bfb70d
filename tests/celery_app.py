"""The suite's Celery app. Its broker is the suite's own Redis (db 1), set by tests/conftest.py;
a worker process started by a test reads THROTTLING_TEST_REDIS_URL instead."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

app = Celery("tests")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["throttling"])
