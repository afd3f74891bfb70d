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

import throttling
from tests.support.refusals import RefusalForm, refused_page
from throttling import penalties
from throttling.adapters.refusal.page import wants_json
from throttling.decorators import throttle_action
from throttling.models import Penalty

pytestmark = [pytest.mark.urls("tests.support.urlconfs.adapters"), pytest.mark.usefixtures("redis_server")]

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


@pytest.mark.parametrize("accept", [BROWSER_ACCEPT, "*/*", ""])
def test_a_json_body_at_the_limit_gets_json_whatever_it_accepts(member, policy, accept):
    view = throttle_action("reply")(lambda request: HttpResponse("saved", status=201))
    policy("reply", 60, 1, verb="replied")
    headers = {"Accept": accept} if accept else {}
    answers = []
    for _ in range(2):
        request = RequestFactory().post("/reply/", {"text": "hello"}, content_type="application/json", headers=headers)
        request.user = member
        answers.append(view(request))
    refused = answers[1]
    assert [a.status_code for a in answers] == [201, 429]
    assert refused["Content-Type"] == "application/json"
    body = json.loads(refused.content)
    assert body["action"] == "reply" and refused["Retry-After"] == str(body["retry_after"])


def test_wants_json_reads_the_headers_like_a_server_should():
    factory = RequestFactory()
    assert wants_json(factory.get("/", headers={"Accept": "application/json"}))
    assert wants_json(factory.get("/", headers={"Accept": "application/problem+json, application/json"}))
    assert not wants_json(factory.get("/", headers={"Accept": BROWSER_ACCEPT}))
    assert not wants_json(factory.get("/", headers={"Accept": "text/html;q=0.9, application/json;q=0.8"}))
    assert not wants_json(factory.get("/"))
    assert wants_json(factory.post("/", "{}", content_type="application/json"))
    assert wants_json(factory.post("/", "{}", content_type="application/vnd.api+json"))
    assert not wants_json(factory.post("/", {"text": "hi"}))


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
    """A forum's form: text of several kinds, choices (one a queryset the view narrows per member),
    check boxes, a hidden field and secrets."""

    title = forms.CharField(max_length=120)
    body = forms.CharField(widget=forms.Textarea, label="Message")
    room = forms.ModelChoiceField(queryset=Group.objects.all(), required=False)
    category = forms.ChoiceField(choices=[("1", "General"), ("2", "Off-topic")])
    notify = forms.BooleanField(required=False, label="Email me replies")
    enable_signature = forms.BooleanField(required=False, label="Attach a signature")
    thread = forms.IntegerField(widget=forms.HiddenInput)
    email = forms.EmailField(required=False, label="Your email")
    keywords = forms.CharField(required=False)
    honeypot = forms.CharField(required=False, label="If you enter anything in this field it is spam")
    password = forms.CharField(widget=forms.PasswordInput, required=False)
    secret_word = forms.CharField(widget=forms.PasswordInput, required=False)

    def __init__(self, user, *args, **kwargs):  # needs an argument: the page must not call it
        raise AssertionError("the 429 page instantiated the form")


# What a browser sends, in its order: the button pressed, a formset's management form, the
# security fields an app signs, and fields whose names Django hides in error reports.
TOPIC_POST = [
    ("title", "Hello"),
    ("body", "First line\nsecond line"),
    ("room", "2"),
    ("category", "2"),
    ("notify", "on"),
    ("enable_signature", "on"),
    ("thread", "7"),
    ("email", "me@example.com"),
    ("keywords", "limits, spam"),
    ("honeypot", ""),
    ("next", "/topics/7/"),
    ("security_hash", "0123456789abcdef0123456789abcdef01234567"),
    ("timestamp", "1764201600"),
    ("attachments-TOTAL_FORMS", "1"),
    ("attachments-INITIAL_FORMS", "0"),
    ("author", "alice"),
    ("passage", "Call me Ishmael."),
    ("capital_city", "Paris"),
    ("api_token", "tok-123"),
    ("password", "hunter2"),
    ("secret_word", "open-sesame"),
    ("post", "Post"),
]


def _page(member, policy, view, data):
    return refused_page(member, policy, view, data, path="/topics/new/?draft=1")


def _posted(pairs):
    """`pairs` as the test client's data: {name: [values]}, in the order first sent."""
    data = {}
    for name, value in pairs:
        data.setdefault(name, []).append(value)
    return data


