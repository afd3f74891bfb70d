"""The throttling report admin page and its CSV export, against known offence and penalty rows."""

import csv
import io
import re
import time
from datetime import timedelta
from html import unescape
from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.db.models import Sum
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone, translation

import throttling
import throttling.engine.offences.report_batches
from tests.support.helpers import wait_for
from tests.support.report import day_start, penalty
from throttling.engine.identity import member_identity
from throttling.models import OffenceRecord

REPORT = "admin:throttling_report"
CSV = "admin:throttling_report_csv"
NO_OFFENCES = "No offences in this period."
# Session and user of the moderator, then one query each: offences per hour and action, top
# offenders, their actions, their accounts, their penalties, the ladder's names, penalties in
# force (and their count when the list is cut), penalties per day, penalty totals, and the surges in
# force (the banner of every page of the app's admin).
MAX_QUERIES = 13


def offence(identity, action, when, count, user=None):
    return OffenceRecord.objects.create(identity=identity, action=action, hour=when, count=count, user=user)


class Charts(HTMLParser):
    """The report's <svg> charts by data-chart name: their attributes and bars (rect.bar with tooltip)."""

    def __init__(self, html):
        super().__init__()
        self.charts, self._chart, self._bar, self._in_title = {}, None, None, False
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "svg" and "data-chart" in attrs:
            self._chart = self.charts[attrs["data-chart"]] = {"attrs": attrs, "bars": [], "texts": []}
        elif tag == "rect" and self._chart is not None and "bar" in attrs.get("class", "").split():
            self._bar = {**attrs, "title": ""}
            self._chart["bars"].append(self._bar)
        elif tag == "title" and self._bar is not None:
            self._in_title = True
        elif tag == "text" and self._chart is not None:
            self._chart["texts"].append("")

    def handle_endtag(self, tag):
        if tag == "svg":
            self._chart = None
        elif tag == "rect":
            self._bar = None
        elif tag == "title":
            self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self._bar["title"] += data
        elif self._chart is not None and self._chart["texts"] and self.lasttag == "text":
            self._chart["texts"][-1] += data.strip()


def charts_of(response):
    return Charts(response.content.decode()).charts


def offenders_listed(html):
    """The "Who" column of the top offenders table, top to bottom."""
    return [
        unescape(name).strip()
        for name in re.findall(r'<th scope="row" class="who"[^>]*>(?:<a href="[^"]*">)?([^<]+)', html)
    ]


def csv_rows(response):
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith('attachment; filename="throttling-')
    return list(csv.reader(io.StringIO(response.content.decode())))


def height(bar):
    return float(bar["height"])


# Who may see it


@pytest.mark.django_db
def test_report_renders_for_a_superuser_with_links_back(admin_client):
    response = admin_client.get(reverse(REPORT))
    assert response.status_code == 200
    html = response.content.decode()
    assert "<h1>Throttling report</h1>" in html
    for name in (
        "admin:throttling_penalty_changelist",
        "admin:throttling_penaltystep_changelist",
        "admin:throttling_actionpolicy_changelist",
    ):
        assert f'href="{reverse(name)}"' in html, name
    assert f'href="{reverse(CSV)}?days=30"' in html
    assert f'href="{reverse(CSV)}?days=30&amp;kind=penalties"' in html


@pytest.mark.django_db
def test_report_and_csv_are_for_staff_with_the_view_penalty_permission(client, django_user_model):
    login = reverse("admin:login")
    for url in (reverse(REPORT), reverse(CSV)):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(login)
    member = django_user_model.objects.create_user("member", password="pw")
    client.force_login(member)
    for url in (reverse(REPORT), reverse(CSV)):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(login)
    staff = django_user_model.objects.create_user("moderator", password="pw", is_staff=True)
    client.force_login(staff)
    assert client.get(reverse(REPORT)).status_code == 403
    assert client.get(reverse(CSV)).status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="view_penalty", content_type__app_label="throttling"))
    staff = django_user_model.objects.get(pk=staff.pk)  # a fresh permission cache
    client.force_login(staff)
    now = timezone.now()
    penalty(member, now, timedelta(hours=1))
    response = client.get(reverse(REPORT))
    assert response.status_code == 200
    assert response.context["totals"]["in_force"] == 1
    assert "Lift…" not in response.content.decode()  # that takes throttling.lift_penalty
    assert client.get(reverse(CSV)).status_code == 200


