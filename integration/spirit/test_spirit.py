"""A real forum from the package index (django-spirit), limited by settings only (settings.py).

Every request goes through Spirit's own views, templates, login_required and rate limit: replies are
its classic form view (a failed form or its own "wait 10 s" answers 200 with the form again, a saved
reply redirects), likes its AJAX view (JSON, as its script asks with X-Requested-With).
"""

import json
from html.parser import HTMLParser

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client
from django.urls import reverse

import throttling
from tests.support.helpers import retry_after, wait_for
from tests.support.penalties import offences_key, pending_key

from .conftest import PASSWORD

pytestmark = pytest.mark.django_db

# THROTTLING_DEFAULT_POLICIES in settings.py: 3 replies and 5 likes a minute.
REPLIES = 3
LIKES = 5
SPIRIT_WAIT = "Too many submissions, wait 10s."


def publish_url(topic):
    return reverse("spirit:comment:publish", kwargs={"topic_id": topic.pk})


def reply(client, topic, text, **extra):
    return client.post(publish_url(topic), {"comment": text}, **extra)


def saved(topic, user):
    """The member's comments Spirit saved in the topic, oldest first."""
    from spirit.comment.models import Comment

    return list(Comment.objects.filter(topic=topic, user=user).order_by("pk").values_list("comment", flat=True))


def page(response):
    return response.content.decode()


class Forms(HTMLParser):
    """The forms of a page: [{"action", "method", "fields": {name: value}, "readonly": {names}}]."""

    def __init__(self, html):
        super().__init__()
        self.forms = []
        self._textarea = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self.forms.append({"action": attrs.get("action") or "", "method": attrs.get("method", "get").lower()})
            self.forms[-1].update(fields={}, readonly=set())
        elif self.forms and tag in ("input", "textarea") and attrs.get("name"):
            form = self.forms[-1]
            form["fields"][attrs["name"]] = attrs.get("value") or ""
            if "readonly" in attrs or "disabled" in attrs:
                form["readonly"].add(attrs["name"])
            if tag == "textarea":
                self._textarea = attrs["name"]

    def handle_data(self, data):
        if self._textarea:
            self.forms[-1]["fields"][self._textarea] += data

    def handle_endtag(self, tag):
        if tag == "textarea":
            self._textarea = None


def test_spirits_real_url_names_are_bound_and_pass_the_checks():
    # The names in THROTTLING_VIEWS are Spirit's own: every check of the site passes.
    call_command("check", fail_level="WARNING")


def test_a_renamed_url_is_caught_by_a_check(settings):
    # Spirit renaming its reply URL leaves a binding to a name that no longer resolves.
    settings.THROTTLING_VIEWS = {**settings.THROTTLING_VIEWS, "spirit:comment:create": "reply"}
    with pytest.raises(SystemCheckError) as raised:
        call_command("check")
    assert "throttling.E007" in str(raised.value)
    assert "spirit:comment:create" in str(raised.value)


@pytest.mark.urls("integration.spirit.urls_decorated")
def test_before_bindings_failed_forms_spent_the_quota(member_client, member, topic, spirit_rate_limit_off):
    """The old glue: Spirit's view wrapped by the decorator, which counts every 200, failed forms included."""
    empty = [reply(member_client, topic, "").status_code for _ in range(5)]
    assert empty == [200] * REPLIES + [429] * (5 - REPLIES)
    assert reply(member_client, topic, "My first real reply").status_code == 429
    assert saved(topic, member) == []


@pytest.mark.urls("integration.spirit.urls_counting_redirects")
def test_the_decorator_counting_redirects_keeps_failed_forms_free(member_client, member, topic, spirit_rate_limit_off):
    assert [reply(member_client, topic, "").status_code for _ in range(5)] == [200] * 5
    assert reply(member_client, topic, "My first real reply").status_code == 302
    assert saved(topic, member) == ["My first real reply"]


