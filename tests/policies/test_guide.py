"""The admin's explanation of the algorithm choice: worst cases, refill, memory, recommendation."""

import pytest
from django.urls import reverse

import throttling.admin.policies.guide
from throttling.models import ActionPolicy, ActionWindow


def test_worst_cases_and_refill_per_window():
    rows = throttling.admin.policies.guide.window_rows([(60, 5), (3600, 300)])
    assert [(r["log_worst"], r["bucket_worst"]) for r in rows] == [(5, 9), (300, 599)]
    assert rows[0]["refill"] == "one token every 12 seconds"
    assert throttling.admin.policies.guide.window_rows([(60, 7)])[0]["refill"] == "one token every 8.6 seconds"
    assert throttling.admin.policies.guide.window_rows([(1, 1000)])[0]["refill"] == "1,000 tokens a second"


def test_memory_follows_the_measured_sizes():
    # bench/ measured 328 B at 10 entries, 2,152 B at 100 and 102 KB at 1,000 for the log.
    assert 250 < throttling.admin.policies.guide.log_bytes(10) < 400
    assert 2_000 < throttling.admin.policies.guide.log_bytes(100) < 2_500
    assert 95_000 < throttling.admin.policies.guide.log_bytes(1000) < 110_000
    per, total = throttling.admin.policies.guide.memory([(3600, 1000)], "token_bucket")
    assert per <= 160 and total == per * 100_000
    assert throttling.admin.policies.guide.memory([(3600, 1000)], "sliding_log")[0] > 100 * per


def test_recommendation_names_the_fitting_algorithm():
    assert "token bucket" in throttling.admin.policies.guide.recommendation([(3600, 5000)])  # over the log's cap
    assert "likes" in throttling.admin.policies.guide.recommendation(
        [(3600, 300)]
    )  # the log would cost ~30 KB a member
    assert "sliding log is exact" in throttling.admin.policies.guide.recommendation([(60, 5)])


@pytest.mark.django_db
def test_the_policy_page_explains_the_choice_for_its_own_windows(admin_client):
    like = ActionPolicy.objects.create(action="likes", period=3600, max_count=300, algorithm="token_bucket")
    ActionWindow.objects.create(policy=like, period=60, max_count=30)
    page = admin_client.get(reverse("admin:throttling_actionpolicy_change", args=[like.pk])).content.decode()
    assert "What the algorithm means here" in page
    assert "<td>599</td>" in page and "<td>59</td>" in page  # 2N−1 for each window
    assert "one token every 12 seconds" in page  # 3600 s / 300
    assert "for 100,000 active members" in page
    assert "token bucket saves memory" in page
    add = admin_client.get(reverse("admin:throttling_actionpolicy_add")).content.decode()
    assert "Save the policy to see" in add
