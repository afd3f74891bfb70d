"""English and Simplified Chinese: refusals, waits, penalties, the 429 page and the admin in zh-hans."""

import gettext
import re
import shutil
from datetime import timedelta
from pathlib import Path

import django.utils
import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import translation
from rest_framework.test import APIClient

import throttling
import throttling.common.words
import throttling.penalties.service
from throttling import penalties
from throttling.common.words import render_reason

pytestmark = pytest.mark.django_db

LOCALE = Path(throttling.__file__).parent / "locale" / "zh_Hans" / "LC_MESSAGES"


def _po_entries(path=None):
    """The fields of every entry of a .po (the package's by default), read without any library."""
    text = (path or LOCALE / "django.po").read_text(encoding="utf-8")
    entries = []
    for block in text.split("\n\n"):
        fields = {}
        key = None
        for line in block.splitlines():
            m = re.match(r'^(msgctxt|msgid|msgid_plural|msgstr(?:\[\d\])?) "(.*)"$', line)
            if m:
                key = m.group(1)
                fields[key] = m.group(2)
            elif line.startswith('"') and key:
                fields[key] += line[1:-1]
        if fields.get("msgid"):
            entries.append(fields)
    return entries


def _unescape(text):
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), text)


def test_every_string_has_a_chinese_translation_and_the_mo_matches_the_po():
    entries = _po_entries()
    assert len(entries) > 400
    with open(LOCALE / "django.mo", "rb") as fh:
        catalog = gettext.GNUTranslations(fh)
    assert catalog.info()["plural-forms"] == "nplurals=1; plural=0;"
    for e in entries:
        translated = e.get("msgstr") or e.get("msgstr[0]")
        assert translated, e["msgid"]
        msgid = _unescape(e["msgid"])
        if "msgctxt" in e:
            got = catalog.pgettext(_unescape(e["msgctxt"]), msgid)
        elif "msgid_plural" in e:
            got = catalog.ngettext(msgid, _unescape(e["msgid_plural"]), 2)
        else:
            got = catalog.gettext(msgid)
        # The compiled catalog holds what the .po says (compilemessages was run after the last edit).
        assert got == _unescape(translated), msgid
    fuzzy = (LOCALE / "django.po").read_text(encoding="utf-8").count("#, fuzzy")
    assert fuzzy == 0


@pytest.mark.parametrize(
    "seconds, words", [(1, "1 秒"), (59, "59 秒"), (180, "3 分钟"), (7200, "2 小时"), (3 * 86400, "3 天")]
)
def test_waits_in_chinese(seconds, words):
    with translation.override("zh-hans"):
        assert throttling.common.words.wait_in_words(seconds) == words
    with translation.override("en"):
        assert throttling.common.words.wait_in_words(180) == "3 minutes"


def test_refusals_render_in_the_readers_language(redis_server, policy):
    policy("reply", 60, 1, verb="replied")
    throttling.check("reader", "reply")
    refused = throttling.check("reader", "reply")
    with translation.override("zh-hans"):
        chinese = refused.message
    with translation.override("en"):
        english = refused.message
    assert re.fullmatch(r"您回复太频繁了。请在 \d+ 秒后再试。", chinese), chinese
    assert re.fullmatch(r"You have replied too often\. Try again in \d+ seconds?\.", english), english


def test_a_verb_a_moderator_typed_is_kept_as_typed(redis_server, policy):
    policy("flag", 60, 1, verb="flagged posts")
    throttling.check("x", "flag")
    with translation.override("zh-hans"):
        assert throttling.check("x", "flag").message.startswith("您flagged posts太频繁了")


def test_an_automatic_penalty_reason_is_stored_as_a_code_and_read_in_each_language(
    redis_server, policy, member, ladder
):
    policy("reply", 60, 1)
    penalty, created = throttling.penalties.service._create_automatic(
        member, "reply", "run-1", penalties.current_ladder()[1], 5, 600, django.utils.timezone.now()
    )
    assert created and penalty.reason == "" and penalty.reason_code == "offences"
    penalties.mirror_members([member.pk])
    assert penalty.reason_params == {"action": "reply", "offences": 5, "window": 600}
    with translation.override("zh-hans"):
        assert penalty.reason_text == "被限流后 10 分钟内对“reply”有 5 次被拒尝试。"
        refused = throttling.check(member, "reply")
        assert "您的账号在" in refused.message and "被限流后 10 分钟内" in refused.message
    with translation.override("en"):
        assert penalty.reason_text == "5 refused attempts at “reply” within 10 minutes after being throttled."
        assert "5 refused attempts" in throttling.check(member, "reply").message
    assert render_reason("", {}) == ""


def test_a_moderators_reason_stays_as_typed(redis_server, policy, member, ladder):
    policy("reply", 60, 5)
    penalties.apply_penalty(member, level=1, duration=timedelta(hours=1), reason="刷屏")
    with translation.override("en"):
        assert "Reason: 刷屏" in throttling.check(member, "reply").message


@pytest.mark.urls("tests.support.urlconfs.adapters")
def test_the_429_page_and_the_api_answer_in_chinese(redis_server, policy):
    policy("reply", 60, 1, verb="replied")
    web = Client(HTTP_ACCEPT_LANGUAGE="zh-hans")
    with translation.override("zh-hans"):
        web.post("/reply/", {"text": "one"})
        page = web.post("/reply/", {"text": "two"})
        assert page.status_code == 429
        html = page.content.decode()
        assert "请慢一点" in html and "没有保存任何内容" in html and "您回复太频繁了" in html
        api = APIClient()
        api.post("/api/replies/", {"text": "one"})
        refused = api.post("/api/replies/", {"text": "two"})
    assert refused.status_code == 429 and refused.json()["detail"].startswith("您回复太频繁了")


def test_the_admin_speaks_chinese(admin_client, policy):
    policy("reply", 60, 5)
    with translation.override("zh-hans"):
        page = admin_client.get("/admin/throttling/actionpolicy/", HTTP_ACCEPT_LANGUAGE="zh-hans")
        report = admin_client.get("/admin/throttling/penalty/report/", HTTP_ACCEPT_LANGUAGE="zh-hans")
    html = page.content.decode()
    assert "操作策略" in html and "限制" in html
    assert "限流报告" in report.content.decode() and "Throttling report" not in report.content.decode()


def test_system_checks_speak_chinese(settings):
    from throttling.checks import check_settings

    settings.THROTTLING_ENABLED = "yes"
    with translation.override("zh-hans"):
        (error,) = check_settings()
    assert error.msg == "THROTTLING_ENABLED 为 'yes'；它必须是True 或 False。"


def _keys(po_path):
    return {
        (_unescape(e.get("msgctxt", "")), _unescape(e["msgid"]), _unescape(e.get("msgid_plural", "")))
        for e in _po_entries(po_path)
    }


@pytest.mark.skipif(shutil.which("xgettext") is None, reason="needs GNU gettext's xgettext (CI installs it)")
def test_the_po_has_every_string_the_code_marks(tmp_path, monkeypatch):
    """makemessages over a copy of the package finds no message the committed .po lacks, and no stale one."""
    copy = tmp_path / "throttling"
    shutil.copytree(Path(throttling.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__", "*.mo"))
    monkeypatch.chdir(copy)
    call_command("makemessages", locale=["zh_Hans"], verbosity=0, no_obsolete=True)
    assert _keys(copy / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po") == _keys(LOCALE / "django.po")
