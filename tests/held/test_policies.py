"""Where holding comes from, declared in settings and edited in the admin."""

import pytest
from django.test import override_settings

from throttling.engine.policies.cache import load_policies
from throttling.engine.policies.declared import create_declared_policies, problems
from throttling.models import ActionPolicy

pytestmark = pytest.mark.django_db


def test_declared_policies_say_the_answer_and_hold_until_approved():
    declared = {
        "post": {
            "rate": "5/m",
            "hold_until_approved": 2,
            "same_content": {"max": 1, "members": 3, "period": "10m", "answer": "hold"},
        }
    }
    assert problems(declared) == []
    ActionPolicy.objects.filter(action="post").delete()
    with override_settings(THROTTLING_DEFAULT_POLICIES=declared):
        create_declared_policies(sender=None, verbosity=0)
    row = ActionPolicy.objects.get(action="post")
    assert (row.same_content_answer, row.hold_until_approved) == ("hold", 2)
    spec = load_policies()["post"]
    assert spec.content_holds and spec.hold_until_approved == 2


def test_a_declared_answer_other_than_refuse_or_hold_is_a_problem():
    found = problems({"post": {"rate": "5/m", "same_content": {"max": 1, "period": 60, "answer": "delete"}}})
    assert len(found) == 1 and '"same_content" answer' in found[0] and "delete" in found[0]
    found = problems({"post": {"rate": "5/m", "hold_until_approved": 0}})
    assert len(found) == 1 and "hold_until_approved 0 is refused" in found[0]


def test_the_admin_form_edits_both(admin_client):
    row = ActionPolicy.objects.create(action="held-form", period=60, max_count=5)
    page = admin_client.get(f"/admin/throttling/actionpolicy/{row.pk}/change/")
    assert b'name="same_content_answer"' in page.content and b'name="hold_until_approved"' in page.content
    assert b"Held for review" in page.content


@pytest.mark.parametrize(
    "name, value, expected",
    [
        ("HELD_REJECTED", "remove", '"hide" or "delete"'),
        ("HELD_ALERT_SIZE", -1, "None or a whole number ≥ 0"),
        ("HELD_ALERT_SIZE", "50", "None or a whole number ≥ 0"),
    ],
)
def test_e003_says_what_the_held_settings_take(settings, name, value, expected):
    from throttling.checks.settings import check_settings

    setattr(settings, f"THROTTLING_{name}", value)
    (error,) = check_settings()
    assert error.id == "throttling.E003"
    assert f"THROTTLING_{name} is {value!r}" in error.msg and expected in error.msg
