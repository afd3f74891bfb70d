"""THROTTLING_METRICS: decisions counted by action and result, Redis failures, the latency histogram,
bounded labels, the view's output, and nothing counted while the setting is off."""

import os
import subprocess
import sys
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.test import RequestFactory
from django.test.utils import override_settings
from prometheus_client.parser import text_string_to_metric_families

import throttling
from tests.support.helpers import ROOT
from tests.support.metrics import Counts, scraped
from throttling.common import observe
from throttling.metrics import OTHER, metrics_view
from throttling.penalties import apply_penalty

pytestmark = pytest.mark.django_db

N = 4


@pytest.fixture
def metrics_on(settings):
    settings.THROTTLING_METRICS = True


def test_every_kind_of_decision_is_counted_by_action_and_result(
    metrics_on, redis_server, policy, member, django_user_model
):
    policy("post", 60, 100)
    policy("reply", 60, 1)
    policy("watch", 60, 1, mode="shadow")
    policy("old", 60, 1, enabled=False)
    policy("flag", 60, 100)
    staff = django_user_model.objects.create_user("mod", password="pw", is_staff=True)
    penalised = django_user_model.objects.create_user("bob", password="pw")
    apply_penalty(penalised, level=2, duration=timedelta(hours=1), reason="spam")
    counts = Counts()

    for _ in range(N):
        assert throttling.check(member, "post").reason == "admitted"
        assert throttling.peek(staff, "post").reason == "exempt"
        assert throttling.check(member, "post", cost=101).reason == "too_costly"
        assert throttling.check(penalised, "flag").reason == "penalised"
        assert throttling.check(member, "old").reason == "disabled"
        assert throttling.check(member, "no-such-action").reason == "unknown_action"
    assert throttling.check("ann", "reply").allowed and throttling.check("ann", "watch").allowed
    for _ in range(N):
        assert throttling.check("ann", "reply").reason == "throttled"
        assert throttling.check("ann", "watch").reason == "shadow"

    assert counts.decisions() == {
        ("post", "admitted"): N,
        ("post", "exempt"): N,
        ("post", "too_costly"): N,
        ("flag", "penalised"): N,
        ("old", "disabled"): N,
        (OTHER, "unknown_action"): N,
        ("reply", "admitted"): 1,
        ("reply", "throttled"): N,
        ("watch", "admitted"): 1,
        ("watch", "shadow"): N,
    }
    assert counts.latency() == 8 * N + 2


def test_refusals_of_repeated_content_are_their_own_result(metrics_on, redis_server, policy):
    policy("reply", 60, 100, same_content_max=1, same_content_members=2, same_content_period=600)
    post = "Join our private crypto signals group and double your money in a month, only twenty places left."
    counts = Counts()
    assert throttling.check("ann", "reply", content=post).allowed
    assert throttling.check("bob", "reply", content=post).allowed
    assert throttling.check("ann", "reply", content=post).reason == "duplicate"
    assert throttling.check("cat", "reply", content=post).reason == "duplicate"
    assert counts.decisions() == {("reply", "admitted"): 2, ("reply", "duplicate"): 2}


def test_async_decisions_are_counted_too(metrics_on, redis_server, policy):
    policy("reply", 60, 1)
    counts = Counts()

    async def decide():
        return [await throttling.acheck("ann", "reply") for _ in range(3)] + [await throttling.apeek("ann", "reply")]

    assert [d.reason for d in async_to_sync(decide)()] == ["admitted", "throttled", "throttled", "throttled"]
    assert counts.decisions() == {("reply", "admitted"): 1, ("reply", "throttled"): 3}
    assert counts.latency() == 4


def test_a_dead_redis_counts_backend_errors(metrics_on, own_redis, policy):
    policy("reply", 60, 1)
    assert throttling.check("ann", "reply").allowed
    counts = Counts()
    own_redis.kill()
    for _ in range(N):
        assert throttling.check("ann", "reply").reason == "backend_failure"
    assert counts.backend_errors() == N
    assert counts.decisions() == {("reply", "backend_failure"): N}


def test_nothing_is_counted_while_the_setting_is_off(redis_server, policy):
    policy("reply", 60, 1)
    counts = Counts()
    assert throttling.check("ann", "reply").allowed and not throttling.check("ann", "reply").allowed
    assert counts.decisions() == {} and counts.latency() == 0
    # Turned on and off again, the engine's hooks follow the setting.
    with override_settings(THROTTLING_METRICS=True):
        throttling.check("ann", "reply")
    throttling.check("ann", "reply")
    assert counts.decisions() == {("reply", "throttled"): 1}


def test_action_labels_only_name_policies(metrics_on, redis_server, policy):
    """Decisions on a thousand made-up actions add one series, not a thousand."""
    counts = Counts()
    for i in range(1000):
        throttling.check("ann", f"made-up-{i}")
    assert counts.decisions() == {(OTHER, "unknown_action"): 1000}
    series = {labels["action"] for labels in counts.labels("throttling_decisions_total")}
    assert not any(action.startswith("made-up-") for action in series)
    # An action that gets a policy is named from then on.
    policy("made-up-7", 60, 5)
    throttling.check("ann", "made-up-7")
    assert counts.decisions()[("made-up-7", "admitted")] == 1


