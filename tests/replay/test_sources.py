"""History sources: THROTTLING_HISTORY and a declared policy's "history", their filter, and their system
checks (throttling.E013: cannot be read; throttling.W008: a large table without a (member, time) index)."""

from datetime import UTC, datetime

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connection

import throttling
from demo_site.models import Post, Reply
from tests.support.history import HISTORY, US, micro, posts_by, write_history
from throttling.checks import replay_sources as history_checks
from throttling.checks.replay_sources import check_history_indexes, check_history_sources
from throttling.checks.settings import check_default_policies

pytestmark = pytest.mark.django_db

START = datetime(2026, 1, 5, 9, tzinfo=UTC)
REPLY = {"model": "demo_site.Reply", "member": "author", "time": "created"}


def ids(found):
    return [m.id for m in found]


@pytest.mark.parametrize(
    "history, words",
    [
        ("demo_site.Reply", "must be a dict such as"),
        ({"model": "demo_site.Reply", "member": "author"}, "has no 'time'"),
        ({**REPLY, "when": "created"}, "says 'when', which a history source does not have"),
        ({**REPLY, "model": "forum.Comment"}, "names the model 'forum.Comment', which is not installed"),
        ({**REPLY, "member": "writer"}, "demo_site.Reply has no field 'writer' (its member)"),
        ({**REPLY, "member": "post"}, "demo_site.Reply.post is not a foreign key to the user model"),
        ({**REPLY, "time": "body"}, "demo_site.Reply.body is not a DateTimeField"),
        ({**REPLY, "target": "thread"}, "has no field 'thread' (its target)"),
        ({**REPLY, "filter": ["body"]}, "must be a dict of lookups"),
        ({**REPLY, "filter": {"bodyy__contains": "x"}}, "has a filter the model refuses"),
    ],
)
def test_a_source_that_cannot_be_read_is_error_e013_and_replay_says_the_same(settings, history, words):
    settings.THROTTLING_HISTORY = {"answer": history}
    found = check_history_sources()
    assert ids(found) == ["throttling.E013"] * len(found) and found
    assert any(words in m.msg for m in found), [m.msg for m in found]
    assert found[0].obj == "answer"
    with pytest.raises(ImproperlyConfigured, match="The history of “answer”"):
        throttling.replay("answer", ["1/min"])


def test_the_setting_itself_must_be_a_dict(settings):
    settings.THROTTLING_HISTORY = ["answer"]
    assert ids(check_history_sources()) == ["throttling.E013"]
    assert check_history_indexes() == []


def test_a_declared_policy_may_carry_its_history(settings, django_user_model):
    settings.THROTTLING_DEFAULT_POLICIES = {"answer": {"rate": "2/min", "history": REPLY}}
    assert check_default_policies() == [] and check_history_sources() == []
    user = django_user_model.objects.create_user("m")
    write_history([(user, posts_by(user, 1)[0], micro(START) + k * US) for k in range(5)])
    assert throttling.replay("answer", ["2/min"]).refused == 3
    # The setting wins over a declared policy's history.
    settings.THROTTLING_HISTORY = {"answer": {**REPLY, "filter": {"body": "kept"}}}
    assert throttling.replay("answer", ["2/min"]).actions == 0
    settings.THROTTLING_DEFAULT_POLICIES = {"post": {"rate": "2/min", "history": {**REPLY, "time": "nope"}}}
    assert ids(check_history_sources()) == ["throttling.E013"]


def test_the_filter_narrows_the_rows_replayed(settings, django_user_model):
    user = django_user_model.objects.create_user("m")
    post = posts_by(user, 1)[0]
    write_history([(user, post, micro(START) + k * US) for k in range(6)])
    Reply.objects.filter(pk__in=Reply.objects.order_by("pk").values("pk")[:2]).update(body="removed")
    settings.THROTTLING_HISTORY = {"answer": {**REPLY, "filter": {"body": ""}}}
    assert throttling.replay("answer", ["2/min"]).actions == 4


def test_a_large_table_without_a_member_time_index_is_warning_w008_with_the_index_to_add(
    settings, django_user_model, monkeypatch
):
    settings.THROTTLING_HISTORY = HISTORY
    monkeypatch.setattr(history_checks, "LARGE_TABLE", 10)
    user = django_user_model.objects.create_user("m")
    post = Post.objects.create(author=user, title="t", body="")
    write_history([(user, post, micro(START) + k) for k in range(10)])
    assert check_history_indexes() == []  # not larger than LARGE_TABLE
    write_history([(user, post, micro(START) + 99)])
    found = check_history_indexes()
    assert ids(found) == ["throttling.W008", "throttling.W008"]  # both actions read that table
    assert "has more than 10 rows and no index on (author, created)" in found[0].msg
    assert 'models.Index(fields=["author", "created"], name=\'reply_author_created\')' in found[0].hint
    assert "CREATE INDEX reply_author_created ON demo_site_reply (author_id, created);" in found[0].hint
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # The rows above leave deferred foreign-key checks pending in the test's transaction,
            # and PostgreSQL creates no index on a table that has any.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("CREATE INDEX reply_author_created ON demo_site_reply (author_id, created)")
    assert check_history_indexes() == []


def test_manage_py_check_reports_them(settings, capsys):
    settings.THROTTLING_HISTORY = {"answer": {**REPLY, "member": "writer"}}
    with pytest.raises(Exception, match="throttling.E013"):
        call_command("check")
