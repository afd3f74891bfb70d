"""Run by .ci/run in a fresh virtualenv holding only `pip install ".[redis,drf,celery]"`:
a member crossing the offence threshold sends the app's escalation over a Redis broker.

It starts its own redis-server on a free loopback port and stops it; it never touches another.
"""

import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main():
    workdir = tempfile.mkdtemp(prefix="throttling-clean-install-")
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    try:
        import redis

        client = redis.Redis(port=port)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)

        import django
        from django.conf import settings

        settings.configure(
            INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes", "rest_framework", "throttling"],
            DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{workdir}/db.sqlite3"}},
            CACHES={"default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": f"redis://127.0.0.1:{port}/0"}},
            USE_TZ=True,
        )
        from celery import Celery

        app = Celery("clean_install", broker=f"redis://127.0.0.1:{port}/1")
        app.set_current()
        django.setup()

        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        import throttling
        from throttling.checks import check_celery_broker
        from throttling.models import ActionPolicy
        from throttling.sender import sender

        call_command("migrate", verbosity=0)
        assert check_celery_broker() == [], check_celery_broker()
        ActionPolicy.objects.create(action="flag", period=60, max_count=1, offence_threshold=2)
        member = get_user_model().objects.create_user("member", password="pw")
        decisions = [throttling.check(member, "flag") for _ in range(3)]
        assert [d.allowed for d in decisions] == [True, False, False], decisions
        assert decisions[-1].escalated, decisions
        sender.join(timeout=20)
        broker = redis.Redis(port=port, db=1)
        for _ in range(200):
            if broker.llen("celery"):
                break
            time.sleep(0.05)
        messages = [json.loads(raw) for raw in broker.lrange("celery", 0, -1)]
        tasks = [m["headers"]["task"] for m in messages]
        assert "throttling.tasks.escalate_offender" in tasks, tasks
        import hiredis  # noqa: F401  (the redis extra brings the fast parser)

        print(f"clean install: the escalation reached the Redis broker ({len(tasks)} message(s): {tasks})")
        from throttling import history

        history.buffer.discard()  # the offence batch is not under test; nothing to send at exit
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
