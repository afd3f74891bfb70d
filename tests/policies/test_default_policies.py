"""THROTTLING_DEFAULT_POLICIES: the rate grammar, the rows migrate creates, and throttling.E006."""

import logging
from io import StringIO

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django.test.utils import override_settings
from rest_framework.throttling import SimpleRateThrottle

import throttling
from throttling.checks import check_default_policies
from throttling.common.durations import Rate, parse_rate, parse_rates
from throttling.engine.decision import UNKNOWN_ACTION
from throttling.engine.policies.cache import version_key
from throttling.models import ActionPolicy

DECLARED = {"flag": ["3/min", "20/day"], "dm": "5/10s"}


def migrate(**options):
    out = StringIO()
    call_command("migrate", verbosity=options.pop("verbosity", 1), stdout=out, **options)
    return out.getvalue()


def windows(action):
    policy = ActionPolicy.objects.get(action=action)
    return [(policy.period, policy.max_count)] + [(w.period, w.max_count) for w in policy.windows.all()]


# -- the rate grammar -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, period, max_count",
    [
        ("5/10s", 10, 5),
        ("3/10min", 600, 3),
        ("100/2h", 7200, 100),
        ("1/7d", 7 * 86400, 1),
        ("20/day", 86400, 20),
        ("1/mi", 60, 1),  # any start of the unit's name
        ("2/hours", 3600, 2),
        ("5 / 10 s", 10, 5),
        ("6/MIN", 60, 6),
    ],
)
def test_a_rate_is_parsed_to_a_period_and_a_maximum(text, period, max_count):
    assert parse_rate(text) == Rate(period=period, max_count=max_count)


class DrfRate(SimpleRateThrottle):
    def __init__(self):
        pass  # only parse_rate is used: no scope, no cache


@pytest.mark.parametrize(
    "text", ["3/s", "3/sec", "3/second", "3/m", "3/min", "3/minute", "3/h", "3/hour", "3/d", "3/day"]
)
def test_drf_rates_mean_what_they_mean_in_drf(text):
    num_requests, duration = DrfRate().parse_rate(text)
    assert parse_rate(text) == (duration, num_requests)


@pytest.mark.parametrize(
    "text, problem",
    [
        ("5", "exactly one “/”"),
        ("5/min/2", "exactly one “/”"),
        ("/min", "number allowed, before “/”, is missing"),
        ("5/", "period, after “/”, is missing"),
        ("1.5/min", "'1.5', is not a whole number"),
        ("-1/min", "'-1', is not a whole number"),
        ("٣/min", "is not a whole number"),  # only ASCII digits
        ("0/min", "allows nothing"),
        ("5/0s", "its period is 0"),
        ("5/10", "'10', has no unit (seconds would be '10s')"),
        ("5/mni", "'mni' is not a unit; use s, sec, second, m, min"),
        ("5/fortnight", "'fortnight' is not a unit"),
        ("5/1x2s", "'1x2s', is not a unit with an optional count"),
    ],
)
def test_a_bad_rate_says_what_is_wrong_and_shows_a_valid_one(text, problem):
    with pytest.raises(ValueError) as caught:
        parse_rate(text)
    message = str(caught.value)
    assert message.startswith(f"{text!r} is not a rate: ") and problem in message
    assert '"5/10s" (5 per 10 seconds)' in message


def test_a_rate_that_is_not_a_string_is_refused():
    with pytest.raises(ValueError, match=r'a rate is a string such as "5/10s".*, not 5\.'):
        parse_rate(5)


def test_one_rate_or_a_list_main_window_first():
    assert parse_rates("3/min") == [(60, 3)]
    assert parse_rates(["3/min", "20/day"]) == [(60, 3), (86400, 20)]
    assert parse_rates(("1/h",)) == [(3600, 1)]
    with pytest.raises(ValueError, match="the list of rates is empty"):
        parse_rates([])
    with pytest.raises(ValueError, match=r"\{'n': 3\} is neither a rate"):
        parse_rates({"n": 3})
    with pytest.raises(ValueError, match="'3/fortnight' is not a rate"):
        parse_rates(["3/min", "3/fortnight"])


# -- rows created after migrate -------------------------------------------------------------


