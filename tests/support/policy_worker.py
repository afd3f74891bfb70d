"""A separate process for tests/engine/test_policy_cache.py: reports the limit it sees for an action as it changes.

Run as `python -m tests.support.policy_worker ACTION IDENTITY` with THROTTLING_TEST_REDIS_URL and
THROTTLING_TEST_DB_NAME pointing at the test's Redis and database.
"""

import os
import sys
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")


def main(action, identity):
    import django

    django.setup()
    import throttling

    seen = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        d = throttling.peek(identity, action)
        state = (d.limit, d.remaining)
        if state != seen:
            seen = state
            print(f"{time.time():.3f} {d.limit} {d.remaining}", flush=True)
        time.sleep(0.01)


if __name__ == "__main__":
    main(*sys.argv[1:3])
