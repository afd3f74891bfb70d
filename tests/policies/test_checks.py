"""System checks, unknown actions and the master switch: how the app meets a misconfigured project."""

import logging
import uuid
from io import StringIO

import pytest
from django.core.checks import Error, Warning
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from rest_framework.test import APIClient

import throttling
from throttling.checks import check_bindings, check_cache_alias, check_middleware, check_settings, check_view_actions
from throttling.engine.decision import DISABLED, UNKNOWN_ACTION

REDIS_CACHE = {
    "BACKEND": "django_redis.cache.RedisCache",
    "LOCATION": "redis://127.0.0.1:1/0",
    "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
}
LOCMEM_CACHE = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}


def ids(messages):
    return [m.id for m in messages]


def run_check(*args):
    out, err = StringIO(), StringIO()
    call_command("check", *args, stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


# -- throttling.E001 / E002: the cache alias ------------------------------------------------


def test_a_django_redis_alias_passes(settings):
    settings.CACHES = {"default": REDIS_CACHE}
    assert check_cache_alias() == []


def test_e001_missing_alias(settings):
    settings.CACHES = {"default": REDIS_CACHE, "sessions": LOCMEM_CACHE}
    settings.THROTTLING_CACHE_ALIAS = "throttle"
    (error,) = check_cache_alias()
    assert isinstance(error, Error) and error.id == "throttling.E001"
    assert "'throttle'" in error.msg
    assert "default, sessions" in error.hint  # the aliases that do exist


def test_e001_through_manage_py_check(settings):
    settings.THROTTLING_CACHE_ALIAS = "throttle"
    with pytest.raises(SystemCheckError, match="throttling.E001"):
        run_check()


def test_e002_alias_that_is_not_django_redis(settings):
    settings.CACHES = {"default": REDIS_CACHE, "local": LOCMEM_CACHE}
    settings.THROTTLING_CACHE_ALIAS = "local"
    (error,) = check_cache_alias()
    assert error.id == "throttling.E002"
    assert "LocMemCache" in error.msg and "not django-redis" in error.msg
    assert "django_redis.cache.RedisCache" in error.hint
    with pytest.raises(SystemCheckError, match="throttling.E002"):
        run_check()


# -- throttling.E003: settings values -------------------------------------------------------


def test_default_settings_pass():
    assert check_settings() == []


@pytest.mark.parametrize(
    "name, value, expected",
    [
        ("UNKNOWN_ACTION", "maybe", '"allow" or "deny"'),
        ("ENABLED", "yes", "True or False"),
        ("FAIL_OPEN", 0, "True or False"),
        ("NUM_PROXIES", -1, "a whole number"),
        ("NUM_PROXIES", "1", "a whole number"),
        ("IPV6_PREFIX", 129, "from 1 to 128"),
        ("SOCKET_TIMEOUT", 0, "> 0"),
        ("KEY_PREFIX", "app{1}", "without braces"),
        ("FAIL_CLOSED_RETRY_AFTER", 0.5, "whole number"),
        ("OFFENCE_THRESHOLD", -1, "0: never escalate"),
        ("PENALTIES", "on", "True or False"),
        ("FORGIVENESS_DAYS", 0, "days > 0"),
        ("ESCALATION_TIMEOUT", 0, "whole number of seconds"),
        ("ESCALATION_RESEND_AFTER", 0, "whole number of seconds"),
        ("ESCALATION_RESEND_AFTER", 1.5, "whole number of seconds"),
        ("CELERY_QUEUE", "", "None or a queue name"),
        ("OFFENCE_FLUSH_SIZE", 0, "whole number ≥ 1"),
        ("CONTENT_WAVE_WORDS", "12", "whole number ≥ 1"),
        ("CONTENT_WAVE_WORDS", 0, "whole number ≥ 1"),
        ("BLOCK_WIDEST", 8, "two prefix lengths"),
        ("BLOCK_WIDEST", (8, 129), "two prefix lengths"),
    ],
)
def test_e003_bad_setting(settings, name, value, expected):
    setattr(settings, f"THROTTLING_{name}", value)
    (error,) = check_settings()
    assert error.id == "throttling.E003"
    assert f"THROTTLING_{name} is {value!r}" in error.msg and expected in error.msg


def test_e003_through_manage_py_check(settings):
    settings.THROTTLING_UNKNOWN_ACTION = "maybe"
    with pytest.raises(SystemCheckError) as caught:
        run_check()
    assert "throttling.E003" in str(caught.value) and "THROTTLING_UNKNOWN_ACTION" in str(caught.value)


# -- throttling.W001: actions used by views without a policy --------------------------------

UNPOLICED = {
    "unpoliced_api",  # a DRF APIView's throttle_action
    "unpoliced_create",  # a router's ViewSet: its throttle_actions map
    "unpoliced_destroy",
    "unpoliced_pin",  # a router route: @action(throttle_action=...)
    "unpoliced_function",  # a decorated function
    "reoprt",  # a misspelt action on a decorated callable instance (it has no __name__)
    "unpoliced_vote",  # a callable instance's class attribute
    "unpoliced_edit",  # a class-based view: method_decorator on dispatch
    "unpoliced_move",  # ... and on a handler
    "unpoliced_namespaced",  # inside nested namespaces
}


@pytest.mark.django_db
@pytest.mark.urls("tests.support.urlconfs.checks")
def test_w001_names_each_action_without_a_policy():
    warnings = check_view_actions()
    assert all(isinstance(w, Warning) and w.id == "throttling.W001" for w in warnings)
    assert {w.obj for w in warnings} == UNPOLICED  # "reply" has a policy from the data migration
    by_action = {w.obj: w.msg for w in warnings}
    assert "tests.support.urlconfs.checks_views.UnpolicedAPIView" in by_action["unpoliced_api"]
    assert "UnpolicedViewSet" in by_action["unpoliced_create"]
    assert "unpoliced_function" in by_action["unpoliced_function"]
    assert "tests.support.urlconfs.checks_views.ReportView" in by_action["reoprt"]
    assert "tests.support.urlconfs.checks_views.EditView" in by_action["unpoliced_edit"]
    assert "tests.support.urlconfs.checks_views.PinViewSet" in by_action["unpoliced_pin"]
    for action, msg in by_action.items():
        assert f"'{action}'" in msg and "no policy" in msg


@pytest.mark.django_db
@pytest.mark.urls("tests.support.urlconfs.checks")
def test_w001_disappears_once_the_policies_exist(policy):
    for action in sorted(UNPOLICED)[:2]:
        policy(action, 60, 5)
    assert {w.obj for w in check_view_actions()} == set(sorted(UNPOLICED)[2:])
    for action in sorted(UNPOLICED)[2:]:
        policy(action, 60, 5)
    assert check_view_actions() == []


@pytest.mark.django_db
@pytest.mark.urls("tests.support.urlconfs.checks")
def test_w001_through_manage_py_check(policy):
    output = run_check()  # a warning alone does not fail the command
    for action in UNPOLICED:
        assert f"'{action}'" in output
    assert "throttling.W001" in output
    with pytest.raises(SystemCheckError, match="unpoliced_function"):
        run_check("--fail-level", "WARNING")
    for action in UNPOLICED:
        policy(action, 60, 5)
    assert "throttling.W001" not in run_check("--fail-level", "WARNING")


@pytest.mark.django_db
@pytest.mark.urls("tests.support.urlconfs.adapters")
def test_w001_for_a_viewsets_throttle_actions_map(policy):
    # urls_adapters maps DELETE to "delete_post", for which no default policy exists.
    assert [w.obj for w in check_view_actions()] == ["delete_post"]
    policy("delete_post", 60, 5)
    assert check_view_actions() == []


@pytest.mark.django_db
@pytest.mark.urls("tests.support.urlconfs.checks")
def test_w001_names_the_actions_throttling_views_binds(settings, policy):
    for action in UNPOLICED:
        policy(action, 60, 5)
    settings.THROTTLING_VIEWS = {"board:topic:reply": "unpoliced_bound", "forum:topic:reply": {"action": "reply"}}
    (warning,) = check_view_actions()
    assert warning.id == "throttling.W001" and warning.obj == "unpoliced_bound"
    assert "THROTTLING_VIEWS['board:topic:reply']" in warning.msg


@pytest.mark.django_db
def test_a_project_without_a_root_urlconf_is_checked_without_a_crash(settings):
    # A worker's or a script's settings may have no URLs at all: nothing to walk, nothing to report.
    del settings.ROOT_URLCONF
    settings.THROTTLING_VIEWS = {"forum:topic:reply": "reply"}
    assert check_view_actions() == [] and check_bindings() == []
    call_command("check", stdout=StringIO())


# -- throttling.E007 / E008 / W007: THROTTLING_VIEWS -----------------------------------------

urls_checks = pytest.mark.urls("tests.support.urlconfs.checks")


@urls_checks
@pytest.mark.parametrize("name", ["board:topic:reply", "forum:topic:reply", "thing-list", "pin-pin"])
def test_bindings_by_instance_or_application_namespace_pass(settings, name):
    settings.THROTTLING_VIEWS = {name: "reply"}
    assert check_bindings() == []


@pytest.mark.django_db
@urls_checks
def test_e007_a_bound_url_name_that_the_app_renamed(settings):
    settings.THROTTLING_VIEWS = {"board:topic:publish": "reply", "nowhere:reply": "like", "board:topic:reply": "reply"}
    errors = check_bindings()
    assert [(e.id, e.obj) for e in errors] == [
        ("throttling.E007", "board:topic:publish"),
        ("throttling.E007", "nowhere:reply"),
    ]
    assert "THROTTLING_VIEWS['board:topic:publish'] names no URL" in errors[0].msg
    assert "'reply' is not limited there" in errors[0].msg
    assert "renamed" in errors[0].hint
    with pytest.raises(SystemCheckError, match="throttling.E007"):
        run_check()


@urls_checks
@pytest.mark.parametrize(
    "spec, words",
    [
        ({"action": "reply", "count": "redirect"}, "unknown key 'count'"),
        ({"action": "reply", "counts": "sometimes"}, "counts='sometimes'"),
        ({"action": "reply", "counts": 3}, '"success", "redirect"'),
        ({"action": "reply", "anonymous": "allow"}, "\"anonymous\" is 'allow'"),
        ({"action": "reply", "form": "forum.forms.NoSuchForm"}, "\"form\" 'forum.forms.NoSuchForm' cannot be imported"),
        ({"action": "reply", "methods": "POST"}, "list of HTTP methods"),
        ({"action": ""}, "\"action\" is ''"),
        ({"target": "topic_id"}, '"action" is None'),
        (["reply"], "neither an action name nor a dict"),
        ({"action": "reply", "target": "pk"}, "counts per 'pk', which is not a keyword argument"),
    ],
)
def test_e008_a_binding_that_cannot_be_read(settings, spec, words):
    settings.THROTTLING_VIEWS = {"board:topic:reply": spec}
    (error,) = check_bindings()
    assert error.id == "throttling.E008"
    assert "THROTTLING_VIEWS['board:topic:reply']" in error.msg and words in error.msg


@urls_checks
def test_e008_a_setting_that_is_not_a_dict(settings):
    settings.THROTTLING_VIEWS = ["board:topic:reply"]
    (error,) = check_bindings()
    assert error.id == "throttling.E008" and "must be a dict from URL name to an action" in error.msg


MIDDLEWARE_PATH = "throttling.middleware.ActionThrottleMiddleware"


def test_w007_bindings_without_the_middleware(settings):
    assert check_middleware() == []  # nothing bound, nothing installed: nothing to say
    settings.THROTTLING_VIEWS = {"board:topic:reply": "reply"}
    (warning,) = check_middleware()
    assert warning.id == "throttling.W007" and "is not in MIDDLEWARE" in warning.msg


def test_w007_the_middleware_before_authentication(settings):
    settings.MIDDLEWARE = [MIDDLEWARE_PATH, *settings.MIDDLEWARE]
    (warning,) = check_middleware()
    assert warning.id == "throttling.W007" and "comes before AuthenticationMiddleware" in warning.msg
    settings.MIDDLEWARE = [*settings.MIDDLEWARE[1:], MIDDLEWARE_PATH]
    assert check_middleware() == []


# -- unknown actions and THROTTLING_ENABLED -------------------------------------------------


def unknown_warnings(caplog, action):
    return [
        r
        for r in caplog.records
        if r.name == "throttling" and r.levelno == logging.WARNING and repr(action) in r.getMessage()
    ]


@pytest.mark.django_db
def test_an_unknown_action_is_allowed_and_warned_about_once(redis_server, caplog):
    # Unique names: the warning is once per process, and other tests share this one.
    first, second = f"nope-{uuid.uuid4().hex[:8]}", f"nope-{uuid.uuid4().hex[:8]}"
    caplog.set_level(logging.WARNING, logger="throttling")
    decisions = [throttling.check("una", first) for _ in range(5)]
    assert all(d.allowed and d.reason == UNKNOWN_ACTION for d in decisions)
    (record,) = unknown_warnings(caplog, first)
    assert "no policy" in record.getMessage() and "allowing" in record.getMessage()
    throttling.check("una", second)
    throttling.peek("una", second)
    assert len(unknown_warnings(caplog, second)) == 1
    assert len(unknown_warnings(caplog, first)) == 1


@pytest.mark.django_db
def test_an_unknown_action_is_refused_when_configured(redis_server, settings, caplog):
    settings.THROTTLING_UNKNOWN_ACTION = "deny"
    action = f"nope-{uuid.uuid4().hex[:8]}"
    caplog.set_level(logging.WARNING, logger="throttling")
    decisions = [throttling.check("una", action) for _ in range(3)]
    assert not any(d.allowed for d in decisions)
    assert decisions[0].reason == UNKNOWN_ACTION and decisions[0].retry_after >= 1
    assert "refusing" in unknown_warnings(caplog, action)[0].getMessage()
    assert len(unknown_warnings(caplog, action)) == 1


@pytest.mark.django_db
@pytest.mark.urls("tests.support.urlconfs.adapters")
def test_a_view_with_an_unknown_action_under_deny_answers_429(redis_server, settings):
    settings.THROTTLING_UNKNOWN_ACTION = "deny"
    response = APIClient().delete("/api/mapped/")  # "delete_post" has no policy
    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1
    assert "temporarily unavailable" in response.json()["detail"]


@pytest.mark.django_db
@pytest.mark.urls("tests.support.urlconfs.adapters")
def test_disabled_admits_everything_and_sends_nothing_to_redis(settings, policy, redis_client):
    from throttling.engine.background.poller import poller

    policy("reply", 60, 1)
    settings.THROTTLING_ENABLED = False
    # The background thread that earlier decisions started subscribes again after a settings change,
    # on its own time: stopped here, and no disabled decision below starts it again.
    poller.stop()
    redis_client.config_resetstat()
    decisions = [throttling.check("dee", "reply") for _ in range(10)]
    decisions += [throttling.peek("dee", "reply") for _ in range(3)]
    assert all(d.allowed and d.reason == DISABLED for d in decisions)
    client = APIClient()
    statuses = [client.post("/api/replies/", {"text": "hi"}, format="json").status_code for _ in range(5)]
    assert statuses == [201] * 5
    assert redis_client.dbsize() == 0
    # Not even a read: only this test's own inspection reached the server.
    seen = {name.split("|")[0] for name in redis_client.info("commandstats")}
    assert seen <= {"cmdstat_config", "cmdstat_info", "cmdstat_dbsize"}, seen
    assert poller.thread is None

    settings.THROTTLING_ENABLED = True
    assert [throttling.check("dee", "reply").allowed for _ in range(2)] == [True, False]
    assert redis_client.dbsize() > 0


@pytest.mark.django_db
def test_a_disabled_policy_admits_without_recording(policy, redis_client):
    policy("reply", 60, 1, enabled=False)
    assert all(throttling.check("dee", "reply").allowed for _ in range(5))
    assert redis_client.keys("*{*") == []


# -- throttling.W002: penalties without a Celery app of the project's ------------------------


@pytest.fixture
def no_project_celery_app(monkeypatch):
    """Celery as a project without its own app sees it: the fallback app is current."""
    from celery import _state

    monkeypatch.setattr(_state._tls, "current_app", None)
    monkeypatch.setattr(_state, "default_app", None)


def test_w002_penalties_without_a_celery_app(no_project_celery_app):
    from throttling.checks import check_celery_app

    (warning,) = check_celery_app()
    assert warning.id == "throttling.W002" and "no Celery app" in warning.msg


def test_w002_silent_when_penalties_are_off(no_project_celery_app, settings):
    from throttling.checks import check_celery_app

    settings.THROTTLING_PENALTIES = False
    assert check_celery_app() == []


def test_w002_silent_with_the_projects_app():
    from throttling.checks import check_celery_app

    assert check_celery_app() == []


# -- throttling.W003: penalties with no broker, or a broker transport that cannot load -------


@pytest.fixture
def project_celery_app(monkeypatch):
    """A project's own Celery app, current, whose broker the test sets."""
    from celery import Celery, _state

    app = Celery("project", set_as_current=False)
    monkeypatch.setattr(_state._tls, "current_app", app)
    return app


def test_w003_penalties_with_no_broker_configured(project_celery_app):
    from throttling.checks import check_celery_broker

    project_celery_app.conf.broker_url = None
    (warning,) = check_celery_broker()
    assert warning.id == "throttling.W003" and "no broker configured" in warning.msg
    assert "CELERY_BROKER_URL" in warning.hint


def test_w003_penalties_with_a_transport_that_cannot_load(project_celery_app):
    from throttling.checks import check_celery_broker

    project_celery_app.conf.broker_url = "nosuchbroker://127.0.0.1:1/0"
    (warning,) = check_celery_broker()
    assert warning.id == "throttling.W003" and "'nosuchbroker'" in warning.msg


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6399/1", "amqp://guest@127.0.0.1:5672//"])
def test_w003_silent_with_a_loadable_broker(project_celery_app, url):
    from throttling.checks import check_celery_broker

    project_celery_app.conf.broker_url = url  # never connected: the check only loads the transport
    assert check_celery_broker() == []


def test_w003_silent_when_penalties_are_off(project_celery_app, settings):
    from throttling.checks import check_celery_broker

    settings.THROTTLING_PENALTIES = False
    project_celery_app.conf.broker_url = None
    assert check_celery_broker() == []
