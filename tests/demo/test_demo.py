"""The demo community: its API, its post page and `python -m demo_site.run`, against real Redis servers."""

import base64
import contextlib
import html
import io
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.test.utils import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

import throttling
import throttling.common.words
import throttling.engine.deciding.penalty_codec
import throttling.engine.decision
from demo_site import DEMO_PASSWORD
from demo_site import settings as demo_settings
from demo_site.models import Like, Post, Reply
from tests.support.helpers import ROOT, alive, broker_url, ensure_default_ladder, free_port, retry_after
from throttling import penalties
from throttling.models import OffenceRecord, Penalty


@pytest.fixture
def post(member):
    return Post.objects.create(author=member, title="Limits", body="How many replies a minute?")


@pytest.fixture
def api(member):
    client = APIClient()
    client.force_login(member)
    return client


def quota_line(response):
    match = re.search(r'id="quota">([^<]*)<', response.content.decode())
    assert match, response.content.decode()
    return match.group(1)


# --- API -------------------------------------------------------------------------------------


@pytest.mark.urls("demo_site.urls")
@pytest.mark.usefixtures("redis_server")
def test_api_replies_are_refused_at_the_policy_limit(api, post, policy):
    policy("reply", 60, 3, verb="replied")
    url = f"/api/posts/{post.pk}/replies/"
    for n in range(3):
        response = api.post(url, {"body": f"reply {n}"}, format="json")
        assert response.status_code == 201, response.content
        assert response.json()["author"] == "alice"

    refused = api.post(url, {"body": "one too many"}, format="json")

    assert refused.status_code == 429
    assert 1 <= retry_after(refused) <= 60
    detail = refused.json()["detail"]
    assert detail.startswith("You have replied too often. Try again in ")
    assert f"{retry_after(refused)} second" in detail
    assert list(post.replies.values_list("body", flat=True)) == ["reply 0", "reply 1", "reply 2"]


@pytest.mark.urls("demo_site.urls")
@pytest.mark.usefixtures("redis_server")
def test_api_empty_reply_is_rejected_without_using_quota(api, post, policy):
    policy("reply", 60, 2, verb="replied")
    url = f"/api/posts/{post.pk}/replies/"
    for body in ["", "   ", "\n", ""]:
        response = api.post(url, {"body": body}, format="json")
        assert response.status_code == 400
        assert "body" in response.json()

    assert api.post(url, {"body": "first"}, format="json").status_code == 201
    assert api.post(url, {"body": "second"}, format="json").status_code == 201
    assert api.post(url, {"body": "third"}, format="json").status_code == 429
    assert post.replies.count() == 2


@pytest.mark.urls("demo_site.urls")
@pytest.mark.usefixtures("redis_server")
def test_api_posts_are_throttled_and_invalid_ones_refunded(api, policy):
    policy("post", 600, 1, verb="posted")
    assert api.post("/api/posts/", {"title": "", "body": "no title"}, format="json").status_code == 400

    created = api.post("/api/posts/", {"title": "Hello", "body": "First thread"}, format="json")
    assert created.status_code == 201
    assert created.json()["author"] == "alice"
    assert created.json()["reply_count"] == 0

    refused = api.post("/api/posts/", {"title": "Again", "body": "Second"}, format="json")
    assert refused.status_code == 429
    assert refused.json()["detail"].startswith("You have posted too often.")
    assert list(Post.objects.values_list("title", flat=True)) == ["Hello"]
    # Reading is not behaviour: safe methods never count.
    listing = api.get("/api/posts/")
    assert listing.status_code == 200
    assert [p["title"] for p in listing.json()] == ["Hello"]


@pytest.mark.urls("demo_site.urls")
@pytest.mark.usefixtures("redis_server")
def test_api_like_and_unlike_share_the_like_quota(api, member, post, policy):
    policy("like", 60, 3, verb="liked")
    url = f"/api/posts/{post.pk}/like/"

    assert api.post(url).status_code == 201
    assert api.delete(url).json() == {"post": post.pk, "liked": False, "like_count": 0}
    # Nothing to unlike: a 404, and the reserved "like" is given back.
    assert api.delete(url).status_code == 404
    assert api.post(url).json() == {"post": post.pk, "liked": True, "like_count": 1}

    refused = api.delete(url)
    assert refused.status_code == 429
    assert refused.json()["detail"].startswith("You have liked too often.")
    assert Like.objects.filter(post=post, user=member).exists()


