"""The refusal through @throttle_action: JSON for clients that ask for it, and the member's text back in a form
they can edit and send again (fields as the view's form draws them, choices by their labels, secrets never)."""

import json
from datetime import timedelta

import pytest
from django import forms
from django.contrib.auth.models import Group
from django.http import HttpResponse
from django.test import RequestFactory
from django.utils import timezone

from tests.support.refusals import RefusalForm, refused_page
from throttling import penalties
from throttling.decorators import throttle_action
from throttling.models import Penalty
from throttling.refusals import editable_fields, wants_json

pytestmark = [pytest.mark.urls("tests.support.urls_adapters"), pytest.mark.usefixtures("redis_server")]

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"


@pytest.fixture
def client(browser):
    return browser


def _refused_client(client, policy, data, **headers):
    policy("reply", 60, 1, verb="replied")
    assert client.post("/reply/", {"text": "first"}).status_code == 201
    return client.post("/reply/", data, headers=headers)


# --- JSON ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [{"Accept": "application/json"}, {"X-Requested-With": "XMLHttpRequest"}, {"Accept": "application/json, */*"}],
)
def test_a_client_that_asks_for_json_gets_a_json_429(client, policy, headers):
    refused = _refused_client(client, policy, {"text": "again"}, **headers)
    assert refused.status_code == 429
    assert refused["Content-Type"] == "application/json"
    body = json.loads(refused.content)
    assert set(body) == {"detail", "action", "retry_after"}
    assert body["action"] == "reply"
    assert isinstance(body["retry_after"], int) and 1 <= body["retry_after"] <= 60
    assert refused["Retry-After"] == str(body["retry_after"])
    assert body["detail"] == f"You have replied too often. Try again in {body['retry_after']} seconds."


@pytest.mark.parametrize("accept", [BROWSER_ACCEPT, "*/*", "", "text/html, application/json;q=0.5"])
def test_a_browser_and_a_client_that_takes_anything_get_the_page(client, policy, accept):
    refused = _refused_client(client, policy, {"text": "again"}, **({"Accept": accept} if accept else {}))
    assert refused.status_code == 429
    assert refused["Content-Type"].startswith("text/html")
    assert "Slow down" in refused.content.decode()


def test_the_json_of_a_penalised_member_says_until_when_and_why(client, member, policy, ladder):
    policy("reply", 60, 5)
    block = penalties.apply_penalty(member, level=2, duration=timedelta(minutes=15), action="reply", reason="Spam.")
    refused = client.post("/reply/", {"text": "hi"}, headers={"Accept": "application/json"})
    assert refused.status_code == 429
    body = json.loads(refused.content)
    assert body["penalty"] == {
        "level": 2,
        "action": "reply",
        "all_actions": False,
        "ends_at": block.ends_at.isoformat(),
        "reason": "Spam.",
        "kind": "restriction",
    }
    assert body["retry_after"] == int(refused["Retry-After"])
    assert 14 * 60 < body["retry_after"] <= 15 * 60
    assert "restricted" in body["detail"]
    # The member was told: no notice repeats it on their next page.
    assert Penalty.objects.get(pk=block.pk).noticed_at is not None


def test_wants_json_reads_the_headers_like_a_server_should():
    factory = RequestFactory()
    assert wants_json(factory.get("/", headers={"Accept": "application/json"}))
    assert wants_json(factory.get("/", headers={"Accept": "application/problem+json, application/json"}))
    assert not wants_json(factory.get("/", headers={"Accept": BROWSER_ACCEPT}))
    assert not wants_json(factory.get("/", headers={"Accept": "text/html;q=0.9, application/json;q=0.8"}))
    assert not wants_json(factory.get("/"))


# --- The page: an editable form --------------------------------------------------------------


def test_the_page_gives_the_text_back_in_a_form_that_posts_the_same_data_again(client, policy):
    written = "A long reply with <b>markup</b> & “quotes”\nover two lines"
    refused = _refused_client(client, policy, {"text": written, "thread": "42"})
    content = refused.content.decode()
    form = RefusalForm(content)
    assert form.attrs == {"class": "throttling-resend", "method": "post", "action": "/reply/"}
    assert form.named("csrfmiddlewaretoken")[0][1]["type"] == "hidden"
    assert [(n, v) for n, v in form.data() if n != "csrfmiddlewaretoken"] == [("text", written), ("thread", "42")]
    assert form.named("text")[0][0] == "textarea"  # two lines: a text area
    assert form.named("thread")[0][0] == "input"  # a short value: one line
    assert "<b>markup</b>" not in content
    wait = int(refused["Retry-After"])
    assert f"You can send it again in {wait} seconds." in content
    assert '<button type="submit">Send again</button>' in content
    assert 'data-reason="throttled"' in content


