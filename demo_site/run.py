"""`make demo`: a throwaway Redis, a migrated and seeded SQLite database, then runserver until Ctrl-C.

    python -m demo_site.run

Environment: DEMO_ADDR (default 127.0.0.1:8000), DEMO_DIR (default ./.demo),
DEMO_REDIS_URL (use that Redis and start none), DEMO_DEBUG (default on).
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from . import DEMO_ADMIN, DEMO_MEMBERS, DEMO_PASSWORD
from .redis_server import RedisServer

BASE_DIR = Path(__file__).resolve().parent.parent
MANAGE = str(BASE_DIR / "manage.py")
STOP_TIMEOUT = 10


def say(text=""):
    print(text, flush=True)


def manage(env, *args):
    subprocess.run([sys.executable, MANAGE, *args], env=env, cwd=BASE_DIR, check=True)


def spawn(env, *args):
    # Its own session: the terminal's Ctrl-C reaches this script, which then
    # signals each child exactly once (a Celery worker that got two signals
    # would cut its warm shutdown short).
    return subprocess.Popen([sys.executable, *args], env=env, cwd=BASE_DIR, start_new_session=True)


def stop(name, process):
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        say(f"{name} did not stop within {STOP_TIMEOUT} s; killing it")
        process.kill()
        process.wait()


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main():
    # Ctrl-C, `kill` and a closed terminal all end the same way: children stopped,
    # Redis gone. SIGINT is set explicitly because a shell that starts us in the
    # background (`make demo &` in a script) leaves it ignored.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)

    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "demo_site.settings")
    env["PYTHONUNBUFFERED"] = "1"
    addr = env.get("DEMO_ADDR", "127.0.0.1:8000")
    redis = None
    children = []  # (name, Popen), stopped in reverse order
    try:
        if env.get("DEMO_REDIS_URL"):
            redis_line = f"{env['DEMO_REDIS_URL']} (from DEMO_REDIS_URL; not started or stopped here)"
        else:
            redis = RedisServer().start()
            env["DEMO_REDIS_URL"] = redis.url
            redis_line = f"{redis.url} (throwaway redis-server, pid {redis.pid}; stopped on exit)"
        say(f"Redis     {redis_line}")

        say("Database  migrating…")
        manage(env, "migrate", "--noinput", "--verbosity", "0")
        manage(env, "demo_seed", "--password", DEMO_PASSWORD)

        # --noreload: one process per child to stop. --insecure: the admin keeps
        # its CSS when DEMO_DEBUG=0 (runserver serves static files only in DEBUG).
        children.append(("web", spawn(env, MANAGE, "runserver", "--noreload", "--insecure", addr)))
        # Later issues start the background side here, e.g.
        #   children.append(("worker", spawn(env, "-m", "celery", "-A", "demo_site", "worker")))
        #   children.append(("beat", spawn(env, "-m", "celery", "-A", "demo_site", "beat")))

        url = f"http://{addr}/"
        say()
        say("=" * 64)
        say(f"  Demo community   {url}")
        say(f"  Admin            {url}admin/")
        say(f"  Accounts         {DEMO_ADMIN} (staff, exempt from limits), {', '.join(DEMO_MEMBERS)}")
        say(f"  Password         {DEMO_PASSWORD}   (the same for all three)")
        say("  Ctrl-C stops the server and Redis.")
        say("=" * 64)
        say()

        while True:
            for name, process in children:
                if process.poll() is not None:
                    say(f"{name} exited with status {process.returncode}; stopping the demo")
                    return process.returncode or 1
            time.sleep(0.5)
    except KeyboardInterrupt:
        say("\nStopping the demo…")
        return 0
    except subprocess.CalledProcessError as exc:
        say(f"`manage.py {' '.join(exc.cmd[2:])}` failed with status {exc.returncode}")
        return exc.returncode or 1
    finally:
        # A second Ctrl-C must not cut the clean-up short and orphan Redis.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for name, process in reversed(children):
            stop(name, process)
        if redis is not None:
            redis.stop()


if __name__ == "__main__":
    sys.exit(main())