def test_failed_forms_are_free(member_client, member, topic, redis_client, spirit_rate_limit_off):
    for _ in range(5):
        shown_again = reply(member_client, topic, "")
        assert shown_again.status_code == 200
        assert 'name="comment"' in page(shown_again)  # Spirit's own form, with its error
    assert reply(member_client, topic, "My first real reply").status_code == 302
    assert saved(topic, member) == ["My first real reply"]
    assert redis_client.get(offences_key(member.pk, "reply")) is None


def test_the_limit_is_exact(member_client, member, topic, spirit_rate_limit_off):
    admitted = [reply(member_client, topic, f"Reply number {n}") for n in range(REPLIES)]
    assert [r.status_code for r in admitted] == [302] * REPLIES

    refused = reply(member_client, topic, "One too many")
    assert refused.status_code == 429
    assert 1 <= retry_after(refused) <= 60
    assert "You have replied too often" in page(refused)  # the verb declared in THROTTLING_DEFAULT_POLICIES
    assert saved(topic, member) == [f"Reply number {n}" for n in range(REPLIES)]


def test_spirits_moderators_are_exempt(client, member, topic, spirit_rate_limit_off):
    # THROTTLING_MODERATORS names Spirit's moderators; the declared policy exempts staff, so them.
    member.st.is_moderator = True
    member.st.save()
    assert not member.is_staff
    assert client.login(username=member.username, password=PASSWORD)
    assert [reply(client, topic, f"Moderating {n}").status_code for n in range(REPLIES + 2)] == [302] * (REPLIES + 2)


def test_spirits_own_refusals_are_free(member_client, member, topic, redis_client):
    from django.core.cache import caches

    assert reply(member_client, topic, "Saved at once").status_code == 302
    for n in range(4):
        own = reply(member_client, topic, f"Too soon {n}")
        assert own.status_code == 200  # Spirit's form again, with its message
        assert SPIRIT_WAIT in page(own)
    assert redis_client.get(offences_key(member.pk, "reply")) is None

    caches["st_rate_limit"].clear()  # Spirit's 10 seconds have passed
    assert reply(member_client, topic, "Second").status_code == 302
    caches["st_rate_limit"].clear()
    assert reply(member_client, topic, "Third").status_code == 302
    caches["st_rate_limit"].clear()
    assert reply(member_client, topic, "Fourth").status_code == 429  # ours: three were saved
    assert saved(topic, member) == ["Saved at once", "Second", "Third"]


def test_a_logged_out_post_gets_spirits_login_redirect(client, topic, redis_client):
    for _ in range(REPLIES + 2):
        response = reply(client, topic, "Hello from nowhere")
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("spirit:user:auth:login"))
    assert not [key for key in redis_client.keys() if b"reply" in key]


def test_a_binding_counting_visitors_never_stands_in_front_of_the_login_redirect(client, topic, settings):
    # Spirit's reply view is login_required: a visitor is left to it even when visitors are counted,
    # so its login redirect stays the answer, however often they try.
    binding = {**settings.THROTTLING_VIEWS["spirit:comment:publish"], "anonymous": "count"}
    settings.THROTTLING_VIEWS = {**settings.THROTTLING_VIEWS, "spirit:comment:publish": binding}
    statuses = [reply(client, topic, "Hello from nowhere").status_code for _ in range(REPLIES + 3)]
    assert statuses == [302] * (REPLIES + 3)


def test_the_text_comes_back_in_an_editable_form(member, topic, spirit_rate_limit_off):
    browser = Client(enforce_csrf_checks=True)
    assert browser.login(username=member.username, password=PASSWORD)
    (spirit_form,) = [f for f in Forms(page(browser.get(topic.get_absolute_url()))).forms if "comment" in f["fields"]]
    token = spirit_form["fields"]["csrfmiddlewaretoken"]
    with_token = {"csrfmiddlewaretoken": token}
    for n in range(REPLIES):
        assert browser.post(publish_url(topic), {"comment": f"Reply {n}", **with_token}).status_code == 302

    written = "A long answer,\nwith <b>markup</b> & two lines."
    refused = browser.post(publish_url(topic), {"comment": written, **with_token})
    assert refused.status_code == 429
    (again,) = [f for f in Forms(page(refused)).forms if f["method"] == "post"]
    assert again["action"] in ("", publish_url(topic))
    assert again["fields"]["comment"] == written
    assert "comment" not in again["readonly"]
    assert again["fields"]["csrfmiddlewaretoken"]

    # Once posting works again the form, sent as it stands, saves the reply.
    throttling.reset(member, "reply", target=topic.pk)
    resent = browser.post(again["action"] or publish_url(topic), again["fields"])
    assert resent.status_code == 302
    assert saved(topic, member)[-1] == written