# Charts


@pytest.mark.django_db
def test_charts_have_one_bar_per_day_and_action_with_tooltips(admin_client):
    offence("u:1", "reply", day_start(0), 3)
    offence("u:1", "reply", day_start(0, 1), 1)  # same day, another hour: the same bar segment
    offence("u:2", "post", day_start(0), 2)
    offence("u:1", "reply", day_start(1), 8)
    offence("ip:10.0.0.1", "flag", day_start(3), 1)
    offence("u:1", "reply", day_start(40), 50)  # outside the 30 days
    charts = charts_of(admin_client.get(reverse(REPORT)))

    daily = charts["offences-per-day"]
    assert daily["attrs"]["role"] == "img"
    assert "Offences per day over the last 30 days" in daily["attrs"]["aria-label"]
    titles = sorted(bar["title"].split(", ")[-1] for bar in daily["bars"])
    assert len(titles) == 4  # today: reply + post, yesterday: reply, 3 days ago: flag
    assert titles == sorted(["reply: 4 offences", "post: 2 offences", "reply: 8 offences", "flag: 1 offence"])
    by_title = {bar["title"].split(", ")[-1]: bar for bar in daily["bars"]}
    # Heights are proportional to the counts; today's post sits on today's reply.
    assert height(by_title["reply: 8 offences"]) == pytest.approx(2 * height(by_title["reply: 4 offences"]), abs=0.02)
    assert height(by_title["reply: 4 offences"]) == pytest.approx(2 * height(by_title["post: 2 offences"]), abs=0.02)
    today_reply, today_post = by_title["reply: 4 offences"], by_title["post: 2 offences"]
    assert today_reply["x"] == today_post["x"]
    assert float(today_post["y"]) + height(today_post) == pytest.approx(float(today_reply["y"]), abs=0.02)
    assert "0" in daily["texts"] and "8" in daily["texts"]  # y-axis ticks from 0 to the tallest day

    per_action = charts["offences-per-action"]
    assert per_action["attrs"]["role"] == "img"
    assert [bar["title"] for bar in per_action["bars"]] == [
        "reply: 12 offences in the period",
        "post: 2 offences in the period",
        "flag: 1 offence in the period",
    ]
    assert [height(b) for b in per_action["bars"]] == [16.0] * 3
    widths = [float(b["width"]) for b in per_action["bars"]]
    assert widths[0] == pytest.approx(6 * widths[1], abs=0.02)
    # Each action keeps its colour in both charts.
    colours = {bar["title"].split(":")[0]: bar["fill"] for bar in per_action["bars"]}
    assert by_title["post: 2 offences"]["fill"] == colours["post"] != colours["reply"]


@pytest.mark.django_db
def test_period_selector_changes_the_days_counted(admin_client):
    offence("u:1", "reply", day_start(2), 5)
    offence("u:1", "reply", day_start(10), 7)
    offence("u:1", "reply", day_start(60), 11)
    for days, total, bars in ((7, 5, 1), (30, 12, 2), (90, 23, 3)):
        response = admin_client.get(reverse(REPORT), {"days": days})
        assert response.context["totals"]["offences"] == total
        assert len(charts_of(response)["offences-per-day"]["bars"]) == bars
        assert f'<strong aria-current="page">last {days} days</strong>' in response.content.decode()


@pytest.mark.django_db
def test_an_unknown_period_says_so_and_shows_thirty_days(admin_client):
    offence("u:1", "reply", day_start(10), 7)
    response = admin_client.get(reverse(REPORT), {"days": "365"})
    assert response.status_code == 200
    html = response.content.decode()
    assert "“365” is not a period this report offers: choose 7, 30, 90 days." in unescape(html)
    assert response.context["totals"]["offences"] == 7
    response = admin_client.get(reverse(CSV), {"days": "x"})
    assert response.status_code == 400
    assert "“x” is not a period this report offers" in response.content.decode()


@pytest.mark.django_db
def test_empty_period_shows_a_friendly_message_instead_of_charts(admin_client):
    offence("u:1", "reply", day_start(45), 3)  # only outside the period
    response = admin_client.get(reverse(REPORT))
    html = response.content.decode()
    assert charts_of(response) == {}
    assert "data-chart" not in html
    assert html.count(NO_OFFENCES) == 3  # both offence charts and the offenders table
    assert "No penalties applied in this period." in html
    assert "No penalty is in force now." in html
    assert response.context["totals"]["offences"] == 0


