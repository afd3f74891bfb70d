"""@throttle_action on plain Django views, against the suite's own Redis."""

import copy
import html

import pytest
from django.test import Client

from tests.support.helpers import retry_after, used
from tests.support.refusals import refused_page

pytestmark = [pytest.mark.urls("tests.support.urlconfs.adapters"), pytest.mark.usefixtures("redis_server")]


@pytest.fixture
def client(member):
    client = Client()
    client.force_login(member)
    return client


@pytest.fixture
def template_dir(settings, tmp_path):
    """A project template directory that comes before the app's templates."""
    templates = copy.deepcopy(settings.TEMPLATES)
    templates[0]["DIRS"] = [str(tmp_path)]
    settings.TEMPLATES = templates
    return tmp_path


def test_post_is_counted_and_get_is_not(client, member, policy):
    policy("reply", 60, 2)
    for _ in range(5):
        assert client.get("/reply/").status_code == 200
    assert used(member, "reply") == 0
    assert client.post("/reply/", {"text": "hi"}).status_code == 201
    assert used(member, "reply") == 1


def test_methods_changes_what_counts(client, member, policy):
    policy("reply", 60, 2)
    for _ in range(3):
        assert client.post("/reply-on-get/", {"text": "hi"}).status_code == 201
    assert used(member, "reply") == 0
    assert [client.get("/reply-on-get/").status_code for _ in range(3)] == [200, 200, 429]


def test_refusal_renders_the_template_with_retry_after_and_keeps_what_was_written(client, policy):
    policy("reply", 60, 1, verb="replied")
    assert client.post("/reply/", {"text": "first"}).status_code == 201
    written = "A long reply with <b>markup</b> & “quotes”\nover two lines"
    refused = client.post("/reply/", {"text": written, "thread": "42", "csrfmiddlewaretoken": "tok"})
    assert refused.status_code == 429
    assert "throttling/throttled.html" in [t.name for t in refused.templates]
    wait = retry_after(refused)
    assert 1 <= wait <= 60
    body = refused.content.decode()
    assert f"You have replied too often. Try again in {wait} seconds." in body
    # Shown escaped and editable; the thread id goes back as sent, hidden; the token is a fresh one.
    assert html.escape(written, quote=False) in body
    assert "<b>markup</b>" not in body
    assert dict(refused.context["submitted"]) == {"text": written}
    assert '<input type="hidden" name="thread" value="42">' in body
    assert 'value="tok"' not in body


def test_refusal_without_a_verb_names_the_action(client, policy):
    policy("reply", 60, 1)
    client.post("/reply/", {"text": "first"})
    refused = client.post("/reply/", {"text": "second"})
    assert refused.status_code == 429
    assert refused.context["message"] == (
        f"You have used “reply” too often. Try again in {retry_after(refused)} seconds."
    )


def test_template_name_argument_picks_another_template(client, policy, template_dir):
    (template_dir / "custom").mkdir()
    (template_dir / "custom" / "slow_down.html").write_text(
        "CUSTOM:{{ message }}|{% for name, value in submitted %}{{ name }}={{ value }};{% endfor %}"
    )
    policy("reply", 60, 1, verb="replied")
    client.post("/reply-custom/", {"text": "first"})
    refused = client.post("/reply-custom/", {"text": "second"})
    assert refused.status_code == 429
    wait = retry_after(refused)
    assert refused.content.decode() == (f"CUSTOM:You have replied too often. Try again in {wait} seconds.|text=second;")


def test_a_project_template_overrides_the_default(client, policy, template_dir):
    (template_dir / "throttling").mkdir()
    (template_dir / "throttling" / "throttled.html").write_text("OURS:{{ decision.action }}:{{ message }}")
    policy("reply", 60, 1, verb="replied")
    client.post("/reply/", {"text": "first"})
    refused = client.post("/reply/", {"text": "second"})
    assert refused.status_code == 429
    assert refused.content.decode().startswith("OURS:reply:You have replied too often.")
    assert refused["Retry-After"]