@pytest.mark.parametrize("form", [TopicForm, "tests.adapters.test_refusals.TopicForm"])
def test_a_resend_carries_every_field_as_sent_and_only_the_typed_text_is_editable(member, policy, form, db):
    view = throttle_action("reply", form=form)(lambda request: HttpResponse("saved"))
    page = _page(member, policy, view, _posted(TOPIC_POST))
    assert page.status_code == 429
    content = page.content.decode()
    parsed = RefusalForm(content)
    assert parsed.attrs["action"] == "/topics/new/?draft=1"

    # Sending it again sends what the member sent, in their order: only the secrets are missing.
    secrets = ("api_token", "password", "secret_word")
    kept = [(n, v) for n, v in TOPIC_POST if n not in secrets]
    assert [(n, v) for n, v in parsed.data() if n not in ("csrfmiddlewaretoken", *secrets)] == kept

    # The text the member typed is editable, labelled as the form labels it.
    shown = {
        attrs["name"]: tag for tag, attrs, _t, _o in parsed.controls if attrs.get("type") not in ("hidden", "password")
    }
    assert shown == {"title": "input", "body": "textarea", "email": "input", "keywords": "input"}
    assert parsed.named("body")[0][2] == "First line\nsecond line"
    assert parsed.named("email")[0][1]["type"] == "email"
    assert ">Message</label>" in content and ">Your email</label>" in content
    # Everything else goes back hidden, exactly as sent: choices, check boxes (the signature
    # stays ticked), the button pressed, the honeypot, the management form, the signed fields.
    for name in ("room", "category", "notify", "enable_signature", "thread", "honeypot", "next", "post"):
        [(tag, attrs, _t, _o)] = parsed.named(name)
        assert (tag, attrs["type"]) == ("input", "hidden"), name
    assert "Attach a signature" not in content and "If you enter anything" not in content
    assert "<select" not in content and 'type="checkbox"' not in content
    # Secrets are not carried: empty password boxes, and the page says which to fill in again.
    for name, value in [("api_token", "tok-123"), ("password", "hunter2"), ("secret_word", "open-sesame")]:
        [(tag, attrs, _t, _o)] = parsed.named(name)
        assert attrs["type"] == "password" and "value" not in attrs and value not in content
    assert "Fill these in again, they were not kept: Api token, Password, Secret word." in content


def test_the_page_never_lists_a_querysets_rows_nor_touches_the_database(member, policy, db):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from throttling.adapters.refusal.page import throttled_response

    Group.objects.bulk_create([Group(name=f"Staff room {n}") for n in range(50)])
    view = throttle_action("reply", form=TopicForm)(lambda request: HttpResponse("saved"))
    policy("reply", 60, 1)
    factory = RequestFactory()
    requests = [factory.post("/topics/new/", {"title": "Hi", "room": "2", "body": "text"}) for _ in range(2)]
    for request in requests:
        request.user = member
    view(requests[0])
    decision = throttling.peek(member, "reply")
    with CaptureQueriesContext(connection) as queries:
        page = throttled_response(requests[1], decision, form=TopicForm)
        page.render()
    assert queries.captured_queries == []
    content = page.content.decode()
    assert "Staff room" not in content
    assert '<input type="hidden" name="room" value="2">' in content


def test_passwords_by_name_and_files_are_not_carried_and_the_page_says_so(member, policy, db):
    from django.core.files.uploadedfile import SimpleUploadedFile

    view = throttle_action("reply")(lambda request: HttpResponse("saved"))
    data = {
        "reply": "my words",
        "password1": "a",
        "new_password2": "b",
        "passwd": "c",
        "pin": "1234",
        "spinner": "kept",
        "picture": SimpleUploadedFile("cat.png", b"meow", content_type="image/png"),
    }
    content = _page(member, policy, view, data).content.decode()
    parsed = RefusalForm(content)
    assert parsed.attrs["enctype"] == "multipart/form-data"
    for name in ("password1", "new_password2", "passwd", "pin"):
        [(_tag, attrs, _t, _o)] = parsed.named(name)
        assert attrs["type"] == "password" and "value" not in attrs
    [(_tag, attrs, _t, _o)] = parsed.named("picture")
    assert attrs["type"] == "file"
    assert dict(parsed.data())["spinner"] == "kept"
    assert "Fill these in again, they were not kept: Password1, New password2, Passwd, Pin, Picture." in content
    for secret in ('value="a"', 'value="b"', 'value="c"', "1234", "meow"):
        assert secret not in content


# Fields a site may draw as plain text inputs that hold a secret, or a payment or identity number.
SECRETS = [
    ("password", "hunter2-plain"),
    ("api_key", "sk-live-0123456789"),
    ("auth_token", "tok-9f86d081884c"),
    ("credit_card", "4111 1111 1111 1111"),
    ("cvv", "737"),
    ("ssn", "078-05-1120"),
]


class SecretsForm(forms.Form):
    """Every secret as a plain text input (no PasswordInput), beside names that only contain such letters."""

    body = forms.CharField(widget=forms.Textarea)
    password = forms.CharField()
    api_key = forms.CharField()
    auth_token = forms.CharField()
    credit_card = forms.CharField()
    cvv = forms.CharField()
    ssn = forms.CharField()
    keywords = forms.CharField()


