"""The three adapters pass the post's text: @throttle_action(content=...), ActionThrottle's throttle_content and a
THROTTLING_VIEWS binding's "content"; form data and JSON bodies; 429s the member understands, refunds that forget."""

import json
import re

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ImproperlyConfigured
from django.test import AsyncClient, Client
from rest_framework.test import APIClient

from bench.content_corpus import BASES
from tests.support.helpers import retry_after
from tests.support.sites.forum import views as forum
from tests.support.urlconfs import content_views as views_content
from throttling.adapters.url_bindings import parse
from throttling.decorators import throttle_action

pytestmark = [pytest.mark.urls("tests.support.urlconfs.content"), pytest.mark.usefixtures("redis_server")]

SPAM = BASES["cash"]["text"]
VARIANT = BASES["cash"]["variants"]["one word changed"]
OTHER = BASES["bike"]["text"]
REPEATED = "You have already posted this."
WAVE = "This was just posted by several members; it looks like spam."


@pytest.fixture(autouse=True)
def limits(policy):
    views_content.SAVED.clear()
    forum.reset()
    for action in ("reply", "post"):
        policy(action, 60, 20, same_content_max=1, same_content_members=2, same_content_period=600)


@pytest.fixture
def members(django_user_model):
    return [django_user_model.objects.create_user(f"m{i}", password="pw") for i in range(3)]


def signed_in(user, client_class=Client):
    client = client_class()
    client.force_login(user)
    return client


def api_client(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_decorator_reads_form_data_and_refuses_a_repeat_with_a_page(members):
    web = signed_in(members[0])
    assert web.post("/content/form/", {"body": SPAM}).status_code == 302
    again = web.post("/content/form/", {"body": VARIANT})
    assert again.status_code == 429
    assert REPEATED in again.content.decode()
    assert 599 <= retry_after(again) <= 600
    # What they wrote comes back to edit; nothing was saved.
    assert "incredible site" in again.content.decode()
    assert views_content.SAVED == [SPAM]
    assert web.post("/content/form/", {"body": OTHER}).status_code == 302


def test_decorator_reads_a_json_body_and_answers_in_json(members):
    first, second, third = (signed_in(m) for m in members)
    post = lambda client, text: client.post(  # noqa: E731
        "/content/json/", json.dumps({"body": text}), content_type="application/json", HTTP_ACCEPT="application/json"
    )
    assert post(first, SPAM).status_code == 201
    assert post(second, VARIANT).status_code == 201
    wave = post(third, BASES["cash"]["variants"]["a sentence moved"])
    assert wave.status_code == 429
    assert wave.json()["detail"] == WAVE
    assert int(wave["Retry-After"]) > 590
    assert views_content.SAVED == [SPAM, VARIANT]


def test_decorator_takes_a_function_of_the_request(members):
    web = signed_in(members[0])
    thread = {"title": "Easy money", "body": SPAM}
    assert web.post("/content/thread/", thread).status_code == 201
    assert web.post("/content/thread/", {**thread, "title": "Easy money!!"}).status_code == 429
    assert web.post("/content/thread/", {"title": "Bike brakes", "body": OTHER}).status_code == 201


def test_a_failed_form_gives_its_content_back(members):
    web = signed_in(members[0])
    # An empty text is no content to judge; a form shown again (200, counts="redirect") refunds.
    assert web.post("/content/form/", {"body": "   "}).status_code == 200
    assert web.post("/content/form/", {"body": SPAM}).status_code == 302
    assert web.post("/content/form/", {"body": SPAM}).status_code == 429


def test_async_view(members):
    web = signed_in(members[0], AsyncClient)

    async def both():
        return [(await web.post("/content/async/", {"body": SPAM})).status_code for _ in range(2)]

    import throttling

    throttling.peek("warm-up", "reply")  # policies read here, where the test's rows are
    assert async_to_sync(both)() == [201, 429]


def test_action_throttle_reads_the_field_from_form_data_and_json(members):
    api = api_client(members[0])
    assert api.post("/content/api/", {"text": SPAM}).status_code == 201
    refused = api.post("/content/api/", {"text": VARIANT}, format="json")
    assert refused.status_code == 429
    assert refused.json()["detail"] == REPEATED
    assert int(refused["Retry-After"]) > 590
    assert api.post("/content/api/", {"text": OTHER}, format="json").status_code == 201
    others = [api_client(m) for m in members[1:]]
    assert others[0].post("/content/api/", {"text": SPAM}, format="json").status_code == 201
    assert others[1].post("/content/api/", {"text": SPAM}, format="json").json()["detail"] == WAVE


def test_action_throttle_calls_the_views_method_and_refunds_an_error(members):
    api = api_client(members[0])
    quoted = f"{OTHER}\n> {SPAM}"
    assert api.post("/content/api/quoting/", {"text": ""}, format="json").status_code == 400
    assert api.post("/content/api/quoting/", {"text": SPAM}, format="json").status_code == 201
    # The quote is left out of what is judged: a reply quoting the spam is not the spam.
    assert api.post("/content/api/quoting/", {"text": quoted}, format="json").status_code == 201
    assert api.post("/content/api/quoting/", {"text": SPAM}, format="json").status_code == 429


def test_a_binding_reads_the_field_of_a_view_the_site_does_not_own(settings, members):
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "throttling.middleware.ActionThrottleMiddleware"]
    settings.THROTTLING_VIEWS = {
        "forum:comment:publish": {"action": "reply", "counts": "redirect", "content": "comment"},
    }
    first, second, third = (signed_in(m) for m in members)
    assert first.post("/forum/comment/publish/1/", {"comment": SPAM}).status_code == 302
    again = first.post("/forum/comment/publish/2/", {"comment": VARIANT})
    assert again.status_code == 429 and REPEATED in again.content.decode()
    assert second.post("/forum/comment/publish/1/", {"comment": SPAM}).status_code == 302
    wave = third.post("/forum/comment/publish/1/", {"comment": SPAM})
    assert wave.status_code == 429 and WAVE in wave.content.decode()
    assert [text for _, _, text in forum.COMMENTS] == [SPAM, SPAM]