def test_an_error_response_refunds(client, member, policy):
    policy("reply", 60, 2)
    for _ in range(4):
        assert client.post("/reply/", {"text": "  "}).status_code == 400
    assert used(member, "reply") == 0
    assert [client.post("/reply/", {"text": "ok"}).status_code for _ in range(3)] == [201, 201, 429]


def test_a_refusal_is_not_refunded(client, member, policy):
    policy("reply", 60, 1)
    client.post("/reply/", {"text": "first"})
    for _ in range(3):
        assert client.post("/reply/", {"text": "again"}).status_code == 429
    assert used(member, "reply") == 1


def test_anonymous_members_are_limited_by_address(policy):
    policy("reply", 60, 1)
    here, there = Client(REMOTE_ADDR="198.51.100.7"), Client(REMOTE_ADDR="198.51.100.8")
    assert here.post("/reply/", {"text": "hi"}).status_code == 201
    assert here.post("/reply/", {"text": "hi"}).status_code == 429
    assert there.post("/reply/", {"text": "hi"}).status_code == 201


def test_a_view_that_raises_refunds(client, member, policy):
    policy("reply", 60, 3)
    assert client.post("/reply-missing/", {"text": "hi"}).status_code == 404
    assert used(member, "reply") == 0


# --- The 429 page: the site's layout, the form's labels, never a password -------------------


def _reply_form():
    from django import forms

    class ReplyForm(forms.Form):
        body = forms.CharField(label="Your reply", widget=forms.Textarea)
        secret_word = forms.CharField(widget=forms.PasswordInput)  # a name Django would not hide

    return ReplyForm


def test_the_429_page_labels_what_was_written_as_the_form_does_and_leaves_password_inputs_out(member, policy):
    from django.http import HttpResponse

    from throttling.decorators import throttle_action

    @throttle_action("reply", form=_reply_form())
    def reply(request):
        return HttpResponse("saved")

    page = refused_page(member, policy, reply, {"body": "my words", "secret_word": "open-sesame", "thread_id": "7"})
    content = page.content.decode()
    assert page.status_code == 429
    assert '<label for="throttling-field-1">Your reply</label>' in content
    assert '<textarea id="throttling-field-1" name="body" rows="6">my words</textarea>' in content
    assert '<input type="hidden" name="thread_id" value="7">' in content  # not the form's: as sent
    assert "open-sesame" not in content
    # The password is not carried: an empty box for it, and the page says so.
    assert '<input id="throttling-field-2" type="password" name="secret_word">' in content
    assert "Fill these in again, they were not kept: Secret word." in content
    assert "<!DOCTYPE html>" in content and "<main>" in content  # the neutral page, whole


def test_the_429_page_extends_the_base_template_the_site_chooses(member, policy, settings, tmp_path):
    from django.http import HttpResponse

    from throttling.decorators import throttle_action

    (tmp_path / "site_base.html").write_text(
        "<html><body><nav>OUR SITE</nav>{% block content %}{% endblock %}</body></html>"
    )
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [str(tmp_path)]}]
    settings.THROTTLING_BASE_TEMPLATE = "site_base.html"

    @throttle_action("reply")
    def reply(request):
        return HttpResponse("saved")

    content = refused_page(member, policy, reply, {"body": "hello"}).content.decode()
    assert "<nav>OUR SITE</nav>" in content and "Slow down" in content and "hello" in content


def test_counts_redirect_makes_a_form_shown_again_free(client, member, policy):
    policy("reply", 60, 2)
    for _ in range(5):
        assert client.post("/reply-form/", {"text": ""}).status_code == 200
    assert used(member, "reply") == 0
    assert [client.post("/reply-form/", {"text": "hi"}).status_code for _ in range(3)] == [302, 302, 429]


@pytest.mark.parametrize(
    "counts, words",
    [
        ("sometimes", "cannot be imported"),
        (42, '"success", "redirect"'),
        ("throttling.conf.DEFAULTS", "cannot be called"),
    ],
)
def test_counts_that_names_nothing_is_refused_where_it_is_written(counts, words):
    from django.core.exceptions import ImproperlyConfigured

    from throttling.decorators import throttle_action

    with pytest.raises(ImproperlyConfigured, match=words):
        throttle_action("reply", counts=counts)