@pytest.mark.urls("demo_site.urls")
@pytest.mark.usefixtures("redis_server")
def test_api_refuses_anonymous_writes_without_counting_them(post, policy, redis_client):
    policy("reply", 60, 1)
    response = APIClient().post(f"/api/posts/{post.pk}/replies/", {"body": "hi"}, format="json")
    assert response.status_code == 403
    assert redis_client.keys("throttling:{*") == []
    assert not post.replies.exists()


# --- The post page ---------------------------------------------------------------------------


@pytest.mark.urls("demo_site.urls")
@pytest.mark.usefixtures("redis_server")
def test_page_shows_the_replies_left_and_counts_down(browser, post, policy):
    policy("reply", 60, 3, verb="replied")
    url = post.get_absolute_url()
    assert quota_line(browser.get(url)) == "You can reply 3 more times (limit: 3)."

    response = browser.post(url, {"body": "Three feels right"})
    reply = post.replies.get()
    assert response.status_code == 302
    assert response["Location"] == f"{url}#reply-{reply.pk}"

    page = browser.get(url)
    assert quota_line(page) == "You can reply 2 more times (limit: 3)."
    assert "Three feels right" in page.content.decode()
    browser.post(url, {"body": "Two more"})
    assert quota_line(browser.get(url)) == "You can reply 1 more time (limit: 3)."


@pytest.mark.urls("demo_site.urls")
@pytest.mark.usefixtures("redis_server")
def test_page_rejects_an_empty_reply_with_400_and_keeps_the_quota(browser, post, policy):
    policy("reply", 60, 2, verb="replied")
    url = post.get_absolute_url()

    rejected = browser.post(url, {"body": "   "})

    assert rejected.status_code == 400
    assert "This field is required." in rejected.content.decode()
    # The page is rendered after the decorator's refund, so it already shows the full quota.
    assert quota_line(rejected) == "You can reply 2 more times (limit: 2)."
    assert browser.post(url, {"body": "one"}).status_code == 302
    assert browser.post(url, {"body": "two"}).status_code == 302
    assert browser.post(url, {"body": "three"}).status_code == 429


@pytest.mark.urls("demo_site.urls")
@pytest.mark.usefixtures("redis_server")
def test_refused_reply_gets_the_429_page_with_the_members_text(browser, post, policy):
    policy("reply", 60, 1, verb="replied")
    url = post.get_absolute_url()
    assert browser.post(url, {"body": "First!"}).status_code == 302

    refused = browser.post(url, {"body": "A second thought, <kept> safe"})

    assert refused.status_code == 429
    wait = retry_after(refused)
    assert 1 <= wait <= 60
    content = refused.content.decode()
    assert "You have replied too often. Try again in" in content
    assert "A second thought, &lt;kept&gt; safe" in content
    assert list(post.replies.values_list("body", flat=True)) == ["First!"]

    waiting = quota_line(browser.get(url))
    match = re.fullmatch(r"You can reply again in (\d+) seconds? \(limit: 1\)\.", waiting)
    assert match, waiting
    assert 1 <= int(match.group(1)) <= wait


@pytest.mark.urls("demo_site.urls")
@pytest.mark.usefixtures("redis_server")
def test_policy_edit_shows_on_the_page_at_once_and_keeps_history(browser, post, policy):
    reply_policy = policy("reply", 60, 5, verb="replied")
    url = post.get_absolute_url()
    browser.post(url, {"body": "one"})
    browser.post(url, {"body": "two"})
    assert quota_line(browser.get(url)) == "You can reply 3 more times (limit: 5)."

    reply_policy.max_count = 3
    reply_policy.save()

    assert quota_line(browser.get(url)) == "You can reply 1 more time (limit: 3)."


@pytest.mark.urls("demo_site.urls")
@pytest.mark.usefixtures("redis_server")
def test_staff_see_that_they_are_exempt(django_user_model, post, policy):
    policy("reply", 60, 1)
    staff = django_user_model.objects.create_user("mod", password="x", is_staff=True)
    client = Client()
    client.force_login(staff)
    url = post.get_absolute_url()
    for _ in range(3):
        assert client.post(url, {"body": "moderating"}).status_code == 302
    assert "No reply limit applies to you (staff are exempt)." in client.get(url).content.decode()


