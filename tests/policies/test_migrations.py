"""The models and the migrations that ship agree."""

from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_no_missing_migrations():
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exc:  # --check exits non-zero when a model change has no migration
        pytest.fail(f"makemigrations --check found changes (exit {exc.code}):\n{out.getvalue()}")
    assert "No changes detected" in out.getvalue()
