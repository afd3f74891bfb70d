"""Hostile input and the defects found by probing as an attacker: each fails on the release before the fix."""

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db import connection
from django.template import Context, Template
from django.test import RequestFactory
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

import throttling
import throttling.engine.deciding.plan
import throttling.engine.decision
import throttling.engine.offences.report_batches
from throttling import penalties
from throttling.engine.identity import MAX_IDENTITY, identify
from throttling.models import OffenceRecord, Penalty

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("redis_server")]


class AlwaysRefuse(BaseThrottle):
    def allow_request(self, request, view):
        return False

    def wait(self):
        return 30


class RefuseFirst(APIView):
    throttle_classes = [AlwaysRefuse]
    throttle_action = "reply"

    def post(self, request):
        return Response(status=201)


class RefuseAfter(RefuseFirst):
    pass


def _with_action_throttle(view_class, first):
    from throttling.throttles import ActionThrottle

    view_class.throttle_classes = [AlwaysRefuse, ActionThrottle] if first else [ActionThrottle, AlwaysRefuse]
    return view_class.as_view()


@pytest.mark.parametrize("other_first", [True, False])
def test_another_throttles_refusals_cost_no_quota_and_no_offence(member, policy, ladder, other_first):
    policy("reply", 60, 5, offence_threshold=3)
    view = _with_action_throttle(RefuseFirst if other_first else RefuseAfter, other_first)
    factory = RequestFactory()
    from rest_framework.test import force_authenticate

    for _ in range(12):
        request = factory.post("/", {}, format="json")
        force_authenticate(request, member)
        assert view(request).status_code == 429
    status = throttling.peek(member, "reply")
    assert status.remaining == 5  # every admission was given back
    assert status.offences == 0
    assert not Penalty.objects.filter(user=member).exists()


def test_a_429_the_decorated_view_returns_itself_costs_no_quota(member, policy, client):
    from django.http import HttpResponse

    from throttling.decorators import throttle_action

    policy("reply", 60, 2)

    @throttle_action("reply")
    def busy(request):
        return HttpResponse("come back later", status=429)

    request = RequestFactory().post("/")
    request.user = member
    for _ in range(4):
        assert busy(request).status_code == 429
    assert throttling.peek(member, "reply").remaining == 2


def test_the_429_page_never_echoes_a_secret_and_carries_other_fields_unshown(member, policy):
    from throttling.decorators import throttle_action

    policy("reply", 60, 1)

    @throttle_action("reply")
    def reply(request):
        from django.http import HttpResponse

        return HttpResponse("ok")

    def post():
        request = RequestFactory().post(
            "/",
            {
                "body": "my careful answer",
                "password": "hunter2-SECRET",
                "new_password2": "hunter3-SECRET",
                "api_key": "KEY-SECRET",
                "auth_token": "TOKEN-SECRET",
                "thread_ref": "7",
            },
        )
        request.user = member
        return reply(request)

    assert post().status_code == 200
    refused = post()
    refused.render()
    page = refused.content.decode()
    assert refused.status_code == 429
    assert "my careful answer" in page  # what the member wrote comes back
    # Secrets never: passwords, keys and tokens come back empty, to fill in again.
    assert "SECRET" not in page
    assert "Fill these in again, they were not kept: Password, New password2, Api key, Auth token." in page
    # Other fields go back exactly as the member sent them, hidden, so sending again repeats the
    # request (an app's signed or keyed fields would fail without them); none is shown as text.
    assert '<input type="hidden" name="thread_ref" value="7">' in page


@pytest.mark.parametrize("cost", [True, False, 1.0, "2", None, -3, 0])
def test_costs_that_are_not_whole_numbers_are_refused_everywhere(policy, cost):
    policy("reply", 60, 5)
    for call in (throttling.check, throttling.peek):
        with pytest.raises(ValueError, match="cost must be a whole number"):
            call("eve", "reply", cost=cost)
    assert throttling.peek("eve", "reply").remaining == 5


@pytest.mark.parametrize("length", [120, 125, 126, 130, 500, 5000])
def test_every_identity_fits_every_column(length):
    for who in ("x" * length, "é" * length):
        identity, _ = identify(who)
        assert len(identity) <= MAX_IDENTITY


