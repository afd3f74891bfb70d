"""demo_history: a month of sample replies that "What would this do?" replays on the demo's first start."""

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

import throttling
from demo_site import settings as demo_settings
from demo_site.management.commands.demo_history import BURSTY, CALM, SPAMMERS
from demo_site.models import Post, Reply
from tests.support.helpers import ensure_default_ladder
from throttling.models import Penalty

pytestmark = pytest.mark.django_db


def test_a_month_of_calm_members_bursty_regulars_and_two_penalised_spammers(settings, django_user_model):
    ensure_default_ladder()
    settings.THROTTLING_HISTORY = demo_settings.THROTTLING_HISTORY
    call_command("demo_seed", stdout=io.StringIO())
    out = io.StringIO()
    call_command("demo_history", stdout=out)
    assert out.getvalue().startswith("Sample history: ")

    sample = {u.username: u for u in django_user_model.objects.filter(username__startswith="sample-")}
    assert set(sample) == {*CALM, *BURSTY, *SPAMMERS}
    assert all(not u.has_usable_password() and u.last_name == "(sample data)" for u in sample.values())
    replies = Reply.objects.filter(author__in=sample.values())
    now = timezone.now()
    assert replies.count() > 1500
    assert replies.filter(created__lt=now - timedelta(days=30, hours=1)).count() == 0
    assert replies.filter(created__lt=now - timedelta(days=25)).exists()  # the whole month, not just today

    # The reply policy the demo starts with (6 a minute, 60 an hour) refuses the spammers' runs and
    # some of the regulars' conversations, and never a calm member.
    month = throttling.replay("reply", since=now - timedelta(days=30))
    refused = {django_user_model.objects.get(pk=pk).username for pk in month.by_member}
    assert set(SPAMMERS) <= refused and not refused & set(CALM) and refused & set(BURSTY)
    assert month.members_refused_penalised == 2
    suggestion = throttling.suggest("reply", since=now - timedelta(days=30))
    assert suggestion.penalised == 2 and suggestion.penalised_peaks[60][0] > suggestion[0][1]

    # A rerun replaces the month (ending now), adds nothing, and leaves the demo's own posts alone.
    totals = (replies.count(), Penalty.objects.filter(user__in=sample.values()).count())
    own = set(Post.objects.exclude(author__in=sample.values()).values_list("pk", flat=True))
    call_command("demo_history", stdout=io.StringIO())
    assert (replies.count(), Penalty.objects.filter(user__in=sample.values()).count()) == totals
    assert set(Post.objects.exclude(author__in=sample.values()).values_list("pk", flat=True)) == own
    assert not Penalty.objects.active().exists()  # all long over: nobody is blocked by sample data
