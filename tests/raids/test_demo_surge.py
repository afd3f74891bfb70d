"""The demo can start a surge: `manage.py demo_surge`, and end it with --end."""

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

import throttling
from demo_site import DEMO_ADMIN
from throttling.models import Surge

pytestmark = pytest.mark.django_db


def test_demo_surge_tightens_every_limit_as_the_demos_moderator_and_ends(redis_server, policy, django_user_model):
    admin = django_user_model.objects.create_superuser(DEMO_ADMIN, "admin@example.org", "pw")
    policy("reply", 60, 6)
    out = io.StringIO()
    call_command("demo_surge", "--minutes", "45", stdout=out)
    surge = Surge.objects.get()
    assert (surge.started_by, surge.multiplier, surge.reason) == (admin, 0.5, "Raid on the demo's front page")
    assert "Surge mode is on: limits × 0.5 for every action until " in out.getvalue()
    assert throttling.check("visitor", "reply").limit == 3
    call_command("demo_surge", "--end", "--reason", "demo over", stdout=out)
    surge.refresh_from_db()
    assert (surge.ended_by, surge.end_reason) == (admin, "demo over")
    assert throttling.check("visitor", "reply").limit == 6


def test_demo_surge_says_what_is_wrong(redis_server):
    with pytest.raises(CommandError, match="A surge tightens: give a multiplier from 0.01 to 0.99"):
        call_command("demo_surge", "--multiplier", "2", stdout=io.StringIO())
    assert not Surge.objects.exists()