@pytest.mark.urls("demo_site.urls")
@pytest.mark.usefixtures("redis_server")
def test_visitors_read_but_are_sent_to_log_in_before_any_quota_is_spent(post, policy, redis_client):
    policy("reply", 60, 1)
    client = Client()
    url = post.get_absolute_url()

    page = client.get(url)
    assert page.status_code == 200
    assert "to reply." in page.content.decode()
    assert 'id="quota"' not in page.content.decode()

    response = client.post(url, {"body": "drive-by"})
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={url}"
    assert redis_client.keys("throttling:{*") == []
    assert not post.replies.exists()


@pytest.mark.urls("demo_site.urls")
@pytest.mark.usefixtures("redis_server")
def test_home_lists_posts_with_their_counts(member, post, policy):
    Reply.objects.create(post=post, author=member, body="a")
    Reply.objects.create(post=post, author=member, body="b")
    Like.objects.create(post=post, user=member)
    content = Client().get("/").content.decode()
    assert f'href="/posts/{post.pk}/">Limits</a>' in content
    assert "2 replies · 1 like" in content
    assert DEMO_PASSWORD in content


@pytest.mark.urls("demo_site.urls")
def test_every_action_the_demo_uses_has_a_default_policy(db):
    from throttling.checks import check_view_actions
    from throttling.models import ActionPolicy

    call_command("demo_seed", stdout=io.StringIO())  # the demo's community controls
    assert check_view_actions() == []
    ActionPolicy.objects.all().delete()
    assert sorted(w.obj for w in check_view_actions()) == ["like", "post", "reply", "thread-reply"]


def test_seed_command_is_idempotent_and_restores_passwords(db, django_user_model):
    first = io.StringIO()
    call_command("demo_seed", stdout=first)
    assert "2 posts seeded" in first.getvalue()
    member = django_user_model.objects.get(username="alice")
    member.set_password("changed")
    member.save()

    again = io.StringIO()
    call_command("demo_seed", stdout=again)

    assert "0 posts seeded" in again.getvalue()

    users = {u.username: u for u in django_user_model.objects.all()}
    assert sorted(users) == ["admin", "alice", "bob"]
    assert users["admin"].is_superuser and users["admin"].is_staff
    assert not users["alice"].is_staff and not users["bob"].is_staff
    assert all(u.check_password(DEMO_PASSWORD) for u in users.values())
    assert Post.objects.count() == 2
    assert Reply.objects.count() == 1


# --- Penalties on the demo's pages -----------------------------------------------------------


def notices(response):
    # timesince() joins numbers and units with a no-break space.
    content = response.content.decode().replace("\xa0", " ")
    return re.findall(r'<div class="notice (\w+)"[^>]*>\s*(.*?)\s*</div>', content, re.DOTALL)


def page_messages(response):
    content = html.unescape(response.content.decode())
    return re.findall(r'<ul class="messages"><li class="([^"]*)">(.*?)</li>', content, re.DOTALL)