@pytest.mark.parametrize("form", [SecretsForm, None])
def test_fields_named_as_secrets_are_never_written_into_the_page_and_the_page_is_never_stored(member, policy, form, db):
    view = throttle_action("reply", form=form)(lambda request: HttpResponse("saved"))
    data = [
        ("body", "my words"),
        *SECRETS,
        ("keywords", "limits, spam"),
        ("enable_signature", "on"),
        ("security_hash", "0123456789abcdef0123456789abcdef01234567"),
    ]
    page = _page(member, policy, view, _posted(data))
    content = page.content.decode()
    for _name, value in SECRETS:
        assert value not in content
    parsed = RefusalForm(content)
    for name, _value in SECRETS:
        [(_tag, attrs, _t, _o)] = parsed.named(name)
        assert "value" not in attrs, name
    assert "Fill these in again, they were not kept: Password, Api key, Auth token, Credit card, Cvv, Ssn." in content
    # Names that only contain such letters are not secrets: carried as sent.
    sent = dict(parsed.data())
    assert sent["keywords"] == "limits, spam"
    assert sent["enable_signature"] == "on"
    assert sent["security_hash"] == "0123456789abcdef0123456789abcdef01234567"
    assert set(page["Cache-Control"].replace(" ", "").split(",")) == {"no-store", "private"}


@pytest.mark.parametrize(
    "name, secret",
    [
        ("new_password2", True),
        ("apiKey", True),
        ("APIKey", True),
        ("private-key", True),
        ("privateKey", True),
        ("client_secret", True),
        ("otp", True),
        ("otpCode", True),
        ("cardNumber", True),
        ("card-cvc", True),
        ("iban", True),
        ("access_token", True),
        ("keywords", False),
        ("enable_signature", False),
        ("security_hash", False),
        ("spinner", False),
        ("monkey", False),
        ("tokenizer_choice", False),
        ("postcard_text", False),
        ("public_key", False),
    ],
)
def test_a_secret_is_judged_by_the_words_of_its_name(name, secret):
    from throttling.adapters.refusal.resend_fields import is_secret

    assert is_secret(name) is secret


def test_a_formset_s_fields_are_labelled_by_their_form_s_number_from_one(member, policy, db):
    from django.core.files.uploadedfile import SimpleUploadedFile

    view = throttle_action("reply")(lambda request: HttpResponse("saved"))
    data = {
        "body": "my words",
        "attachment-TOTAL_FORMS": "1",
        "attachment-0-comment": "a photo of my cat",
        "attachment-0-file": SimpleUploadedFile("cat.png", b"meow", content_type="image/png"),
    }
    content = _page(member, policy, view, data).content.decode()
    assert ">Comment (attachment 1)</label>" in content
    assert "Fill these in again, they were not kept: File (attachment 1)." in content
    assert "Attachment 0" not in content


def test_a_page_that_holds_what_a_member_typed_is_never_stored(client, policy):
    refused = _refused_client(client, policy, {"text": "second"})
    assert refused.status_code == 429
    assert set(refused["Cache-Control"].replace(" ", "").split(",")) == {"no-store", "private"}


def test_without_a_form_words_are_editable_and_tokens_and_machinery_go_back_hidden(member, policy, db):
    view = throttle_action("reply")(lambda request: HttpResponse("saved"))
    data = [
        ("reply_body", "x" * 200),
        ("subject", "Thanks"),
        ("thread_id", "7"),
        ("choice", "a"),
        ("choice", "b"),
        ("sticky", "on"),
        ("empty", ""),
        ("next", "/t/7/"),
        ("form-TOTAL_FORMS", "2"),
        ("digest", "9f86d081884c7d659a2feaa0c55ad015"),
        ("preview", "Preview"),
    ]
    content = _page(member, policy, view, _posted(data)).content.decode()
    parsed = RefusalForm(content)
    assert parsed.named("reply_body")[0][0] == "textarea"  # long text: a text area
    assert parsed.named("subject")[0][1]["type"] == "text"
    assert ">Reply body</label>" in content and ">Subject</label>" in content
    hidden = [attrs["name"] for tag, attrs, _t, _o in parsed.controls if attrs.get("type") == "hidden"]
    assert hidden == [
        "csrfmiddlewaretoken",
        "thread_id",
        "choice",
        "choice",
        "sticky",
        "empty",
        "next",
        "form-TOTAL_FORMS",
        "digest",
        "preview",
    ]
    assert [(n, v) for n, v in parsed.data() if n != "csrfmiddlewaretoken"] == data


@pytest.mark.urls("tests.support.urlconfs.catch_all")
def test_the_page_posts_back_to_the_path_requested_never_to_another_host(client, policy):
    policy("reply", 60, 1)
    path = "/%2F%2Fevil.example/x/reply/"
    assert client.post(path, {"text": "first"}).status_code == 201
    refused = client.post(path, {"text": "second"})
    assert refused.status_code == 429
    action = RefusalForm(refused.content.decode()).attrs["action"]
    # A browser reads "///evil.example/..." (or "/\\evil.example") as the host evil.example.
    assert action == "/%2F/evil.example/x/reply/"
    # It is the same path: sent there, it reaches the same view (and its limit).
    assert client.post(action, {"text": "third"}).status_code == 429


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
    from throttling.common.words import local_time

    assert f"You can send it again after {local_time(block.ends_at)}." in content
    assert dict(RefusalForm(content).data())["text"] == "kept"
    assert Penalty.objects.get(pk=block.pk).noticed_at <= timezone.now()


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
