"""What a block's refusal looks like: the 429 page and JSON, the metrics, the report."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone

import throttling
from tests.support.helpers import retry_after
from tests.support.metrics import Counts
from throttling.engine.offences.report_batches import buffer, store
from throttling.models import Block, OffenceRecord

pytestmark = pytest.mark.django_db


def request_from(address):
    request = RequestFactory().post("/", REMOTE_ADDR=address)
    request.user = AnonymousUser()
    return request


@pytest.mark.urls("tests.support.urlconfs.adapters")
def test_the_429_keeps_what_was_typed_and_never_names_the_range(redis_server, policy, client):
    policy("reply", 60, 5)
    Block.objects.create(network="203.0.113.0/24", reason="spam wave from a hosting provider")
    response = client.post("/reply/", {"body": "My reply"}, REMOTE_ADDR="203.0.113.9")
    html = response.content.decode()
    assert response.status_code == 429
    assert retry_after(response) == 3600
    assert "This action is not available to you at the moment." in html
    assert "My reply" in html  # what the member wrote comes back to them
    assert "203.0.113" not in html and "spam wave" not in html
    api = client.post("/api/replies/", {}, REMOTE_ADDR="203.0.113.9", HTTP_ACCEPT="application/json")
    assert api.status_code == 429
    assert api.json()["detail"] == "This action is not available to you at the moment."
    assert client.post("/reply/", {"body": "x"}, REMOTE_ADDR="198.51.100.9").status_code != 429


@pytest.mark.urls("tests.support.urlconfs.adapters")
def test_a_block_with_an_end_says_when_to_try_again(redis_server, policy, client):
    policy("reply", 60, 5)
    Block.objects.create(network="203.0.113.0/24", reason="raid", expires_at=timezone.now() + timedelta(minutes=30))
    response = client.post("/reply/", {"body": "x"}, REMOTE_ADDR="203.0.113.9")
    assert response.status_code == 429
    assert 1790 <= retry_after(response) <= 1800
    assert "Try again in 30 minutes." in response.content.decode()


@pytest.mark.urls("tests.support.urlconfs.adapters")
def test_the_429_of_a_block_is_headed_not_available_and_gives_the_text_back_to_keep(redis_server, policy, client):
    policy("reply", 60, 5)
    Block.objects.create(network="203.0.113.0/24", reason="raid")
    html = client.post("/reply/", {"body": "x"}, REMOTE_ADDR="203.0.113.9").content.decode()
    assert "<title>Not available</title>" in html and "<h1>Not available</h1>" in html
    assert "Slow down" not in html
    # No wait will do for a block without an end: the text is given back to keep, not to send later.
    assert "What you wrote is below, so that you can keep a copy of it." in html
    assert "when the wait is over" not in html
    throttled = [client.post("/reply/", {"text": "x"}, REMOTE_ADDR="198.51.100.9") for _ in range(6)][-1]
    assert throttled.status_code == 429 and "<h1>Slow down</h1>" in throttled.content.decode()


def test_refusals_of_blocks_are_counted_by_action_with_the_blocked_result(redis_server, policy, settings):
    settings.THROTTLING_METRICS = True
    policy("reply", 60, 5)
    Block.objects.create(network="203.0.113.0/24", reason="raid")
    Block.objects.create(network="198.51.100.0/24", severity="shadow", reason="trial")
    counts = Counts()
    for _ in range(3):
        throttling.check(request_from("203.0.113.9"), "reply")
        throttling.check(request_from("198.51.100.9"), "reply")
    assert counts.decisions() == {("reply", "blocked"): 3, ("reply", "shadow"): 3}


def test_the_report_shows_refusals_of_blocks_apart_from_offences(redis_server, policy, member, admin_client):
    policy("reply", 60, 1)
    Block.objects.create(network="203.0.113.0/24", reason="raid")
    for _ in range(4):
        throttling.check(request_from("203.0.113.9"), "reply")
    throttling.check(member, "reply")
    throttling.check(member, "reply")  # one refusal by the limit: an offence
    store(buffer.batch())
    buffer.discard()
    assert OffenceRecord.objects.get(blocked=True).count == 4
    response = admin_client.get(reverse("admin:throttling_report"))
    html = response.content.decode()
    assert response.context["totals"]["blocked"] == 4
    assert response.context["totals"]["offences"] == 1
    assert "reply, refused by blocks" in html
    assert 'id="total-blocked">4<' in html
    # Offenders are those a limit refused, not visitors from a blocked range.
    assert [row["identity"] for row in response.context["offenders"]] == [f"u:{member.pk}"]