@pytest.mark.urls("demo_site.urls")
@pytest.mark.usefixtures("redis_server")
def test_members_see_their_penalty_in_force_and_a_warning_once(
    browser, member, post, policy, django_user_model, settings
):
    settings.MIDDLEWARE = demo_settings.MIDDLEWARE  # the demo's own, with the notices
    ensure_default_ladder()
    policy("reply", 60, 5, verb="replied")
    assert notices(browser.get("/")) == [] and page_messages(browser.get("/")) == []
    hour_ago = timezone.now() - timedelta(hours=1)
    Penalty.objects.create(
        user=member,
        action="reply",
        level=1,
        starts_at=hour_ago,
        ends_at=hour_ago,
        reason="5 refused replies.",
        automatic=True,
    )

    # The next page tells the member once, as a message; a warning is no banner of its own.
    page = browser.get("/")
    assert notices(page) == []
    assert page_messages(page) == [
        (
            "throttling-notice warning",
            "You received a warning for “reply”: nothing is blocked this time, but doing it again may "
            "restrict your account. Reason: 5 refused replies.",
        )
    ]
    assert page_messages(browser.get("/")) == []

    block = penalties.apply_penalty(member, level=2, duration=timedelta(minutes=15), action="reply", reason="Spam.")
    page = browser.get(post.get_absolute_url())
    [(kind, text)] = notices(page)
    assert kind == "restricted"
    assert f"You cannot use “reply” until {throttling.common.words.local_time(block.ends_at)} (level 2)." in text
    assert "Reason: Spam. A moderator can lift this if you think it is a mistake." in text
    # The reply box says why, in the words of the 429 (the penalty is mirrored in Redis).
    info = throttling.engine.deciding.penalty_codec.PenaltyInfo(block.pk, 2, "reply", block.ends_at, "Spam.")
    assert quota_line(page) == throttling.common.words.penalty_message(info, "reply")
    # No reply form while it lasts, but when the member may reply again.
    assert 'name="body"' not in page.content.decode() and "Post reply" not in page.content.decode()
    closed = re.search(r'id="reply-closed">([^<]*)<', page.content.decode()).group(1)
    assert (
        closed
        == f"You can reply again from {throttling.common.words.local_time(block.ends_at)}, when the restriction ends."
    )
    # Only the member's own penalties, and only members.
    other = Client()
    other.force_login(django_user_model.objects.create_user("bob", password="pw"))
    assert notices(other.get("/")) == []
    assert notices(Client().get("/")) == []

    penalties.lift(block, reason="appeal")
    assert notices(browser.get("/")) == []
    assert 'name="body"' in browser.get(post.get_absolute_url()).content.decode()  # the form is back


# --- demo_traffic ----------------------------------------------------------------------------


@pytest.mark.worker
@pytest.mark.urls("demo_site.urls")
@pytest.mark.django_db(transaction=True)
def test_demo_traffic_plays_a_spammer_to_a_warning_then_a_block(celery_worker, policy, django_user_model):
    policy("reply", 60, 3, verb="replied")
    port = free_port()  # nothing listens: the command calls the views in process
    out = io.StringIO()

    call_command("demo_traffic", "--addr", f"127.0.0.1:{port}", stdout=out)

    played = out.getvalue()
    spammer = django_user_model.objects.get(username="spammer")
    assert spammer.check_password(DEMO_PASSWORD) and not spammer.is_staff
    warning, block = Penalty.objects.filter(user=spammer).order_by("pk")
    assert (warning.level, warning.action, warning.automatic, warning.is_warning) == (1, "reply", True, True)
    assert (block.level, block.action, block.ends_at - block.starts_at) == (2, "reply", timedelta(minutes=15))
    # The member is refused by the penalty itself now, not by the limit.
    decision = throttling.check(spammer, "reply")
    assert decision.reason == throttling.engine.decision.PENALISED and decision.penalty.penalty_id == block.pk

    assert "against the demo’s views in this process" in played
    assert (
        "\n  #1–#3 admitted 201\n  #4    refused  429  offence 1 of 5: You have replied too often. Try again in "
    ) in played
    assert (
        "\n  #8    refused  429  offence 5 of 5\n  offence run reached the threshold (5): escalation queued\n"
    ) in played
    assert played.count("escalation queued") == 2
    assert f"  penalty #{warning.pk}: level 1 (Warning) on “reply”: a warning, nothing more is blocked\n" in played
    assert (
        f"  penalty #{block.pk}: level 2 (15 minutes) on “reply”, until {throttling.common.words.local_time(block.ends_at)}\n"
        in played
    )
    info = throttling.engine.deciding.penalty_codec.PenaltyInfo.of(block)
    assert (info.level, info.action) == (2, "reply")
    assert "refused attempts at “reply”" in throttling.common.words.penalty_message(info, "reply")
    assert f"refused  429  by the penalty: {throttling.common.words.penalty_message(info, 'reply')}\n" in played
    assert f"http://127.0.0.1:{port}/admin/throttling/penalty/{block.pk}/change/" in played
    assert f"http://127.0.0.1:{port}/admin/throttling/penalty/report/" in played

    # Played again, the member is still blocked: the command says so instead of spamming.
    again = io.StringIO()
    call_command("demo_traffic", "--addr", f"127.0.0.1:{port}", stdout=again)
    assert f"spammer is already restricted from “reply” (penalty #{block.pk}, level 2)" in again.getvalue()
    assert Penalty.objects.filter(user=spammer).count() == 2


