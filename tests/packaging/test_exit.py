"""Leaving the process: nothing printed at interpreter exit, and what waits for Celery still goes.

Since Python 3.12 no thread can be started once the interpreter is shutting down, so an
atexit callback that starts one ends every command with "Exception ignored in atexit
callback". These run real processes under the interpreter running the tests.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(args, tmp_path, **env):
    environ = {**os.environ, "DEMO_DIR": str(tmp_path / "demo"), **env}
    environ.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120)


def test_manage_py_check_exits_quietly(tmp_path):
    result = run(["manage.py", "check"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout
    assert "Exception ignored" not in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr


# A process that ends with offences still buffered, before any sender thread was started:
# the buffer's flush at exit queues the batch, and the sender sends it without a thread.
LATE_SEND = textwrap.dedent(
    """
    import django
    from django.conf import settings

    settings.configure(
        INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes", "throttling"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        THROTTLING_REDIS_URL="redis://127.0.0.1:1/0",
        THROTTLING_OFFENCE_FLUSH_INTERVAL=3600,
        USE_TZ=True,
    )
    django.setup()

    from throttling.engine import history


    class App:
        def send_task(self, name, args, **options):
            print("sent", name, len(args[0]), flush=True)


    history.current_celery_app = App
    history.buffer.add("user:1", 1, "flag")
    history.buffer.add("user:2", 2, "flag")
    print("exiting", flush=True)
    """
)


def test_offences_buffered_at_exit_are_sent_quietly(tmp_path):
    result = run(["-c", LATE_SEND], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["exiting", "sent throttling.tasks.record_offences 2"], result.stdout
    assert "Exception ignored" not in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
