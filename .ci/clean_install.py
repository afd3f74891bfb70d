"""Run by .ci/run in fresh virtualenvs, each holding only the package as a user installs it.

    python clean_install.py full   # `pip install ".[django-redis,drf,celery,metrics]"`: a member crossing the
                                   # offence threshold sends the app's escalation over a Redis broker,
                                   # and the Prometheus counters say what was decided
    python clean_install.py base   # `pip install .`, no extras: THROTTLING_REDIS_URL alone, no
                                   # django-redis, DRF or Celery; a policy admits up to its limit, then refuses

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


def start_redis():
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    return port, server


def wait_for_redis(port):
    import redis

    client = redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            return
        except redis.ConnectionError:
            time.sleep(0.05)
    raise SystemExit(f"redis-server on port {port} did not answer")


def base():
    """The package alone: decisions need nothing but Django, redis-py (and hiredis) and a Redis URL."""
    import importlib.util

    extras = [
        name
        for name in ("django_redis", "rest_framework", "celery", "prometheus_client")
        if importlib.util.find_spec(name)
    ]
    assert not extras, f"a bare install should not bring {extras}"
    workdir = tempfile.mkdtemp(prefix="throttling-clean-install-")
    port, server = start_redis()
    try:
        wait_for_redis(port)
        import django
        from django.conf import settings

        settings.configure(
            INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes", "throttling"],
            DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{workdir}/db.sqlite3"}},
            THROTTLING_REDIS_URL=f"redis://127.0.0.1:{port}/0",
            USE_TZ=True,
        )
        django.setup()

        import hiredis  # noqa: F401  (installed with the package: the fast reply parser)
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        import throttling
        from throttling.models import ActionPolicy

        call_command("migrate", verbosity=0)
        call_command("check")
        # The second refusal crosses the offence threshold: without Celery the escalation is not
        # sent (system check W002 says so), and the refusal stands.
        ActionPolicy.objects.create(action="post", period=60, max_count=3, offence_threshold=2)
        member = get_user_model().objects.create_user("member", password="pw")
        decisions = [throttling.check(member, "post") for _ in range(5)]
        allowed = [d.allowed for d in decisions]
        assert allowed == [True, True, True, False, False], decisions
        assert throttling.peek(member, "post").allowed is False
        print(f"clean install (no extras): THROTTLING_REDIS_URL alone decides: {allowed}")
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


def full():
    workdir = tempfile.mkdtemp(prefix="throttling-clean-install-")
    port, server = start_redis()
    try:
        wait_for_redis(port)
        import django
        import redis
        from django.conf import settings

        settings.configure(
            INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes", "rest_framework", "throttling"],
            DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{workdir}/db.sqlite3"}},
            CACHES={"default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": f"redis://127.0.0.1:{port}/0"}},
            USE_TZ=True,
            THROTTLING_METRICS=True,
        )
        from celery import Celery

        app = Celery("clean_install", broker=f"redis://127.0.0.1:{port}/1")
        app.set_current()
        django.setup()

        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        import throttling
        from throttling.checks import check_celery_broker
        from throttling.engine.background.task_sender import sender
        from throttling.models import ActionPolicy

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
        import hiredis  # noqa: F401  (installed with the package: the fast reply parser)

        print(f"clean install: the escalation reached the Redis broker ({len(tasks)} message(s): {tasks})")
        from prometheus_client import REGISTRY

        counted = {
            result: REGISTRY.get_sample_value("throttling_decisions_total", {"action": "flag", "result": result})
            for result in ("admitted", "throttled")
        }
        assert counted == {"admitted": 1.0, "throttled": 2.0}, counted
        print(f"clean install: the metrics counted the decisions ({counted})")
        from throttling.engine.offences import report_batches as history

        history.buffer.discard()  # the offence batch is not under test; nothing to send at exit
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv):
    modes = {"full": full, "base": base}
    mode = argv[1] if len(argv) > 1 else "full"
    if mode not in modes or len(argv) > 2:
        raise SystemExit(f"usage: {argv[0]} [{'|'.join(modes)}]")
    return modes[mode]()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