@pytest.mark.urls("demo_site.urls")
def test_demo_traffic_says_plainly_when_no_worker_applies_the_penalty(redis_server, policy):
    ensure_default_ladder()
    policy("reply", 60, 2, verb="replied")
    queue = f"nobody-{free_port()}"  # a queue no worker consumes
    broker = redis.Redis.from_url(broker_url(redis_server))
    try:
        with override_settings(THROTTLING_CELERY_QUEUE=queue), pytest.raises(CommandError) as refused:
            call_command("demo_traffic", "--addr", f"127.0.0.1:{free_port()}", "--wait", "1", stdout=io.StringIO())
        # The escalation was queued; nobody took it.
        assert broker.llen(queue) == 1
    finally:
        broker.delete(queue)
        broker.close()
    message = str(refused.value)
    assert message.startswith("No penalty within 1 s: the Celery worker does not seem to be running.")
    assert "python -m celery -A demo_site worker" in message


@pytest.mark.urls("demo_site.urls")
def test_demo_traffic_needs_the_running_demo_or_a_named_redis(db):
    ensure_default_ladder()
    port = free_port()
    with override_settings(DEMO_REDIS_URL=None), pytest.raises(CommandError) as refused:
        call_command("demo_traffic", "--addr", f"127.0.0.1:{port}", stdout=io.StringIO())
    assert str(refused.value).startswith(f"No demo answers at http://127.0.0.1:{port}/. Start it with `make demo`")


def test_demo_traffic_history_is_labelled_sample_data_and_replaced_on_rerun(db, django_user_model):
    ensure_default_ladder()
    out = io.StringIO()
    call_command("demo_traffic", "--history", "--rounds", "0", stdout=out)
    total = int(re.match(r"Sample history: (\d+) refused attempts", out.getvalue()).group(1))

    rows = OffenceRecord.objects.all()
    assert total > 0 and sum(r.count for r in rows) == total
    members = {u.pk: u for u in django_user_model.objects.filter(username__startswith="sample-")}
    assert sorted(u.username for u in members.values()) == ["sample-ana", "sample-ben", "sample-chen"]
    assert all(not u.has_usable_password() and u.last_name == "(sample data)" for u in members.values())
    assert {r.user_id for r in rows} <= {*members, None}
    assert {r.identity for r in rows if r.user_id is None} <= {"ip:192.0.2.10", "ip:198.51.100.7"}
    now = timezone.now()
    assert all(now - timedelta(days=31) < r.hour <= now for r in rows)
    sample_penalties = list(Penalty.objects.all())
    assert sample_penalties
    assert all(p.user_id in members and p.reason.startswith("Sample data") for p in sample_penalties)
    assert not Penalty.objects.active().exists()  # all long over: nobody is blocked by sample data

    call_command("demo_traffic", "--history", "--rounds", "0", stdout=io.StringIO())
    assert sum(OffenceRecord.objects.values_list("count", flat=True)) == total
    assert Penalty.objects.count() == len(sample_penalties)


# --- python -m demo_site.run -----------------------------------------------------------------

START_TIMEOUT = 90


