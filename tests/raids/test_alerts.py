"""Alerts: once per event, as a signal and in a mail digest to the moderators, never per request."""

import email
import email.policy
import os
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import AnonymousUser, Permission
from django.core import mail
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone

import throttling
from tests.support.helpers import mail_settings, wait_for
from throttling import penalties, raids, signals
from throttling.models import Alert, Block, Surge

pytestmark = pytest.mark.django_db


@pytest.fixture
def told():
    """The `alert` signals sent during the test, as (kind, sentence, params)."""
    heard = []

    def receiver(sender, kind, sentence, params, alert, **kwargs):
        heard.append((kind, sentence, params))

    signals.alert.connect(receiver, dispatch_uid="test-alerts")
    yield heard
    signals.alert.disconnect(dispatch_uid="test-alerts")


@pytest.fixture
def moderators(django_user_model):
    """Who is mailed by default: active staff with the permission, superusers; not other staff."""
    mod = django_user_model.objects.create_user("mod", "mod@example.org", is_staff=True)
    mod.user_permissions.add(Permission.objects.get(codename="view_alert"))
    django_user_model.objects.create_superuser("root", "root@example.org")
    django_user_model.objects.create_user("clerk", "clerk@example.org", is_staff=True)
    django_user_model.objects.create_user("gone", "gone@example.org", is_staff=True, is_superuser=True, is_active=False)
    return ["mod@example.org", "root@example.org"]