@pytest.mark.django_db
def test_actions_beyond_six_share_one_colour_in_the_daily_chart(admin_client):
    for i, action in enumerate("abcdefgh"):
        offence("u:1", f"action-{action}", day_start(1), 10 - i)
    charts = charts_of(admin_client.get(reverse(REPORT)))
    daily = charts["offences-per-day"]["bars"]
    assert len(daily) == 6  # five actions of their own and "other actions"
    assert daily[-1]["title"].endswith("other actions: 12 offences")  # f, g and h: 5 + 4 + 3
    assert daily[-1]["fill"] not in {bar["fill"] for bar in daily[:-1]}
    assert len(charts["offences-per-action"]["bars"]) == 8


@pytest.mark.django_db
def test_chart_geometry_stays_plain_numbers_in_a_language_with_decimal_commas(admin_client, settings):
    settings.USE_THOUSAND_SEPARATOR = True
    offence("u:1", "reply", day_start(1), 1234)
    offence("u:1", "post", day_start(2), 3)
    with translation.override("de"):
        response = admin_client.get(reverse(REPORT))
    charts = charts_of(response)
    for chart in charts.values():
        for bar in chart["bars"]:
            for name in ("x", "y", "width", "height"):
                float(bar[name])  # "12,5" would not parse, nor draw
        assert re.fullmatch(r"0 0 \d+ \d+", chart["attrs"]["viewbox"])
    # The figures people read are in their language.
    assert "1.500" in charts["offences-per-day"]["texts"]
    assert "1.234" in charts["offences-per-action"]["texts"]


# Tables


@pytest.mark.django_db
def test_top_offenders_by_total_with_member_links_and_penalties_now(admin_client, django_user_model):
    alice = django_user_model.objects.create_user("alice")
    bob = django_user_model.objects.create_user("bob")
    offence(member_identity(alice.pk), "reply", day_start(1), 4, alice)
    offence(member_identity(alice.pk), "post", day_start(2), 3, alice)
    offence(member_identity(bob.pk), "reply", day_start(1), 2, bob)
    offence(member_identity(bob.pk), "reply", day_start(1, 5), 2, bob)
    offence(member_identity(bob.pk), "flag", day_start(3), 9, bob)
    offence("ip:192.0.2.7", "reply", day_start(0), 5)
    offence(member_identity(999), "reply", day_start(0), 1, None)  # a member since deleted
    now = timezone.now()
    penalty(bob, now - timedelta(minutes=5), timedelta(minutes=65), level=3, action="flag", automatic=True)
    penalty(alice, now - timedelta(hours=2), timedelta(hours=1))

    response = admin_client.get(reverse(REPORT))
    html = response.content.decode()
    assert offenders_listed(html) == ["bob", "alice", "anonymous visitors from 192.0.2.7", "member #999 (deleted)"]
    assert [row["offences"] for row in response.context["offenders"]] == [13, 7, 5, 1]
    actions = [row["actions"] for row in response.context["offenders"]]
    assert actions[:2] == [[("flag", 9), ("reply", 4)], [("reply", 4), ("post", 3)]]
    assert f'<a href="{reverse("admin:auth_user_change", args=[bob.pk])}">bob</a>' in html
    assert f'<a href="{reverse("admin:throttling_penalty_member", args=[alice.pk])}">penalties</a>' in html
    bob_row = html[html.index(">bob</a>") : html.index(">alice</a>")]
    assert "level 3 on flag, 59\xa0minutes left" in bob_row or "level 3 on flag, 1\xa0hour left" in bob_row
    alice_row = html[html.index(">alice</a>") : html.index("192.0.2.7")]
    assert "level 2" not in alice_row  # her penalty has ended