class Demo:
    """`python -m demo_site.run` as a child process, its output collected line by line."""

    def __init__(self, tmp_path, **env):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.dir = tmp_path / "demo"
        child_env = {k: v for k, v in os.environ.items() if not k.startswith("DEMO_")}
        child_env.update(
            DJANGO_SETTINGS_MODULE="demo_site.settings",
            DEMO_DIR=str(self.dir),
            DEMO_ADDR=f"127.0.0.1:{self.port}",
            PYTHONUNBUFFERED="1",
            **env,
        )
        self.lines = []
        self.child_pids = []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "demo_site.run"],
            cwd=ROOT,
            env=child_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line)

    @property
    def output(self):
        return "".join(self.lines)

    def wait_until_serving(self):
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"the demo exited early:\n{self.output}"
            try:
                with urllib.request.urlopen(self.base + "/", timeout=2) as response:
                    if response.status == 200:
                        self.child_pids = self._children()
                        return response.read().decode()
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"no HTTP 200 on / within {START_TIMEOUT} s:\n{self.output}")

    def wait_for_output(self, text, timeout=START_TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.output:
                return self.output
            assert self.process.poll() is None, f"the demo exited early:\n{self.output}"
            time.sleep(0.1)
        raise AssertionError(f"{text!r} not printed within {timeout} s:\n{self.output}")

    def env(self, **extra):
        """The environment a second command in another terminal would have."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("DEMO_")}
        env.update(
            DJANGO_SETTINGS_MODULE="demo_site.settings",
            DEMO_DIR=str(self.dir),
            DEMO_ADDR=f"127.0.0.1:{self.port}",
            **extra,
        )
        return env

    def request(self, path, data=None, user=None):
        headers = {}
        if user:
            token = base64.b64encode(f"{user}:{DEMO_PASSWORD}".encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        req = urllib.request.Request(self.base + path, data=body, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def stop(self, sig):
        self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=30)
        finally:
            self._reader.join(timeout=5)

    def _children(self):
        """(pid, command line) of the demo's children, as Linux reports them."""
        pid = self.process.pid
        try:
            pids = [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        except OSError:
            return []
        return [(p, _cmdline(p)) for p in pids]

    def kill(self):
        """Clean-up after a failed test: the demo and the children it may have left behind."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for pid, cmdline in self.child_pids:
            # Only if the pid still runs the same command: it may have been reused.
            if cmdline and _cmdline(pid) == cmdline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def _cmdline(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def accepts_connections(port):
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def banner_pid(output, name):
    match = re.search(rf"^  {name} +pid (\d+):", output, re.MULTILINE)
    assert match, output
    return int(match.group(1))


def penalty_levels(db_path, username):
    """Levels of a member's penalties, read from the demo's own SQLite file."""
    with contextlib.closing(sqlite3.connect(db_path)) as db:
        rows = db.execute(
            "SELECT p.level FROM throttling_penalty p JOIN auth_user u ON u.id = p.user_id "
            "WHERE u.username = ? ORDER BY p.id",
            (username,),
        ).fetchall()
    return [level for (level,) in rows]


@pytest.mark.slow
@pytest.mark.demo_run
def test_run_starts_redis_migrates_seeds_serves_and_cleans_up(tmp_path):
    demo = Demo(tmp_path)
    try:
        home = demo.wait_until_serving()
        match = re.search(r"redis://127\.0\.0\.1:(\d+)/0 \(throwaway redis-server, pid (\d+)", demo.output)
        assert match, demo.output
        redis_port, redis_pid = int(match.group(1)), int(match.group(2))
        assert alive(redis_pid)
        assert "How fast is too fast?" in home
        assert (demo.dir / "db.sqlite3").is_file()

        status, body = demo.request("/api/posts/")
        assert status == 200 and '"title":"Welcome to the demo community"' in body
        # Basic auth, the seeded password and the throttle's Redis, end to end.
        status, body = demo.request("/api/posts/1/replies/", {"body": "from the test"}, user="alice")
        assert status == 201, body
        status, body = demo.request("/api/posts/1/replies/", {"body": ""}, user="alice")
        assert status == 400, body

        # The banner comes once the worker consumes and beat schedules.
        output = demo.wait_for_output("Ctrl-C stops the server, the worker, beat and Redis.")
        assert f"Password         {DEMO_PASSWORD}" in output
        # A first start: the system checks run once the policies are seeded, and find nothing.
        assert "throttling.W" not in output and "System check identified some issues" not in output, output
        worker_pid, beat_pid = banner_pid(output, "Celery worker"), banner_pid(output, "Celery beat")
        assert alive(worker_pid) and alive(beat_pid)
        assert re.search(r"^worker \| .*demo@\S+ ready\.$", output, re.MULTILINE), output
        assert re.search(r"^beat   \| .*beat: Starting\.\.\.$", output, re.MULTILINE), output
        assert f"DEMO_DIR={demo.dir.resolve()} DEMO_ADDR=127.0.0.1:{demo.port} " in output
        # Beat's schedule lives with the demo's state, not in the repository.
        assert list(demo.dir.glob("celerybeat-schedule*"))
        assert not list(ROOT.glob("celerybeat-schedule*"))

        # The spammer, from "another terminal": over HTTP, the demo's own worker applies the ladder.
        traffic = subprocess.run(
            [sys.executable, "manage.py", "demo_traffic"],
            cwd=ROOT,
            env=demo.env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert traffic.returncode == 0, traffic.stdout + traffic.stderr + demo.output
        played = traffic.stdout
        assert f"against the demo server at http://127.0.0.1:{demo.port}/ (over HTTP)" in played
        assert played.count("escalation queued") == 2
        assert "level 1 (Warning) on “reply”: a warning" in played
        assert "level 2 (15 minutes) on “reply”, until" in played
        assert "refused  429  by the penalty: Your account is restricted for this action (“reply”)" in played
        assert f"http://127.0.0.1:{demo.port}/admin/throttling/penalty/" in played
        assert penalty_levels(demo.dir / "db.sqlite3", "spammer") == [1, 2]
        assert re.search(r"^worker \| .*escalate_offender\[.*\] succeeded", demo.output, re.MULTILINE)

        # Ctrl-C as a terminal would send it to the script.
        assert demo.stop(signal.SIGINT) == 0, demo.output
        assert not alive(redis_pid), f"redis-server {redis_pid} outlived the demo"
        assert not alive(worker_pid), f"the Celery worker {worker_pid} outlived the demo"
        assert not alive(beat_pid), f"Celery beat {beat_pid} outlived the demo"
        assert "worker | worker: Warm shutdown" in demo.output
        assert not accepts_connections(redis_port)
        assert not accepts_connections(demo.port)
    finally:
        demo.kill()


@pytest.mark.slow
@pytest.mark.demo_run
def test_run_uses_demo_redis_url_and_leaves_that_server_running(tmp_path, redis_server, redis_client):
    # Another database for the demo's broker: its worker must not consume the suite's queue (db 1).
    broker = redis_server.url.rsplit("/", 1)[0] + "/2"
    demo = Demo(tmp_path, DEMO_REDIS_URL=redis_server.url, DEMO_BROKER_URL=broker)
    try:
        demo.wait_until_serving()
        demo.wait_for_output("Ctrl-C stops the server")
        assert re.search(r"^worker \| .*Connected to redis://.*/2$", demo.output, re.MULTILINE), demo.output
        assert f"Redis     {redis_server.url} (from DEMO_REDIS_URL" in demo.output
        assert "throwaway" not in demo.output

        status, body = demo.request("/api/posts/1/like/", {}, user="bob")
        assert status == 201, body
        assert redis_client.keys("throttling:{*}:like:log") != []

        assert demo.stop(signal.SIGTERM) == 0, demo.output
        assert not accepts_connections(demo.port)
        assert redis_server.running and redis_client.ping()
    finally:
        demo.kill()


# --- a second terminal, a busy port ------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.demo_run
def test_other_commands_use_the_running_demos_redis(tmp_path):
    """The demo writes its Redis URL into DEMO_DIR; the settings of any manage.py command read it."""
    import subprocess
    import sys

    (tmp_path / "redis-url").write_text("redis://127.0.0.1:45678/0\n")
    env = {k: v for k, v in os.environ.items() if k != "DEMO_REDIS_URL"}
    env.update(DEMO_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="demo_site.settings")
    code = "from django.conf import settings; print(settings.CACHES['default']['LOCATION'])"
    out = subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); " + code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "redis://127.0.0.1:45678/0"
    (tmp_path / "redis-url").unlink()
    out = subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); " + code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "redis://127.0.0.1:6379/0"  # no demo running: the guess


def test_a_busy_port_says_which_variable_picks_another():
    import socket as _socket

    from demo_site.run import busy_port_message, port_in_use

    with _socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        addr = f"127.0.0.1:{taken.getsockname()[1]}"
        assert port_in_use(addr)
        message = busy_port_message(addr)
    assert "DEMO_ADDR=127.0.0.1:" in message and "already listening" in message


@pytest.mark.urls("demo_site.urls")
@pytest.mark.usefixtures("redis_server")
def test_the_demos_429_page_is_in_the_demos_layout_and_says_the_restriction_once(browser, member, post, policy):
    ensure_default_ladder()
    policy("reply", 60, 5, verb="replied")
    with override_settings(THROTTLING_BASE_TEMPLATE="demo_site/base.html"):
        penalties.apply_penalty(member, level=2, duration=timedelta(minutes=15), action="reply", reason="Spam.")
        response = browser.post(post.get_absolute_url(), {"body": "my careful reply"})
    content = response.content.decode()
    assert response.status_code == 429
    assert "throttling demo</title>" in content  # the demo's own layout
    assert notices(response) == []  # the page's own message says it; no banner repeats it
    assert content.count("restricted for this action") == 1
    # The form's label, over the reply, editable, in a form that posts it to the same page again.
    assert '<label for="throttling-field-1">Your reply</label>' in content
    assert '<textarea id="throttling-field-1" name="body" rows="6">my careful reply</textarea>' in content
    assert f'<form class="throttling-resend" method="post" action="{post.get_absolute_url()}">' in content


@pytest.mark.urls("demo_site.urls")
@pytest.mark.usefixtures("redis_server")
def test_the_language_switch_turns_the_demo_and_its_limits_chinese(browser, post, policy, settings):
    from demo_site import settings as demo_settings

    settings.MIDDLEWARE = demo_settings.MIDDLEWARE
    settings.LANGUAGES = demo_settings.LANGUAGES
    settings.LOCALE_PATHS = demo_settings.LOCALE_PATHS
    policy("reply", 60, 1, verb="replied")
    url = post.get_absolute_url()
    switched = browser.post("/i18n/setlang/", {"language": "zh-hans", "next": url})
    assert switched.status_code == 302 and switched["Location"] == url
    page = browser.get(url).content.decode()
    assert 'lang="zh-hans"' in page and "您还可以回复 1 次（限制：1）。" in page
    browser.post(url, {"body": "第一条"})
    refused = browser.post(url, {"body": "第二条"})
    assert refused.status_code == 429
    text = refused.content.decode()
    assert "请慢一点" in text and "您回复太频繁了" in text and "第二条" in text
    browser.post("/i18n/setlang/", {"language": "en", "next": url})
    assert "You can reply again in" in browser.get(url).content.decode()


# --- demo_wave -------------------------------------------------------------------------------


@pytest.mark.urls("demo_site.urls")
def test_demo_wave_is_stopped_by_the_repeated_content_limit(redis_server, policy, django_user_model):
    policy("reply", 60, 6, verb="replied")  # no limit on repeated content: the command sets one
    out = io.StringIO()
    call_command("demo_wave", "--addr", f"127.0.0.1:{free_port()}", stdout=out)
    played = out.getvalue()
    assert "The “reply” policy had no limit on repeated content: set one" in played
    lines = [line.split()[:3] for line in played.splitlines() if line.startswith("  wave-")]
    assert lines[:6] == [
        ["wave-1", "admitted", "201"],
        ["wave-2", "admitted", "201"],
        ["wave-3", "admitted", "201"],
        ["wave-4", "refused", "429"],
        ["wave-5", "refused", "429"],
        ["wave-6", "refused", "429"],
    ]
    assert "wave-4   refused  429  This was just posted by several members; it looks like spam." in played
    # The refused accounts disguised the spam as a reader cannot see: the same post all the same.
    assert "    (invisible characters inside every word)" in played
    assert "    (Cyrillic lookalike letters)" in played
    assert "    (fullwidth letters and accents)" in played
    assert "wave-1   again    429  You have already posted this." in played
    assert "    (padded with 4,500 invisible characters)" in played
    # A short post with a link, the link spelled six ways: a wave from the fourth account.
    links = [line.split()[:3] for line in played.splitlines() if line.startswith("  link-")]
    assert [line[1] for line in links] == ["admitted"] * 3 + ["refused"] * 3
    assert "6 admitted, 7 refused as repeated content (a wave, or a member's own repeat)." in played
    # Each account posted its own variant (a word, an emoji, a tracking parameter): the replies saved.
    from demo_site.models import Reply

    assert Reply.objects.filter(author__username__startswith="wave-").count() == 3
    assert Reply.objects.filter(author__username__startswith="link-").count() == 3
