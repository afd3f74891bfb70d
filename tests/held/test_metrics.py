"""Held decisions are their own result in the metrics: admitted, never counted with the refusals of their reason."""

import pytest

import throttling
from tests.support.metrics import Counts

pytestmark = pytest.mark.django_db

POST = "Join our private crypto signals group and double your money in a month, only twenty places left."


def test_held_is_a_result_of_its_own(settings, redis_server, policy):
    settings.THROTTLING_METRICS = True
    policy(
        "reply",
        60,
        100,
        same_content_max=1,
        same_content_members=2,
        same_content_period=600,
        same_content_answer="hold",
    )
    counts = Counts()
    assert not throttling.check("ann", "reply", content=POST).held
    assert not throttling.check("bob", "reply", content=POST).held
    assert throttling.check("ann", "reply", content=POST).held
    assert throttling.check("cat", "reply", content=POST).held
    assert counts.decisions() == {("reply", "admitted"): 2, ("reply", "held"): 2}