@pytest.mark.django_db
def test_penalties_in_force_totals_and_penalty_chart(admin_client, django_user_model, admin_user):
    alice, bob, carol = (django_user_model.objects.create_user(name) for name in ("alice", "bob", "carol"))
    now = timezone.now()
    hour = timedelta(hours=1)
    # Today's penalties started a minute ago (at midnight at the earliest): the chart's bar of today holds them
    # whatever the time of day the test runs at.
    recent = max(now - timedelta(minutes=1), day_start(0))
    in_force = penalty(alice, recent, 3 * hour, level=3, action="reply", automatic=True)
    everything = penalty(bob, recent, 4 * hour, level=5)
    penalty(alice, recent, timedelta(0), level=1, automatic=True)  # a warning
    penalty(carol, day_start(3), hour, automatic=True)  # expired
    penalty(carol, recent, 2 * hour, automatic=True, lifted_at=now, lifted_by=admin_user, lift_reason="appeal")
    penalty(carol, day_start(50), hour)  # before the period

    response = admin_client.get(reverse(REPORT))
    html = response.content.decode()
    assert [p.pk for p in response.context["active"]] == [in_force.pk, everything.pk]  # the soonest to end first
    assert html.count('<tr class="in-force">') == 2
    assert "<strong>all actions</strong>" in html
    for listed in (in_force, everything):
        assert f'<a href="{reverse("admin:throttling_penalty_lift", args=[listed.pk])}">Lift…</a>' in html
        history = reverse("admin:throttling_penalty_member", args=[listed.user_id])
        assert f'<a href="{history}">{listed.user}</a>' in html
    assert re.search(r'<td class="time-left"[^>]*>2\xa0hours, 5[89]\xa0minutes</td>', html)
    assert response.context["totals"] == {
        "offences": 0,
        "shadowed": 0,
        "blocked": 0,
        "duplicates": 0,
        "offenders": 0,
        "members": 3,
        "applied": 4,
        "warnings": 1,
        "lifted": 1,
        "in_force": 2,
    }
    assert re.search(r'<dd id="total-applied">4</dd>', html)
    bars = charts_of(response)["penalties-per-day"]["bars"]
    kinds = sorted(bar["title"].split(", ")[-1] for bar in bars)
    today_kinds = sorted(b["title"].split(", ")[-1] for b in bars if b["x"] == bars[-1]["x"])
    assert len(bars) == 4  # today: warnings, automatic, by moderators; three days ago: automatic
    assert kinds == ["automatic penalties: 1", "automatic penalties: 2", "penalties by moderators: 1", "warnings: 1"]
    assert today_kinds == ["automatic penalties: 2", "penalties by moderators: 1", "warnings: 1"]


@pytest.mark.django_db
def test_refusals_of_repeated_content_are_their_own_series_and_total(admin_client):
    OffenceRecord.objects.create(identity="u:1", action="reply", hour=day_start(0), count=2)
    OffenceRecord.objects.create(identity="u:2", action="reply", hour=day_start(0), count=5, duplicate=True)
    OffenceRecord.objects.create(
        identity="u:3", action="reply", hour=day_start(0), count=4, duplicate=True, shadow=True
    )
    response = admin_client.get(reverse(REPORT))
    html = response.content.decode()
    assert response.context["totals"]["offences"] == 7
    assert response.context["totals"]["duplicates"] == 5
    assert response.context["totals"]["shadowed"] == 4
    assert '<dd id="total-duplicates">5</dd>' in html
    charts = charts_of(response)
    titles = sorted(bar["title"] for bar in charts["offences-per-day"]["bars"])
    assert [t.split(", ", 1)[1] for t in titles] == ["reply, repeated content: 5 offences", "reply: 2 offences"]
    # What a shadow policy would have refused is no offence: drawn apart.
    apart = [bar["title"].split(", ", 1)[1] for bar in charts["set-apart-per-day"]["bars"]]
    assert apart == ["reply, would have refused (shadow): 4 requests"]
    # Duplicates are offences like any other: their members are among the offenders.
    assert offenders_listed(html)[0] == "member #2 (deleted)"
    rows = csv_rows(admin_client.get(reverse(CSV)))
    assert [r[1:] for r in rows[1:]] == [
        ["reply", "2"],
        ["reply, repeated content", "5"],
        ["reply, would have refused (shadow)", "4"],
    ]


