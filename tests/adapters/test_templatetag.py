"""{% throttle_status %}: the read-only view of a member's quota, against the suite's own Redis."""

import pytest
from django.contrib.auth.models import AnonymousUser
from django.template import Context, Engine, Template, TemplateSyntaxError, engines
from django.test import RequestFactory

import throttling
from throttling.engine.keys import log_keys

pytestmark = pytest.mark.usefixtures("redis_server")

STATUS = "{{ st.allowed }}|{{ st.remaining }}|{{ st.limit }}|{{ st.retry_after }}"


@pytest.fixture
def request_of(member):
    def make(user=member, addr="203.0.113.5"):
        request = RequestFactory().get("/thread/1/", REMOTE_ADDR=addr)
        request.user = user
        return request

    return make


def render_status(request, tag='{% throttle_status "reply" as st %}'):
    """Render through the project's engine, so `request` comes from the context processor."""
    template = engines["django"].from_string("{% load throttling_tags %}" + tag + STATUS)
    allowed, remaining, limit, retry_after = template.render(request=request).split("|")
    return allowed == "True", int(remaining), int(limit), float(retry_after)


def test_status_of_the_requests_user(member, request_of, policy):
    policy("reply", 60, 3)
    assert render_status(request_of()) == (True, 3, 3, 0.0)
    throttling.check(member, "reply")
    assert render_status(request_of()) == (True, 2, 3, 0.0)
    # The member's actions are not charged to the address they came from.
    assert render_status(request_of(user=AnonymousUser())) == (True, 3, 3, 0.0)


def test_remaining_is_what_the_member_can_still_do(member, request_of, policy):
    # A page reads "3 replies left": that must be how many replies are admitted.
    policy("reply", 60, 4)
    assert render_status(request_of())[1] == 4
    throttling.check(member, "reply")
    _, remaining, _, _ = render_status(request_of())
    admitted = 0
    while throttling.check(member, "reply").allowed:
        admitted += 1
    assert remaining == admitted == 3


def test_status_when_refused_gives_the_wait(member, request_of, policy):
    policy("reply", 60, 2)
    for _ in range(2):
        throttling.check(member, "reply")
    allowed, remaining, limit, retry_after = render_status(request_of())
    assert (allowed, remaining, limit) == (False, 0, 2)
    assert 0 < retry_after <= 60


def test_rendering_never_records(member, request_of, policy, redis_client):
    policy("reply", 60, 2)
    throttling.check(member, "reply")
    before = throttling.peek(member, "reply")
    for _ in range(25):
        render_status(request_of())
    after = throttling.peek(member, "reply")
    assert (after.allowed, after.remaining) == (before.allowed, before.remaining)
    log_key, offence_key = log_keys(before.identity, "reply")[:2]
    assert redis_client.zcard(log_key) == 1

    throttling.check(member, "reply")  # now at the limit: rendering must not count offences either
    for _ in range(25):
        assert render_status(request_of())[0] is False
    assert redis_client.zcard(log_key) == 2
    assert redis_client.get(offence_key) is None


def test_for_an_explicit_user(member, django_user_model, policy):
    policy("reply", 60, 3)
    other = django_user_model.objects.create_user("otto", password="x")
    for _ in range(3):
        throttling.check(other, "reply")
    tag = '{% throttle_status "reply" for some_user as st %}'
    template = Template("{% load throttling_tags %}" + tag + STATUS)
    # No request in the context: the user alone identifies whose quota it is.
    assert template.render(Context({"some_user": other})).split("|")[:3] == ["False", "0", "3"]
    assert template.render(Context({"some_user": member})).split("|")[:3] == ["True", "3", "3"]


def test_action_may_be_a_variable(member, request_of, policy):
    policy("like", 60, 7)
    tag = "{% throttle_status what as st %}"
    template = engines["django"].from_string("{% load throttling_tags %}" + tag + "{{ st.limit }}")
    assert template.render({"what": "like"}, request=request_of()) == "7"


def test_anonymous_visitor_is_shown_the_quota_of_their_address(request_of, policy):
    policy("reply", 60, 2)
    visitor = request_of(user=AnonymousUser(), addr="203.0.113.9")
    throttling.check(visitor, "reply")
    assert render_status(visitor)[:3] == (True, 1, 2)
    template = Template('{% load throttling_tags %}{% throttle_status "reply" for u as st %}' + STATUS)
    rendered = template.render(Context({"u": AnonymousUser(), "request": visitor}))
    assert rendered.split("|")[:3] == ["True", "1", "2"]
    neighbour = request_of(user=AnonymousUser(), addr="203.0.113.10")
    assert render_status(neighbour)[:3] == (True, 2, 2)
    throttling.check(visitor, "reply")
    assert render_status(visitor)[:2] == (False, 0)


@pytest.mark.parametrize(
    "tag",
    [
        '{% throttle_status "reply" %}',
        '{% throttle_status "reply" st %}',
        '{% throttle_status "reply" to st %}',
        '{% throttle_status "reply" for as st %}',
        '{% throttle_status "reply" by u as st %}',
        '{% throttle_status "reply" for u as %}',
        "{% throttle_status %}",
    ],
)
def test_bad_syntax_is_a_template_syntax_error(tag):
    with pytest.raises(TemplateSyntaxError, match="Usage"):
        Template("{% load throttling_tags %}" + tag)


@pytest.mark.parametrize("who", ["", " for missing_user"])
def test_without_request_or_user_the_tag_fails_quietly_and_logs_why(policy, caplog, who):
    # Outside debug, a tag fails quietly at render time (Django's rule for tags):
    # the page renders, the variable is empty, and the log says what is missing.
    policy("reply", 60, 2)
    template = Template(
        '{% load throttling_tags %}{% throttle_status "reply"' + who + " as st %}[{{ st.allowed }}|{{ st.remaining }}]"
    )
    with caplog.at_level("WARNING", logger="throttling"):
        assert template.render(Context({"st": "stale"})) == "[|]"
    assert any("request" in r.getMessage() and r.levelname == "WARNING" for r in caplog.records)


def test_without_request_or_user_a_debug_engine_says_what_is_missing(policy):
    policy("reply", 60, 2)
    engine = Engine(debug=True, libraries={"throttling_tags": "throttling.templatetags.throttling_tags"})
    template = engine.from_string('{% load throttling_tags %}{% throttle_status "reply" as st %}')
    with pytest.raises(TemplateSyntaxError, match="request"):
        template.render(Context({}))


def test_a_target_is_read_as_the_views_count_it(member, request_of, policy):
    # A view counted "/t/007/" under 7: the tag shows the same count for "007", 7 and "7".
    policy("reply", 60, 3)
    throttling.check(member, "reply", target="7")
    for written in ('"007"', "7", '" 7 "'):
        assert render_status(request_of(), '{% throttle_status "reply" in ' + written + " as st %}")[1] == 2