@pytest.mark.django_db
def test_migrate_creates_the_declared_policies_and_they_apply_at_once(redis_client):
    assert throttling.check("zoe", "flag").reason == UNKNOWN_ACTION  # and the policy cache is loaded
    marker = int(redis_client.get(version_key()) or 0)
    with override_settings(THROTTLING_DEFAULT_POLICIES=DECLARED):
        output = migrate()
    assert "Created action policies from THROTTLING_DEFAULT_POLICIES: flag, dm." in output
    assert windows("flag") == [(60, 3), (86400, 20)]
    assert windows("dm") == [(10, 5)]
    flag = ActionPolicy.objects.get(action="flag")
    assert flag.algorithm == "sliding_log" and flag.enabled and not flag.stock_default
    # Every other process is told: the change marker moved.
    assert int(redis_client.get(version_key())) > marker
    decisions = [throttling.check("zoe", "flag") for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert decisions[0].limit == 3 and decisions[-1].retry_after > 50


@pytest.mark.django_db
def test_a_second_migrate_creates_nothing_more(redis_server):
    with override_settings(THROTTLING_DEFAULT_POLICIES=DECLARED):
        migrate(verbosity=0)
        output = migrate()
    assert "Created action policies" not in output
    assert ActionPolicy.objects.filter(action__in=DECLARED).count() == 2
    assert windows("flag") == [(60, 3), (86400, 20)]


@pytest.mark.django_db
def test_an_existing_row_is_never_changed(redis_server):
    edited = ActionPolicy.objects.create(action="flag", period=3600, max_count=10, verb="flagged", enabled=False)
    ActionPolicy.objects.filter(action="post").update(max_count=4, stock_default=False)  # a moderator's edit
    before = {p.action: (p.pk, p.updated_at) for p in ActionPolicy.objects.filter(action__in=["flag", "post"])}
    with override_settings(THROTTLING_DEFAULT_POLICIES={**DECLARED, "post": "1/min"}):
        output = migrate(verbosity=2)
    assert "Action policy 'flag' exists; THROTTLING_DEFAULT_POLICIES leaves it as it is." in output
    assert windows("flag") == [(3600, 10)]
    flag = ActionPolicy.objects.get(action="flag")
    assert (flag.verb, flag.enabled) == ("flagged", False)
    assert windows("post") == [(600, 4), (86400, 20)]
    after = {p.action: (p.pk, p.updated_at) for p in ActionPolicy.objects.filter(action__in=["flag", "post"])}
    assert after == before and before["flag"][0] == edited.pk
    assert windows("dm") == [(10, 5)]  # the action without a row still got one


@pytest.mark.django_db
def test_an_unedited_migration_default_gives_way_to_the_declared_policy(redis_server):
    assert ActionPolicy.objects.get(action="reply").stock_default
    with override_settings(THROTTLING_DEFAULT_POLICIES={"reply": "5/10s"}):
        migrate(verbosity=0)
    reply = ActionPolicy.objects.get(action="reply")
    assert windows("reply") == [(10, 5)]  # the default's hour window went with it
    assert not reply.stock_default
    assert ActionPolicy.objects.get(action="like").stock_default  # not declared: left alone


@pytest.mark.django_db(transaction=True)
def test_a_flush_brings_the_declared_policies_back(redis_server):
    # The setting is overridden inside the test only: the flush that ends a
    # transactional test must not recreate these rows for the next test.
    with override_settings(THROTTLING_DEFAULT_POLICIES=DECLARED):
        migrate(verbosity=0)
        ActionPolicy.objects.filter(action="flag").update(max_count=9, stock_default=False)
        call_command("flush", interactive=False, verbosity=0)
        assert sorted(ActionPolicy.objects.values_list("action", flat=True)) == ["dm", "flag"]
    assert windows("flag") == [(60, 3), (86400, 20)]  # the declaration again, not the edit the flush erased


@pytest.mark.django_db
def test_nothing_is_created_while_throttling_is_not_fully_migrated(redis_server):
    from django.core.management.sql import emit_post_migrate_signal

    recorder = MigrationRecorder(connection)
    last = recorder.migration_qs.filter(app="throttling").latest("id").name
    recorder.record_unapplied("throttling", last)
    try:
        with override_settings(THROTTLING_DEFAULT_POLICIES=DECLARED):
            emit_post_migrate_signal(0, False, "default")
        assert not ActionPolicy.objects.filter(action__in=DECLARED).exists()
    finally:
        recorder.record_applied("throttling", last)
    with override_settings(THROTTLING_DEFAULT_POLICIES=DECLARED):
        emit_post_migrate_signal(0, False, "default")  # what flush sends
    assert ActionPolicy.objects.filter(action__in=DECLARED).count() == 2


@pytest.mark.django_db
def test_a_redis_outage_does_not_break_migrate(own_redis, caplog):
    own_redis.stop()
    caplog.set_level(logging.WARNING, logger="throttling")
    with override_settings(THROTTLING_DEFAULT_POLICIES=DECLARED):
        migrate(verbosity=0)
    assert windows("flag") == [(60, 3), (86400, 20)]
    assert any("could not be announced" in r.getMessage() for r in caplog.records)


@pytest.mark.django_db
def test_a_throttle_without_a_usable_cache_does_not_break_migrate(caplog):
    caplog.set_level(logging.WARNING, logger="throttling")
    with override_settings(THROTTLING_DEFAULT_POLICIES=DECLARED, THROTTLING_CACHE_ALIAS="missing"):
        migrate(verbosity=0)
    assert windows("dm") == [(10, 5)]
    (record,) = [r for r in caplog.records if "could not be announced" in r.getMessage()]
    assert "'missing' is not a configured cache" in record.getMessage()


@pytest.mark.django_db
def test_a_bad_declaration_stops_migrate_before_it_creates_anything(redis_server):
    bad = {"flag": "3/min", "huge": "5000/h"}
    with override_settings(THROTTLING_DEFAULT_POLICIES=bad):
        # manage.py migrate runs the system checks first ...
        with pytest.raises(SystemCheckError, match="throttling.E006"):
            migrate(skip_checks=False)
        # ... and with --skip-checks the receiver refuses it itself.
        with pytest.raises(
            ImproperlyConfigured, match=r"\['huge'\]: '5000/h' is refused: A sliding log allows at most 1,000"
        ):
            migrate(verbosity=0)
    assert not ActionPolicy.objects.filter(action__in=bad).exists()


# -- throttling.E006 ------------------------------------------------------------------------


def test_the_default_and_a_valid_declaration_pass(settings):
    assert check_default_policies() == []
    settings.THROTTLING_DEFAULT_POLICIES = {**DECLARED, "reply": ["6/min", "60/h", "500/7d"], "big": "1000/h"}
    assert check_default_policies() == []


@pytest.mark.parametrize(
    "declared, expected",
    [
        (["3/min"], "THROTTLING_DEFAULT_POLICIES is ['3/min']; it must be a dict from action name"),
        ({3: "3/min"}, "has the key 3, which is not an action name"),
        ({"flag": 3}, "['flag']: 3 is neither a rate such as \"5/10s\" nor a list of rates"),
        ({"flag": []}, "['flag']: the list of rates is empty"),
        ({"flag": ["3/min", None]}, "['flag']: a rate is a string such as \"5/10s\""),
        ({"flag": ["3/min", "20/dya"]}, "['flag']: '20/dya' is not a rate: 'dya' is not a unit"),
        ({"Flag!": "3/min"}, "['Flag!']: the action name is refused: Use only lowercase letters"),
        ({"flag": "5000/h"}, "['flag']: '5000/h' is refused: A sliding log allows at most 1,000"),
        ({"flag": ["3/min", "5000/day"]}, "['flag']: '5000/day' is refused: A sliding log allows at most 1,000"),
        ({"flag": "1/400d"}, "['flag']: '1/400d' is refused: The period must be between 1 second and 366 days"),
        (
            {"flag": "2000000/10min"},
            "['flag']: '2000000/10min' is refused: The maximum must be between 1 and 1,000,000",
        ),
        ({"flag": ["3/min", "10/60s"]}, "['flag']: '3/min' and '10/60s' have the same period"),
        ({"flag": ["3/min", "10/h", "20/60m"]}, "['flag']: '10/h' and '20/60m' have the same period"),
    ],
)
def test_e006_names_the_action_and_the_rate(settings, declared, expected):
    settings.THROTTLING_DEFAULT_POLICIES = declared
    errors = check_default_policies()
    # A maximum above the bucket's cap is above the log's too: two reasons, both true.
    assert len(errors) == (2 if "1,000,000" in expected else 1)
    assert expected in errors[0].msg
    for error in errors:
        assert error.id == "throttling.E006"
        assert '"5/10s"' in error.hint and "token bucket" in error.hint


def test_e006_reports_every_bad_action(settings):
    settings.THROTTLING_DEFAULT_POLICIES = {"flag": "3/min", "a": "0/min", "b": "3/fortnight"}
    errors = check_default_policies()
    assert [e.msg.split(":")[0] for e in errors] == [
        "THROTTLING_DEFAULT_POLICIES['a']",
        "THROTTLING_DEFAULT_POLICIES['b']",
    ]


def test_e006_through_manage_py_check(settings):
    settings.THROTTLING_DEFAULT_POLICIES = {"flag": "3/fortnight"}
    with pytest.raises(SystemCheckError) as caught:
        call_command("check", stdout=StringIO(), stderr=StringIO())
    assert "throttling.E006" in str(caught.value) and "'3/fortnight'" in str(caught.value)