@pytest.mark.django_db
def test_the_offences_total_is_what_its_charts_draw_and_blocks_are_drawn_apart(admin_client):
    OffenceRecord.objects.create(identity="u:1", action="reply", hour=day_start(0), count=3)
    OffenceRecord.objects.create(identity="u:2", action="post", hour=day_start(1), count=1)
    OffenceRecord.objects.create(identity="ip:203.0.113.9", action="reply", hour=day_start(0), count=6, blocked=True)
    response = admin_client.get(reverse(REPORT))
    html = response.content.decode()
    charts = charts_of(response)
    drawn = sum(
        int(re.search(r": (\d+) offences?$", bar["title"]).group(1)) for bar in charts["offences-per-day"]["bars"]
    )
    assert response.context["totals"]["offences"] == drawn == 4
    assert '<dd id="total-offences">4</dd>' in html
    assert len(charts["offences-per-action"]["bars"]) == 2  # reply and post: no bar for the blocks
    assert [bar["title"].split(", ", 1)[1] for bar in charts["set-apart-per-day"]["bars"]] == [
        "reply, refused by blocks: 6 requests"
    ]
    assert '<dd id="total-blocked">6</dd>' in html


@pytest.mark.django_db
def test_who_offended_and_who_was_penalised_read_as_different_people(admin_client):
    html = admin_client.get(reverse(REPORT)).content.decode()
    assert "<dt>Who offended</dt>" in html and "members and visitors refused at least once in the period" in html
    assert "<dt>Members penalised</dt>" in html and "given a penalty in the period (warnings left out)" in html
    assert "<dt>Offenders</dt>" not in html


# CSV


@pytest.mark.django_db
def test_csv_has_one_row_per_day_and_action(admin_client):
    offence("u:1", "reply", day_start(0), 3)
    offence("u:2", "reply", day_start(0, 2), 4)
    offence("u:1", "post", day_start(5), 2)
    offence("u:3", 'say "hi", twice', day_start(5), 1)
    offence("u:3", "=HYPERLINK(1)", day_start(5), 6)
    offence("u:1", "reply", day_start(31), 9)
    response = admin_client.get(reverse(CSV))
    rows = csv_rows(response)
    assert rows == [
        ["day", "action", "offences"],
        [str(timezone.localdate() - timedelta(days=5)), "'=HYPERLINK(1)", "6"],
        [str(timezone.localdate() - timedelta(days=5)), "post", "2"],
        [str(timezone.localdate() - timedelta(days=5)), 'say "hi", twice', "1"],
        [str(timezone.localdate()), "reply", "7"],
    ]
    assert '"say ""hi"", twice"' in response.content.decode()  # quoted by the csv module
    assert (
        sum(int(n) for _d, _a, n in rows[1:])
        == OffenceRecord.objects.filter(hour__gte=day_start(29)).aggregate(n=Sum("count"))["n"]
    )
    assert [r[2] for r in csv_rows(admin_client.get(reverse(CSV), {"days": 90}))[1:]].count("9") == 1


@pytest.mark.django_db
def test_csv_of_penalties_per_day_and_kind(admin_client, django_user_model):
    alice = django_user_model.objects.create_user("alice")
    now = timezone.now()
    hour = timedelta(hours=1)
    for automatic, length in ((True, timedelta(0)), (True, hour), (True, hour), (False, timedelta(days=1))):
        penalty(alice, day_start(4, 6), length, automatic=automatic)
    penalty(alice, now - timedelta(minutes=1), hour, automatic=True)
    response = admin_client.get(reverse(CSV), {"kind": "penalties", "days": 7})
    four_days_ago = str(timezone.localdate() - timedelta(days=4))
    assert csv_rows(response) == [
        ["day", "kind", "penalties"],
        [four_days_ago, "warning", "1"],
        [four_days_ago, "automatic", "2"],
        [four_days_ago, "moderator", "1"],
        [str(timezone.localdate(now - timedelta(minutes=1))), "automatic", "1"],
    ]
    assert "throttling-penalties-" in response["Content-Disposition"]
    response = admin_client.get(reverse(CSV), {"kind": "everything"})
    assert response.status_code == 400
    assert "“everything” is not a kind of export: choose offences or penalties." in response.content.decode()


# Scale


