"""A member override always says why: refused without a reason by the model and by the database."""

import json
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import IntegrityError, transaction

from throttling.models import MemberOverride

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("reason", ["", "   "])
def test_the_database_refuses_an_override_without_a_reason(member, reason):
    with pytest.raises(IntegrityError), transaction.atomic():
        MemberOverride.objects.create(user=member, exempt=True, reason=reason)
    assert not MemberOverride.objects.exists()


def test_the_database_refuses_an_update_that_erases_the_reason(member):
    override = MemberOverride.objects.create(user=member, multiplier=Decimal("2"), reason="runs the help desk")
    with pytest.raises(IntegrityError), transaction.atomic():
        MemberOverride.objects.filter(pk=override.pk).update(reason="")
    override.refresh_from_db()
    assert override.reason == "runs the help desk"


def _fixture(tmp_path, member, reason):
    path = tmp_path / "overrides.json"
    row = {"user": member.pk, "action": "", "exempt": True, "multiplier": None, "reason": reason}
    path.write_text(json.dumps([{"model": "throttling.memberoverride", "pk": 1, "fields": row}]))
    return str(path)


def test_loaddata_refuses_an_override_without_a_reason(member, tmp_path):
    with pytest.raises(IntegrityError), transaction.atomic():
        call_command("loaddata", _fixture(tmp_path, member, ""), verbosity=0)
    assert not MemberOverride.objects.exists()
    call_command("loaddata", _fixture(tmp_path, member, "moderates the forum"), verbosity=0)
    assert MemberOverride.objects.get().reason == "moderates the forum"


@pytest.mark.parametrize("reason", ["", " ", "\n\t"])
def test_full_clean_asks_why(member, reason):
    with pytest.raises(ValidationError) as caught:
        MemberOverride(user=member, exempt=True, reason=reason).full_clean()
    assert "Say why, for the record." in caught.value.message_dict["reason"]