def comments_by(author, topic, n):
    from spirit.comment.models import Comment

    return [
        Comment.objects.create(user=author, topic=topic, comment=f"Like me {i}", comment_html=f"<p>Like me {i}</p>")
        for i in range(n)
    ]


def like(client, comment, **headers):
    url = reverse("spirit:comment:like:create", kwargs={"comment_id": comment.pk})
    return client.post(url, {}, **headers)


def test_spirits_ajax_like_gets_a_json_429(member_client, author, topic):
    comments = comments_by(author, topic, LIKES + 3)
    as_spirits_script = {"HTTP_X_REQUESTED_WITH": "XMLHttpRequest"}  # what its like.coffee sends
    for comment in comments[:LIKES]:
        liked = like(member_client, comment, **as_spirits_script)
        assert liked.status_code == 200
        assert "url_delete" in liked.json()

    refused = like(member_client, comments[LIKES], **as_spirits_script)
    assert refused.status_code == 429
    assert refused["Content-Type"].startswith("application/json")
    body = json.loads(refused.content)
    assert body["action"] == "like"
    assert "liked too often" in body["detail"]
    assert 1 <= body["retry_after"] <= 60
    assert retry_after(refused) == body["retry_after"]
    assert "penalty" not in body

    asked_for_json = like(member_client, comments[LIKES + 1], HTTP_ACCEPT="application/json")
    assert asked_for_json.status_code == 429 and asked_for_json.json()["action"] == "like"
    from_a_form = like(member_client, comments[LIKES + 2])
    assert from_a_form.status_code == 429 and from_a_form["Content-Type"].startswith("text/html")


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_hammering_earns_a_penalty_the_member_is_told_about(
    celery_worker, member_client, member, topic, redis_client, spirit_rate_limit_off
):
    from throttling.models import Penalty

    def hammer_until_penalised(level):
        """Refused replies until the worker has applied the ladder's rung `level` and closed the run."""
        for n in range(5):
            assert reply(member_client, topic, f"Hammering {level}.{n}").status_code == 429
        penalty = wait_for(
            lambda: Penalty.objects.filter(user=member, level=level).first(), message=f"rung {level} applied"
        )
        wait_for(lambda: not redis_client.exists(pending_key(member.pk, "reply")), message="the run to close")
        return penalty

    for n in range(REPLIES):
        assert reply(member_client, topic, f"Reply {n}").status_code == 302

    # First run: a warning, which restricts nothing; Spirit's next page shows it, once, among its messages.
    hammer_until_penalised(1)
    warned = "You received a warning for “reply”"
    assert warned in page(member_client.get(topic.get_absolute_url()))
    assert warned not in page(member_client.get(topic.get_absolute_url()))

    # Second run, the quota still spent: 15 minutes without replying, told once, then our penalised refusal.
    restriction = hammer_until_penalised(2)
    assert restriction.action == "reply"
    restricted = "Your account is restricted for “reply” until"
    assert restricted in page(member_client.get(topic.get_absolute_url()))
    assert restricted not in page(member_client.get(topic.get_absolute_url()))
    refused = reply(member_client, topic, "Let me in")
    assert refused.status_code == 429
    assert "Your account is restricted" in page(refused)
    assert retry_after(refused) > 14 * 60
    assert saved(topic, member) == [f"Reply {n}" for n in range(REPLIES)]
