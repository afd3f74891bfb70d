"""A separate process for the tests of what other processes see: reports each change in what it is told about an action.

Run as `python -m tests.support.processes.policy_worker ACTION WHO` with THROTTLING_TEST_REDIS_URL and
THROTTLING_TEST_DB_NAME pointing at the test's Redis and database. WHO is an identity string,
"user:<pk>" for a member, or "addr:<IP address>" for a visitor's request from that address. Once its
background thread has subscribed to the change channel, it peeks every 10 ms and prints
"<time> <limit> <remaining> <reason>" at every change of those three.
"""

import os
import sys
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")


def main(action, who):
    import django

    django.setup()
    import throttling

    if who.startswith("user:"):
        from django.contrib.auth import get_user_model

        who = get_user_model().objects.get(pk=int(who.removeprefix("user:")))
    elif who.startswith("addr:"):
        from django.contrib.auth.models import AnonymousUser
        from django.test import RequestFactory

        who = RequestFactory().post("/", REMOTE_ADDR=who.removeprefix("addr:"))
        who.user = AnonymousUser()
    from throttling.engine.background.poller import poller

    # Nothing is reported before this process's background thread has subscribed to the change channel
    # (or 10 s have passed): the tests time what a running process hears of a change made after its
    # first report. A change made while a process is still starting can wait for its first read of the
    # markers, up to THROTTLING_POLICY_REFRESH seconds later.
    throttling.peek(who, action)  # the first decision starts the background thread
    subscribing = time.monotonic() + 10
    while poller._subscriber is None and time.monotonic() < subscribing:
        time.sleep(0.01)
    seen = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        d = throttling.peek(who, action)
        state = (d.limit, d.remaining, d.reason)
        if state != seen:
            seen = state
            print(f"{time.time():.3f} {d.limit} {d.remaining} {d.reason}", flush=True)
        time.sleep(0.01)


if __name__ == "__main__":
    main(*sys.argv[1:3])
