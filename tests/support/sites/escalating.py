"""A web process for tests/penalties/test_broker_faults.py, and the resync run after a broker fault.

`python -m tests.support.sites.escalating cross ACTION USER_ID...` refuses each member until an
escalation is queued, prints how many were, and exits normally with whatever its sender thread still
holds. `python -m tests.support.sites.escalating resync` runs `throttling_resync`. Both read
THROTTLING_TEST_REDIS_URL, THROTTLING_TEST_BROKER_URL and THROTTLING_TEST_DB_NAME (the test's
Redis, broker and database) and THROTTLING_TEST_RESEND_AFTER, when set, as
THROTTLING_ESCALATION_RESEND_AFTER.
"""

import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")


def main(command, *rest):
    import django
    from django.conf import settings

    if os.environ.get("THROTTLING_TEST_RESEND_AFTER"):
        settings.THROTTLING_ESCALATION_RESEND_AFTER = int(os.environ["THROTTLING_TEST_RESEND_AFTER"])
    django.setup()
    import tests.support.processes.celery_app  # noqa: F401  (the suite's Celery app, on THROTTLING_TEST_BROKER_URL)

    if command == "resync":
        from django.core.management import call_command

        call_command("throttling_resync")
        return
    from django.contrib.auth import get_user_model

    from tests.support.penalties import spam_until_escalated

    action, user_ids = rest[0], [int(pk) for pk in rest[1:]]
    escalated = 0
    for user in get_user_model().objects.filter(pk__in=user_ids).order_by("pk"):
        spam_until_escalated(user, action)
        escalated += 1
    print(escalated, flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
