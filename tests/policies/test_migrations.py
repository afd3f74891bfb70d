"""The models and the migrations that ship agree."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from throttling.models import MemberOverride


@pytest.mark.django_db
def test_no_missing_migrations():
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exc:  # --check exits non-zero when a model change has no migration
        pytest.fail(f"makemigrations --check found changes (exit {exc.code}):\n{out.getvalue()}")
    assert "No changes detected" in out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_overrides_saved_without_a_reason_keep_their_row_with_a_note(django_user_model):
    member = django_user_model.objects.create_user("alice", password="pw")
    executor = MigrationExecutor(connection)
    before, latest = [("throttling", "0009_penalty_reason_code")], executor.loader.graph.leaf_nodes("throttling")
    executor.migrate(before)
    try:
        old = executor.loader.project_state(before).apps.get_model("throttling", "MemberOverride")
        for reason in ("", "  \n", "runs the help desk"):
            old.objects.create(user_id=member.pk, exempt=True, reason=reason)
        executor = MigrationExecutor(connection)
        executor.migrate(latest)
    finally:
        MigrationExecutor(connection).migrate(latest)
    reasons = sorted(MemberOverride.objects.values_list("reason", flat=True))
    assert reasons == ["No reason was recorded when this override was granted."] * 2 + ["runs the help desk"]
