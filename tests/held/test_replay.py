"""Replay says how many actions a draft would have held beside refused: each member's first
hold_until_approved admitted actions, moderators left out when the policy exempts staff."""

import io

import pytest
from django.core.management import call_command

import throttling
from tests.replay.test_replay import START, community  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db


def test_a_draft_would_have_held_each_members_first_admitted_actions(community):  # noqa: F811
    # Member i posts i + 1 replies a second apart; 3 per minute admits at most 3 of them.
    result = throttling.replay("answer", ["3/min"], hold_until_approved=2)
    admitted = [min(3, i + 1) for i in range(6)]
    assert result.refused == sum(i + 1 for i in range(6)) - sum(admitted)
    assert result.held == sum(min(2, n) for n in admitted) == 11
    assert result.members_held == 6  # the moderator is exempt, never held
    assert throttling.replay("answer", ["3/min"]).held == 0  # without it, nothing is held
    with pytest.raises(ValueError, match="at least 1"):
        throttling.replay("answer", ["3/min"], hold_until_approved=0)


def test_the_command_prints_would_have_held(community):  # noqa: F811
    out = io.StringIO()
    call_command(
        "throttling_replay",
        "answer",
        "--rate",
        "3/min",
        "--hold-until-approved",
        "2",
        f"--since={START.date()}",
        stdout=out,
    )
    assert "would have held" in out.getvalue() and "11 " in out.getvalue()