def headings(response):
    """The refusal page's <title> and <h1>."""
    html = response.content.decode()
    return re.search(r"<title>(.*?)</title>", html).group(1), re.search(r"<h1>(.*?)</h1>", html).group(1)


def test_the_refusal_page_is_headed_for_a_repeat_and_for_a_wave_and_a_preview_is_left_alone(settings, members):
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "throttling.middleware.ActionThrottleMiddleware"]
    settings.THROTTLING_VIEWS = {
        "forum:comment:publish": {"action": "reply", "counts": "redirect", "content": "comment", "skip": ["preview"]},
    }
    first, second, third = (signed_in(m) for m in members)
    assert first.post("/forum/comment/publish/1/", {"comment": SPAM}).status_code == 302
    again = first.post("/forum/comment/publish/2/", {"comment": VARIANT})
    assert again.status_code == 429
    assert headings(again) == ("Already posted", "Already posted")
    assert second.post("/forum/comment/publish/1/", {"comment": SPAM}).status_code == 302
    # A preview is not the action: the forum's own preview, even of the wave's text.
    preview = third.post("/forum/comment/publish/1/", {"comment": SPAM, "preview": "Preview"})
    assert preview.status_code == 200 and "Preview: " in preview.content.decode()
    wave = third.post("/forum/comment/publish/1/", {"comment": SPAM})
    assert wave.status_code == 429
    assert headings(wave) == ("Already posted by several members", "Already posted by several members")
    assert "Slow down" not in again.content.decode() + wave.content.decode()
    # A rate's refusal keeps its own heading.
    for n in range(3, 23):
        forum.LAST_POSTED.clear()
        third.post(f"/forum/comment/publish/{n}/", {"comment": f"Reply number {n}"})
    throttled = third.post("/forum/comment/publish/99/", {"comment": "Something else entirely, said once."})
    assert throttled.status_code == 429 and headings(throttled) == ("Slow down", "Slow down")


def test_a_bad_content_source_is_refused_with_an_explanation():
    with pytest.raises(ImproperlyConfigured, match="it must name the field that holds the post's text"):
        throttle_action("reply", content=3)
    _bound, problems = parse({"forum:comment:publish": {"action": "reply", "content": ""}})
    assert problems and "it must name the field" in problems[0]
    assert "content" in parse({"x": {"action": "reply", "contents": "c"}})[1][0]