def test_sending_the_form_again_after_the_wait_is_admitted(client, member, policy):
    refused = _refused_client(client, policy, {"text": "second"})
    form = RefusalForm(refused.content.decode())
    import throttling

    throttling.reset(member, "reply")  # the wait, over
    resent = client.post(form.attrs["action"], dict(form.data()))
    assert resent.status_code == 201 and resent.content == b"saved"


def test_the_form_keeps_the_query_string_of_the_address(client, member, policy):
    policy("reply", 60, 1)
    client.post("/reply/?page=2", {"text": "first"})
    form = RefusalForm(client.post("/reply/?page=2&sort=new", {"text": "second"}).content.decode())
    assert form.attrs["action"] == "/reply/?page=2&amp;sort=new".replace("&amp;", "&")


class TopicForm(forms.Form):
    """A forum's form: several fields of several kinds, one the view narrows per member."""

    title = forms.CharField(max_length=120)
    body = forms.CharField(widget=forms.Textarea, label="Message")
    category = forms.ChoiceField(choices=[("1", "General"), ("2", "Off-topic"), ("3", "Help")])
    tags = forms.MultipleChoiceField(choices=[("a", "Alpha"), ("b", "Beta"), ("c", "Gamma")], required=False)
    group = forms.ModelChoiceField(queryset=Group.objects.all(), required=False)
    priority = forms.TypedChoiceField(choices=[(1, "Low"), (2, "High")], coerce=int)
    notify = forms.BooleanField(required=False, label="Email me replies")
    sticky = forms.BooleanField(required=False)
    thread = forms.IntegerField(widget=forms.HiddenInput)
    email = forms.EmailField(required=False)
    password = forms.CharField(widget=forms.PasswordInput, required=False)
    secret_word = forms.CharField(widget=forms.PasswordInput, required=False)
    api_token = forms.CharField(required=False)

    def __init__(self, user, *args, **kwargs):  # needs an argument: the page must not call it
        raise AssertionError("the 429 page instantiated the form")


TOPIC_POST = {
    "title": "Hello",
    "body": "First line\nsecond line",
    "category": "2",
    "tags": ["a", "c"],
    "priority": "2",
    "notify": "on",
    "thread": "7",
    "email": "me@example.com",
    "password": "hunter2",
    "secret_word": "open-sesame",
    "api_token": "tok-123",
}


def _page(member, policy, view, data):
    return refused_page(member, policy, view, data, path="/topics/new/?draft=1")


@pytest.mark.parametrize("form", [TopicForm, "tests.adapters.test_refusals.TopicForm"])
def test_a_form_class_draws_each_field_as_its_kind_and_never_echoes_secrets(member, policy, form, db):
    staff = Group.objects.create(name="Staff room")
    view = throttle_action("reply", form=form)(lambda request: HttpResponse("saved"))
    page = _page(member, policy, view, {**TOPIC_POST, "group": str(staff.pk)})
    assert page.status_code == 429
    content = page.content.decode()
    parsed = RefusalForm(content)
    assert parsed.attrs["action"] == "/topics/new/?draft=1"

    [(tag, attrs, _text, _opts)] = parsed.named("title")
    assert (tag, attrs["type"], attrs["value"]) == ("input", "text", "Hello")
    assert parsed.named("body")[0][0] == "textarea" and parsed.named("body")[0][2] == "First line\nsecond line"
    assert "<label for=" in content and ">Message</label>" in content
    # Choices are shown by their labels, the sent one selected; never a raw id alone.
    [(tag, _attrs, _text, options)] = parsed.named("category")
    assert tag == "select" and [(v, label, sel) for v, label, sel in options] == [
        ("1", "General", False),
        ("2", "Off-topic", True),
        ("3", "Help", False),
    ]
    [(tag, attrs, _text, options)] = parsed.named("tags")
    assert "multiple" in attrs and [label for _v, label, sel in options if sel] == ["Alpha", "Gamma"]
    [(tag, _attrs, _text, options)] = parsed.named("group")
    assert [(v, label) for v, label, sel in options if sel] == [(str(staff.pk), "Staff room")]
    [(tag, _attrs, _text, options)] = parsed.named("priority")
    assert [label for _v, label, sel in options if sel] == ["High"]
    # Check boxes as check boxes, ticked as they were sent.
    [(tag, attrs, _t, _o)] = parsed.named("notify")
    assert attrs["type"] == "checkbox" and "checked" in attrs
    [(tag, attrs, _t, _o)] = parsed.named("sticky")
    assert attrs["type"] == "checkbox" and "checked" not in attrs
    [(tag, attrs, _t, _o)] = parsed.named("thread")
    assert attrs["type"] == "hidden" and attrs["value"] == "7"
    assert parsed.named("email")[0][1]["type"] == "email"
    # Secrets: password inputs and names Django hides in error reports are not in the page at all.
    for name, value in [("password", "hunter2"), ("secret_word", "open-sesame"), ("api_token", "tok-123")]:
        assert parsed.named(name) == [] and value not in content

    sent = parsed.data()
    assert [(n, v) for n, v in sent if n != "csrfmiddlewaretoken"] == [
        ("title", "Hello"),
        ("body", "First line\nsecond line"),
        ("category", "2"),
        ("tags", "a"),
        ("tags", "c"),
        ("group", str(staff.pk)),
        ("priority", "2"),
        ("notify", "on"),
        ("thread", "7"),
        ("email", "me@example.com"),
    ]