def fill_offences(rows=100_000, batch=5_000, members=()):
    """`rows` OffenceRecord rows: 2,000 identities × 5 actions × 10 hours spread over the last 30 days."""
    actions = ["reply", "post", "like", "flag", "message"]
    identities = rows // (len(actions) * 10)
    base = day_start(29)
    pending = []
    total = 0
    for i in range(identities):
        user = members[i] if i < len(members) else None
        identity = member_identity(user.pk) if user else f"ip:10.{i // 256}.{i % 256}.1"
        for h in range(10):
            when = base + timedelta(days=(i + 3 * h) % 30, hours=h)
            for a, action in enumerate(actions):
                n = 1 + (i * 7 + h + a) % 13 + (20 if user else 0)  # the members lead the offenders
                total += n
                pending.append(OffenceRecord(identity=identity, user=user, action=action, hour=when, count=n))
        if len(pending) >= batch:
            OffenceRecord.objects.bulk_create(pending)
            pending = []
    OffenceRecord.objects.bulk_create(pending)
    return total


@pytest.mark.slow
@pytest.mark.django_db
def test_report_queries_stay_bounded_with_100000_offence_records(
    admin_client, django_user_model, django_assert_max_num_queries
):
    members = [django_user_model.objects.create_user(f"m{i}") for i in range(30)]
    now = timezone.now()
    for user in members[:10]:
        penalty(user, now - timedelta(minutes=1), timedelta(hours=1), action="reply", automatic=True)
    offence(member_identity(members[0].pk), "reply", day_start(1), 1, members[0])
    with CaptureQueriesContext(connection) as small:
        assert admin_client.get(reverse(REPORT)).status_code == 200
    OffenceRecord.objects.all().delete()

    total = fill_offences(members=members)
    assert OffenceRecord.objects.count() == 100_000
    with django_assert_max_num_queries(MAX_QUERIES) as big:
        response = admin_client.get(reverse(REPORT))
    assert response.status_code == 200
    assert len(big.captured_queries) == len(small.captured_queries)
    assert response.context["totals"]["offences"] == total
    assert response.context["totals"]["offenders"] == 2_000
    assert len(response.context["offenders"]) == 20
    assert all(row["user"] in members for row in response.context["offenders"])
    offences = [row["offences"] for row in response.context["offenders"]]
    assert offences == sorted(offences, reverse=True)
    charts = charts_of(response)
    assert len(charts["offences-per-action"]["bars"]) == 5
    assert len(charts["offences-per-day"]["bars"]) == 30 * 5
    with django_assert_max_num_queries(3):  # session, user, one GROUP BY
        rows = csv_rows(admin_client.get(reverse(CSV)))
    assert len(rows) == 1 + 30 * 5
    assert sum(int(r[2]) for r in rows[1:]) == total


# The pipeline end to end


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_refusals_reach_the_report_through_the_buffer_and_the_worker(celery_worker, member, policy, admin_client):
    policy("reply", 60, 2)
    policy("post", 60, 1)
    started = time.time()
    refused = {("reply", True): 0, ("post", True): 0, ("reply", False): 0}
    for action, times, who in (("reply", 6, member), ("post", 3, member), ("reply", 4, "bot-7")):
        for _ in range(times):
            if not throttling.check(who, action).allowed:
                refused[(action, who is member)] += 1
    ended = time.time()
    assert refused == {("reply", True): 4, ("post", True): 2, ("reply", False): 2}
    assert throttling.engine.offences.report_batches.buffer.pending() == 8
    assert throttling.engine.offences.report_batches.buffer.flush() == 8

    def stored():
        rows = list(OffenceRecord.objects.order_by("identity", "action", "hour"))
        return rows if sum(r.count for r in rows) == 8 else None

    rows = wait_for(stored, message="the offence rows")
    hours = len({int(started // 3600), int(ended // 3600)})
    identity = member_identity(member.pk)
    for (action, is_member), n in refused.items():
        mine = [r for r in rows if r.action == action and (r.identity == identity) == is_member]
        assert sum(r.count for r in mine) == n
        assert 1 <= len(mine) <= hours and len({r.hour for r in mine}) == len(mine)  # one row per hour
        assert all(r.hour.minute == r.hour.second == 0 for r in mine)
        assert all(r.user_id == (member.pk if is_member else None) for r in mine)

    response = admin_client.get(reverse(REPORT))
    assert response.context["totals"]["offences"] == 8
    assert offenders_listed(response.content.decode()) == ["alice", "bot-7"]
    assert response.context["offenders"][0]["actions"] == [("reply", 4), ("post", 2)]
    per_action = charts_of(response)["offences-per-action"]["bars"]
    assert [bar["title"] for bar in per_action] == ["reply: 6 offences in the period", "post: 2 offences in the period"]