def test_a_surge_started_and_ended_is_told_once_each(
    redis_server, told, admin_user, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        surge = throttling.start_surge(0.5, 120, "raid on the announcements board", by=admin_user)
    with django_capture_on_commit_callbacks(execute=True):
        throttling.end_surge(by=admin_user, reason="calm again")
        throttling.end_surge(by=admin_user, reason="twice")
    kinds = [kind for kind, _s, _p in told]
    assert kinds == ["surge_started", "surge_ended"]
    started, ended = told[0][1], told[1][1]
    until = timezone.localtime(surge.ends_at)
    assert started.startswith("Surge mode started by admin: every limit × 0.5 for 2 hours, until ")
    assert started.endswith(f"({until.tzname()}). Reason: raid on the announcements board")
    assert ended == "Surge mode ended early by admin (every limit × 0.5). Reason: calm again"
    assert Alert.objects.count() == 2


@pytest.fixture
def broken_receiver():
    """A receiver of `alert` that raises, as a site's own receiver may."""

    def receiver(**kwargs):
        raise RuntimeError("the site's own receiver is broken")

    signals.alert.connect(receiver, dispatch_uid="test-broken-alert-receiver")
    yield
    signals.alert.disconnect(dispatch_uid="test-broken-alert-receiver")


@pytest.mark.django_db(transaction=True)
def test_a_receiver_that_raises_breaks_neither_the_surge_nor_the_admin_nor_a_decision(
    redis_server, policy, broken_receiver, told, admin_client, caplog
):
    policy("reply", 60, 10)
    throttling.start_surge(0.5, 30, "raid on the announcements board")
    assert throttling.check("v", "reply").limit == 5
    assert throttling.end_surge(reason="calm again")
    assert throttling.check("v", "reply").limit == 10
    # The admin's "Add surge" saves and says so.
    response = admin_client.post(
        reverse("admin:throttling_surge_add"),
        {"multiplier": "0.5", "lasts": "2 hours", "actions": "", "reason": "raid"},
    )
    assert response.status_code == 302, response.content.decode()
    assert throttling.check("v", "reply").limit == 5
    # The other receivers heard every alert, and the failure is logged.
    assert [kind for kind, _s, _p in told] == ["surge_started", "surge_ended", "surge_started"]
    assert "the site's own receiver is broken" in caplog.text


def test_a_surge_that_ends_on_time_is_told_once_however_often_it_is_noticed(
    redis_server, told, django_capture_on_commit_callbacks
):
    surge = throttling.start_surge(0.25, 30, "spam in new threads", actions=["post", "reply"])
    assert raids.notice_ended_surges() == 0  # still on
    Surge.objects.filter(pk=surge.pk).update(ends_at=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert raids.notice_ended_surges() == 1
        assert raids.notice_ended_surges() == 0
        assert throttling.end_surge() == []  # it has ended: nothing to end early
    assert [s for k, s, _p in told if k == "surge_ended"] == [
        "Surge mode ended on time (the limits of “post, reply” × 0.25)."
    ]


def test_a_member_reaching_the_set_rung_is_told_and_lower_rungs_are_not(
    redis_server, told, member, settings, django_capture_on_commit_callbacks
):
    settings.THROTTLING_ALERT_RUNG = 3
    with django_capture_on_commit_callbacks(execute=True):
        for run in ("run-1", "run-2", "run-3", "run-3"):  # the last one delivered twice
            penalties.escalate(member.pk, "reply", run, offences=5, window=600)
    assert len(told) == 1
    kind, sentence, params = told[0]
    assert (kind, params["level"], params["member"]) == ("rung_reached", 3, "alice")
    assert sentence.startswith(
        "Member alice reached rung 3 (1 hour) of the penalty ladder after refused attempts at “reply”: restricted for it until "
    )
    settings.THROTTLING_ALERT_RUNG = None
    with django_capture_on_commit_callbacks(execute=True):
        penalties.escalate(member.pk, "reply", "run-4", offences=5, window=600)
    assert len(told) == 1


def test_a_blocks_first_refusal_is_told_once_across_processes(redis_server, told, django_capture_on_commit_callbacks):
    block = Block.objects.create(network="203.0.113.0/24", reason="spam wave")
    with django_capture_on_commit_callbacks(execute=True):
        # Two processes each saw their first refusal: the database lets one through.
        assert raids.first_refusal(block.pk, "post") is True
        assert raids.first_refusal(block.pk, "reply") is False
    assert told == [
        (
            "block_refused",
            "The block of 203.0.113.0/24 refused its first request, at “post”. Its reason: spam wave",
            {
                "target": "203.0.113.0/24",
                "action": "post",
                "reason": "spam wave",
                "severity": "refuse",
                "block": block.pk,
            },
        )
    ]
    block.refresh_from_db()
    assert block.first_refused_at is not None


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_refusals_of_a_block_send_one_task_per_process_and_one_alert(redis_server, policy, celery_worker, told):
    policy("reply", 60, 5)
    Block.objects.create(network="203.0.113.0/24", reason="spam wave")
    request = RequestFactory().post("/", REMOTE_ADDR="203.0.113.9")
    request.user = AnonymousUser()
    for _ in range(20):
        assert throttling.check(request, "reply").reason == "blocked"
    assert throttling.engine.countermeasures.in_force.measures._told == {Block.objects.get().pk}
    alert = wait_for(lambda: Alert.objects.filter(kind="block_refused").first(), message="the block's alert")
    assert alert.params["action"] == "reply"
    assert Alert.objects.count() == 1


def test_the_first_alert_is_mailed_at_once_and_those_that_follow_wait_for_the_digest(redis_server, moderators):
    start = timezone.now()
    raids.tell("block_refused", target="203.0.113.0/24", action="post", reason="spam wave")
    assert raids.mail_due(start + timedelta(seconds=1)) == (1, None)
    assert len(mail.outbox) == 1
    first = mail.outbox[0]
    assert sorted(first.to) == moderators
    assert first.subject == "Throttling: 1 event"
    assert "The block of 203.0.113.0/24 refused its first request, at “post”. Its reason: spam wave" in first.body
    # Within the interval: they wait, and the task learns when to come back.
    raids.tell("surge_started", multiplier="0.5", minutes=30, until=start.isoformat(), reason="raid", by="mod")
    raids.tell("surge_ended", multiplier="0.5", early=True, by="mod", reason="calm")
    mailed, wait = raids.mail_due(start + timedelta(seconds=61))
    assert mailed == 0 and 238 <= wait <= 240
    assert len(mail.outbox) == 1
    # Once it has passed: both in one mail.
    assert raids.mail_due(start + timedelta(seconds=302)) == (2, None)
    assert len(mail.outbox) == 2
    digest = mail.outbox[1]
    assert digest.subject == "Throttling: 2 events"
    assert digest.body.startswith("2 events since the last mail:\n\n- ")
    assert "Surge mode started by mod: every limit × 0.5 for 30 minutes" in digest.body
    assert "Surge mode ended early by mod (every limit × 0.5). Reason: calm" in digest.body
    assert "at most one such mail every 5 minutes" in digest.body
    # Nothing waits: nothing is mailed, and no task needs to come back.
    assert raids.mail_due(start + timedelta(seconds=900)) == (0, None)
    assert Alert.objects.filter(mailed_at__isnull=True).count() == 0


def use_mail_backend(settings, backend):
    """Mail goes through `backend` (a dotted path) for the rest of the test."""
    for name, value in mail_settings(backend).items():
        setattr(settings, name, value)


def test_a_digest_that_cannot_be_sent_is_kept_for_the_next(redis_server, moderators, settings):
    use_mail_backend(settings, "tests.raids.test_alerts.BrokenBackend")
    raids.tell("surge_ended", multiplier="0.5", early=False)
    with pytest.raises(ConnectionRefusedError):
        raids.mail_due()
    assert Alert.objects.get().mailed_at is None
    use_mail_backend(settings, "django.core.mail.backends.locmem.EmailBackend")
    assert raids.mail_due()[0] == 1
    assert len(mail.outbox) == 1


class BrokenBackend:
    def __init__(self, *args, **kwargs):
        pass

    def send_messages(self, messages):
        raise ConnectionRefusedError("the mail server is down")


def test_who_is_mailed(moderators, settings, django_user_model):
    assert sorted(raids.moderator_emails()) == moderators
    settings.THROTTLING_ALERT_EMAILS = ["mods@example.org"]
    assert raids.moderator_emails() == ["mods@example.org"]
    settings.THROTTLING_ALERT_EMAILS = None
    settings.THROTTLING_MODERATORS = "auth.change_user"
    clerk = django_user_model.objects.get(username="clerk")
    clerk.user_permissions.add(Permission.objects.get(codename="change_user"))
    assert sorted(raids.moderator_emails()) == ["clerk@example.org", "root@example.org"]


def test_alerts_go_to_nobody_when_the_setting_says_so(redis_server, moderators, settings):
    settings.THROTTLING_ALERT_EMAILS = []
    raids.tell("surge_ended", multiplier="0.5", early=False)
    assert raids.mail_due() == (1, None)
    assert mail.outbox == []


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_an_alert_reaches_the_moderators_mailbox_through_the_task(redis_server, celery_worker, moderators):
    # The worker is another process: its mail goes to files (tests/settings.py) this test reads.
    mailbox = Path(os.environ["THROTTLING_TEST_MAIL_DIR"])
    before = set(mailbox.iterdir()) if mailbox.exists() else set()
    throttling.start_surge(0.5, 30, "raid on the announcements board")
    # Django's file backend creates its file when it opens the connection and writes each message as
    # sent, then a line of dashes: the mail is there once a file of this test ends with that line.
    # A body with "×" in it may go quoted-printable (Django 6's mail does so), so each message is read
    # as a mail reader would.
    separator = b"\n" + b"-" * 79 + b"\n"

    def written():
        sent = set(mailbox.iterdir()) - before if mailbox.exists() else set()
        raw = b"".join(path.read_bytes() for path in sorted(sent))
        return raw if raw.endswith(separator) else None

    raw = wait_for(written, message="the digest mail, written out")
    messages = [
        email.message_from_bytes(part.strip(), policy=email.policy.default)
        for part in raw.split(separator)
        if part.strip()
    ]
    assert [m["Subject"] for m in messages] == ["Throttling: 1 event"]
    assert {"mod@example.org", "root@example.org"} <= {a.addr_spec for a in messages[0]["To"].addresses}
    assert "Surge mode started: every limit × 0.5 for 30 minutes, until " in messages[0].get_content()
    # The task marks the alert mailed once the backend has sent it.
    wait_for(lambda: Alert.objects.get().mailed_at is not None, message="the alert marked as mailed")


@pytest.mark.worker
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_digest_the_mail_server_refused_is_retried_by_the_task(redis_server, start_worker, moderators, settings):
    from demo_site.redis_server import free_port, release_port
    from tests.support.processes.smtp_sink import SmtpSink

    port = free_port()  # nothing listens there yet: the mail server is down
    queue = "mail-server-down"
    settings.THROTTLING_CELERY_QUEUE = queue
    worker = start_worker([queue], env={"THROTTLING_TEST_SMTP_PORT": str(port)}, name="mailer")
    sink = None
    try:
        throttling.start_surge(0.5, 30, "raid on the announcements board")
        # The worker tried, and the server refused the connection.
        wait_for(lambda: "ConnectionRefusedError" in worker.log.read_text(errors="replace"), message="a refused send")
        sink = SmtpSink(port).start()  # the mail server is back: the task's retry mails the digest
        wait_for(lambda: sink.messages, timeout=60, message="the digest, sent again by the task")
        message = email.message_from_bytes(sink.messages[0], policy=email.policy.default)
        assert message["Subject"] == "Throttling: 1 event"
        wait_for(lambda: Alert.objects.get().mailed_at is not None, message="the alert marked as mailed")
        assert len(sink.messages) == 1
    finally:
        if sink is not None:
            sink.stop()
        release_port(port)


def _surge_just_ended(policy):
    """A surge (every limit × 0.5) applied to a decision, whose end has passed since."""
    from throttling.engine.countermeasures.in_force import measures

    policy("reply", 60, 10)
    surge = throttling.start_surge(0.5, 30, "raid")
    Surge.objects.filter(pk=surge.pk).update(ends_at=timezone.now() + timedelta(seconds=0.3))
    measures.changed()
    assert throttling.check("v", "reply").limit == 5
    time.sleep(0.4)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_surge_whose_end_passes_is_told_by_the_background_thread(redis_server, policy, celery_worker, told):
    from throttling.engine.countermeasures.in_force import measures

    _surge_just_ended(policy)
    assert throttling.check("v", "reply").limit == 10
    measures.flush()  # the background thread's look: the end has passed, a task says so
    measures.flush()  # and says it once per process
    alert = wait_for(lambda: Alert.objects.filter(kind="surge_ended").first(), message="the end's alert")
    assert alert.params["early"] is False
    time.sleep(0.5)
    assert Alert.objects.filter(kind="surge_ended").count() == 1
    assert Surge.objects.get().end_told


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_surge_whose_end_passes_just_before_the_surges_are_loaded_again_is_told(
    redis_server, policy, celery_worker, monkeypatch
):
    # Only surges in force are loaded: a load after the end, before the background thread's look,
    # must not leave it untold. The background thread does not look here, so only the load can tell it.
    from throttling.engine.background.poller import poller
    from throttling.engine.countermeasures.in_force import measures

    monkeypatch.setattr(poller, "_tasks", [task for task in poller._tasks if task != measures.flush])
    _surge_just_ended(policy)
    measures.changed()  # another change anywhere: the next decision loads the surges again
    assert throttling.check("v", "reply").limit == 10
    assert measures.surges.surges == ()
    alert = wait_for(lambda: Alert.objects.filter(kind="surge_ended").first(), message="the end's alert")
    assert alert.params["early"] is False