@pytest.mark.django_db(transaction=True)
def test_offences_of_the_longest_identities_are_stored(policy):
    policy("reply", 60, 1)
    for who in ("a" * 126, "b" * 400):
        throttling.check(who, "reply")
        throttling.check(who, "reply")
    rows = throttling.engine.offences.report_batches.buffer.batch()
    throttling.engine.offences.report_batches.buffer.discard()
    assert throttling.engine.offences.report_batches.store(rows) == 2
    assert OffenceRecord.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_row_no_column_can_hold_does_not_drop_the_rest_of_the_batch(policy):
    import time

    hour = int(time.time()) // 3600 * 3600
    batch = [
        ["s:ok-before", None, "reply", hour, 2],
        ["s:" + "x" * 300, None, "reply", hour, 5],  # too long for the column
        ["s:ok-after", None, "reply", hour, 3],
    ]
    if connection.vendor == "sqlite":  # SQLite does not enforce lengths: the row simply fits
        assert throttling.engine.offences.report_batches.store(batch) == 10
    else:
        assert throttling.engine.offences.report_batches.store(batch) == 5
    assert set(OffenceRecord.objects.values_list("identity", flat=True)) >= {"s:ok-before", "s:ok-after"}


def test_a_short_string_cannot_spell_a_hashed_identity(policy):
    policy("reply", 60, 1)
    victim = "v" * 400
    hashed, _ = identify(victim)
    assert hashed.startswith("s:%h")
    crafted = hashed.removeprefix("s:")  # the hashed form, typed as an identity
    assert identify(crafted)[0] != hashed
    assert throttling.check(victim, "reply").allowed
    assert throttling.check(crafted, "reply").allowed  # its own quota, not the victim's
    assert not throttling.check(victim, "reply").allowed


def test_the_tag_treats_a_missing_member_as_anonymous(policy):
    policy("reply", 60, 3)
    request = RequestFactory().get("/", REMOTE_ADDR="203.0.113.9")
    request.user = AnonymousUser()
    template = Template(
        '{% load throttling_tags %}{% throttle_status "reply" for post.author as st %}{{ st.remaining }}'
    )
    assert template.render(Context({"request": request})) == "3"  # no `post` here: the visitor's quota
    throttling.check(request, "reply")
    assert template.render(Context({"request": request})) == "2"


def test_an_escalation_without_a_run_is_refused_and_never_returns_another_members_penalty(
    member, django_user_model, ladder
):
    from datetime import timedelta

    other = django_user_model.objects.create_user("ken", password="pw")
    manual = penalties.apply_penalty(member, level=2, duration=timedelta(hours=1), action="reply", reason="by hand")
    assert manual.crossing == ""
    with pytest.raises(ValueError, match="offence run"):
        penalties.escalate(other.pk, "spam", "", 5, 600)
    # A run named by one member never finds another member's penalty either.
    first = penalties.escalate(member.pk, "reply", "run-1", 3, 600)
    assert first is not None and first.user == member
    assert penalties.escalate(other.pk, "reply", "run-1", 3, 600) is None
    assert not Penalty.objects.filter(user=other).exists()


def test_warnings_about_unknown_actions_use_bounded_memory(caplog):
    throttling.engine.deciding.replies._warned_unknown.clear()
    for i in range(5000):
        throttling.check("mallory", f"made-up-{i}")
    assert (
        len(throttling.engine.deciding.replies._warned_unknown)
        <= throttling.engine.deciding.replies._WARNED_UNKNOWN_MAX
    )


@pytest.mark.parametrize(
    "action", ["", " ", "x" * 65, "Reply", "reply\n", "{reply}", "rép", "a:b", "../../etc", "\x00"]
)
def test_hostile_action_names_are_unknown_actions_not_errors(action):
    decision = throttling.check("mallory", action)
    assert decision.reason == throttling.engine.decision.UNKNOWN_ACTION and decision.allowed


@pytest.mark.parametrize(
    "who", ["{", "}", "{x}", "a b", "\x00", "é" * 300, "%h" + "0" * 40, "u:1", "ip:127.0.0.1", "*", "?"]
)
def test_hostile_identities_are_escaped_and_decided(policy, who):
    policy("reply", 60, 1)
    first = throttling.check(who, "reply")
    assert first.allowed and first.reason == throttling.engine.decision.ADMITTED
    assert "{" not in first.identity and "}" not in first.identity
    assert not throttling.check(who, "reply").allowed


@pytest.mark.parametrize(
    "fields",
    [
        {"action": "{reply}"},
        {"action": "Reply"},
        {"period": 0},
        {"period": 366 * 86400 + 1},
        {"max_count": 0},
        {"max_count": 1001},
        {"max_count": 1_000_001, "algorithm": "token_bucket"},
        {"algorithm": "leaky"},
    ],
)
def test_hostile_policy_values_are_refused_by_the_database_however_they_are_written(fields):
    from django.db import IntegrityError, transaction

    from throttling.models import ActionPolicy

    good = {"action": "hostile", "period": 60, "max_count": 5, **fields}
    with pytest.raises(IntegrityError), transaction.atomic():
        ActionPolicy.objects.bulk_create([ActionPolicy(**good)])
    with pytest.raises(IntegrityError), transaction.atomic():
        ActionPolicy.objects.filter(action="reply").update(**fields)
    assert not ActionPolicy.objects.filter(action="hostile").exists()
