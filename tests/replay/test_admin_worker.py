"""A history too long to replay within a request: "What would this do?" hands it to a real Celery worker,
shows its progress, then the same figures an inline replay gives."""

import json
import re
import time
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

import throttling
from tests.support.history import HISTORY, US, micro, write_history
from throttling.admin.report.queries import Period
from throttling.admin.whatif.views import INLINE_ROWS

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

URL = "admin:throttling_actionpolicy_whatif"
QUEUE = "replays"


def text(response):
    return re.sub(r"\s+", " ", response.content.decode())


def test_a_long_history_is_replayed_by_a_celery_worker_whose_progress_the_page_shows(
    start_worker, settings, django_user_model, client, policy
):
    settings.THROTTLING_HISTORY = HISTORY
    settings.THROTTLING_CELERY_QUEUE = QUEUE
    start_worker([QUEUE], env={"THROTTLING_TEST_HISTORY": json.dumps(HISTORY)}, name="replays")
    moderator = django_user_model.objects.create_superuser("moderator", "mod@example.com", "pw")
    members = django_user_model.objects.bulk_create(django_user_model(username=f"m{i}") for i in range(400))
    members = list(django_user_model.objects.filter(username__startswith="m").exclude(pk=moderator.pk))
    post = members[0].posts.create(title="Busy", body="")
    start = micro(timezone.now() - timedelta(days=6))
    # 400 members, 251 replies each: bursts of ten a second apart, every five minutes.
    rows = [
        (m, post, start + (i * 997 + k // 10 * 300 + k % 10) * US) for i, m in enumerate(members) for k in range(251)
    ]
    assert write_history(rows) > INLINE_ROWS
    saved = policy("answer", 60, 5, windows=[(3600, 30)])
    client.force_login(moderator)

    data = {
        "action": "answer",
        "period": "1m",
        "max_count": "3",
        "algorithm": "sliding_log",
        "windows-TOTAL_FORMS": "1",
        "windows-INITIAL_FORMS": "1",
        "windows-0-id": str(saved.windows.get().pk),
        "windows-0-period": "1h",
        "windows-0-max_count": "30",
        "days": "7",
    }
    first = text(client.post(f"{reverse(URL)}?policy={saved.pk}", data))
    found = re.search(r'data-job-url="([^"]+)"', first)
    assert found, first
    # Waiting for the worker, or already taken by it: either way, the page shows how far it got.
    assert "<progress" in first and ("a Celery worker replays it" in first or "Replaying in the background" in first)
    url = found.group(1).replace("&amp;", "&")

    seen, deadline = [first], time.monotonic() + 120
    while "data-job-url" in seen[-1] and time.monotonic() < deadline:
        time.sleep(0.2)
        seen.append(text(client.get(url)))
    page = seen[-1]
    assert "whatif-draft-refused" in page, page[:2000]

    since = Period.last(7).start
    draft = throttling.replay("answer", [(60, 3), (3600, 30)], since=since)
    stands = throttling.replay("answer", since=since)
    assert draft.actions == len(rows) and draft.refused > stands.refused > 0
    assert f'<td id="whatif-draft-refused"><strong>{draft.refused:,}</strong>' in page
    assert f'<td id="whatif-current-refused"><strong>{stands.refused:,}</strong>' in page
    assert f"{draft.actions:,} actions by {draft.members:,} members" in page