def test_the_view_renders_every_metric_in_prometheus_format(metrics_on, redis_server, policy, member):
    policy("reply", 60, 1)
    apply_penalty(member, level=2, duration=timedelta(hours=1), reason="spam")
    throttling.check("ann", "reply")
    throttling.check("ann", "reply")
    observe.escalation(observe.QUEUED)

    response = metrics_view(RequestFactory().get("/metrics/"))
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(response.content.decode())}
    for name in (
        "throttling_decisions",
        "throttling_local_refusals",
        "throttling_decision_seconds",
        "throttling_escalations",
        "throttling_backend_errors",
        "throttling_penalties_active",
    ):
        assert name in families, sorted(families)
    outcomes = {s.labels["outcome"] for s in families["throttling_escalations"].samples if s.name.endswith("_total")}
    assert outcomes == set(observe.ESCALATION_OUTCOMES)
    assert scraped(families, "throttling_penalties_active") == {(): 1.0}
    decisions = scraped(families, "throttling_decisions_total", ("action", "result"))
    assert decisions[("reply", "admitted")] >= 1 and decisions[("reply", "throttled")] >= 1
    # OpenMetrics when the scraper asks for it.
    response = metrics_view(RequestFactory().get("/metrics/", HTTP_ACCEPT="application/openmetrics-text"))
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.decode().rstrip().endswith("# EOF")


def test_local_refusals_are_counted_by_action(metrics_on, redis_server, policy):
    """The hook the local-refusal path calls: one count per refusal answered from memory."""
    policy("reply", 60, 1)
    throttling.check("ann", "reply")
    refusal = throttling.check("ann", "reply")
    counts = Counts()
    for _ in range(N):
        observe.refused_locally(refusal)
    assert counts.local_refusals() == {"reply": N}


def test_e012_when_metrics_are_on_without_prometheus_client():
    """A project without the extra: `manage.py check` says what to install."""
    script = (
        "import sys; sys.modules['prometheus_client'] = None;"  # as if the extra were not installed
        "import django; django.setup();"
        "from django.test import RequestFactory;"
        "from django.test.utils import override_settings;"
        "from throttling.checks import check_metrics;"
        "from throttling.metrics import metrics_view;"
        "print(metrics_view(RequestFactory().get('/')).status_code);"
        "print([e.id for e in check_metrics()]);"
        "override_settings(THROTTLING_METRICS=True).enable();"
        "print([(e.id, e.hint) for e in check_metrics()])"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    status, off, on = out.stdout.strip().splitlines()[-3:]
    assert status == "503"
    assert "throttling.E012" not in off
    assert "throttling.E012" in on and "django-action-throttling[metrics]" in on


def test_the_histogram_puts_each_time_in_its_bucket(metrics_on, redis_server):
    """Times on a bucket's bound count in it, as Prometheus' `le` says; past the last, only in +Inf."""
    from prometheus_client import REGISTRY

    def bucket(le):
        return REGISTRY.get_sample_value("throttling_decision_seconds_bucket", {"le": le}) or 0.0

    bounds = ("2e-05", "5e-05", "0.0001", "0.25", "+Inf")
    before = {le: bucket(le) for le in bounds}
    total = REGISTRY.get_sample_value("throttling_decision_seconds_sum") or 0.0
    decision = throttling.Decision(True, "reply")
    for seconds in (0.00001, 0.00002, 0.00003, 0.0001, 0.3):
        observe.decided(decision, seconds)
    assert {le: bucket(le) - before[le] for le in bounds} == {
        "2e-05": 2,
        "5e-05": 3,
        "0.0001": 4,
        "0.25": 4,
        "+Inf": 5,
    }
    assert REGISTRY.get_sample_value("throttling_decision_seconds_sum") - total == pytest.approx(0.30016)


def test_refusals_answered_from_memory_are_decisions_and_local_refusals(metrics_on, redis_client, policy):
    """Through real decisions: every refusal is a throttled decision, and those Redis did not
    answer (INFO commandstats counts its script runs) are the local refusals."""
    policy("reply", 60, 1)
    client = redis_client
    assert throttling.check("ann", "reply").allowed  # the policy is loaded, the script is there
    counts = Counts()
    runs = evalsha_calls(client)
    for _ in range(N * 5):
        assert throttling.check("ann", "reply").reason == "throttled"
    by_redis = evalsha_calls(client) - runs
    assert by_redis >= 1  # the first refusal is Redis's: only refusals it gave are remembered
    assert counts.decisions() == {("reply", "throttled"): N * 5}
    assert counts.local_refusals() == {"reply": N * 5 - by_redis}


def evalsha_calls(client):
    return client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)


@pytest.mark.django_db(transaction=True)
def test_a_scrape_outside_a_request_leaves_no_database_connection_open(metrics_on, member):
    # prometheus-client's own HTTP server scrapes from a new thread each time: the count of penalties
    # in force must not leave one connection per scrape behind (PostgreSQL would run out of them).
    import threading

    from django.db import connection
    from prometheus_client import REGISTRY, generate_latest

    apply_penalty(member, level=2, duration=timedelta(hours=1), reason="spam")
    seen = {}

    def scrape():
        text = generate_latest(REGISTRY).decode()
        families = {f.name: f for f in text_string_to_metric_families(text)}
        seen["active"] = scraped(families, "throttling_penalties_active")
        seen["left open"] = connection.connection is not None

    thread = threading.Thread(target=scrape)
    thread.start()
    thread.join(30)
    assert seen == {"active": {(): 1.0}, "left open": False}