def test_a_choice_the_declared_field_does_not_list_is_kept_hidden_never_shown_as_an_id(member, policy, db):
    class NarrowedForm(forms.Form):
        group = forms.ModelChoiceField(queryset=Group.objects.none())  # the view fills it per member

    view = throttle_action("reply", form=NarrowedForm)(lambda request: HttpResponse("saved"))
    parsed = RefusalForm(_page(member, policy, view, {"group": "99"}).content.decode())
    [(tag, attrs, _t, _o)] = parsed.named("group")
    assert tag == "input" and attrs["type"] == "hidden" and attrs["value"] == "99"


def test_without_a_form_class_every_posted_field_comes_back_with_a_readable_label(member, policy, db):
    view = throttle_action("reply")(lambda request: HttpResponse("saved"))
    data = {"reply_body": "x" * 200, "thread_id": "7", "choice": ["a", "b"], "session_key": "abc", "empty": ""}
    content = _page(member, policy, view, data).content.decode()
    parsed = RefusalForm(content)
    assert parsed.named("reply_body")[0][0] == "textarea"  # long text: a text area
    assert ">Reply body</label>" in content and ">Thread id</label>" in content
    assert [(n, v) for n, v in parsed.data() if n != "csrfmiddlewaretoken"] == [
        ("reply_body", "x" * 200),
        ("thread_id", "7"),
        ("choice", "a"),
        ("choice", "b"),
        ("empty", ""),
    ]
    assert "abc" not in content  # session_key: a name Django hides


def test_a_refusal_of_a_get_has_no_form(client, policy):
    policy("reply", 60, 1)
    assert client.get("/reply-on-get/").status_code == 200
    refused = client.get("/reply-on-get/")
    assert refused.status_code == 429
    assert RefusalForm(refused.content.decode()).attrs is None
    assert "You can send it again in" in refused.content.decode()


def test_a_penalised_member_reads_until_when_they_can_send_again(client, member, policy, ladder):
    policy("reply", 60, 5)
    block = penalties.apply_penalty(member, level=2, duration=timedelta(minutes=15), action="reply", reason="Spam.")
    refused = client.post("/reply/", {"text": "kept"})
    content = refused.content.decode()
    from throttling.text import local_time

    assert f"You can send it again after {local_time(block.ends_at)}." in content
    assert dict(RefusalForm(content).data())["text"] == "kept"
    assert Penalty.objects.get(pk=block.pk).noticed_at <= timezone.now()


def test_editable_fields_reads_only_the_form_class_s_declared_fields(db):
    request = RequestFactory().post("/", {"title": "t", "body": "b"})
    names = [f.name for f in editable_fields(request, TopicForm)]
    # Declared order, secrets and file inputs left out, the form never instantiated.
    assert names == ["title", "body", "category", "tags", "group", "priority", "notify", "sticky", "thread", "email"]


@pytest.mark.django_db(transaction=True)
def test_an_async_view_s_refusal_counts_the_penalty_as_shown_without_blocking_the_loop(member, policy, ladder):
    import asyncio

    from django.test import AsyncClient

    from tests.support.helpers import wait_for

    policy("reply", 60, 5)
    block = penalties.apply_penalty(member, level=2, duration=timedelta(minutes=15), action="reply")
    client = AsyncClient()
    client.force_login(member)
    refused = asyncio.run(client.post("/async-reply/", {"text": "hi"}, headers={"Accept": "application/json"}))
    assert refused.status_code == 429 and json.loads(refused.content)["penalty"]["level"] == 2
    wait_for(lambda: Penalty.objects.get(pk=block.pk).noticed_at is not None, message="the penalty marked shown")
