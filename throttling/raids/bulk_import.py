"""Blocks imported in bulk: pasted lines ("203.0.113.0/24 spam wave"), all of them or none."""

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext

from ..engine.countermeasures.in_force import measures
from ..models import Block, canonical_actions, parse_actions
from ..models.blocks import check_multiplier, check_network, unknown_actions

# Lines one import may hold: a paste bigger than this is several imports.
MAX_LINES = 100_000


def parse_lines(text, default_reason=""):
    """([(line number, network text, reason)], [messages]): one message per line that does not parse.

    A line is an address range and, after white space, its reason; without one it takes
    `default_reason`. Empty lines and lines starting with "#" are skipped.
    """
    entries, errors, seen = [], [], {}
    lines = (text or "").splitlines()
    if len(lines) > MAX_LINES:
        return [], [gettext("Import at most %(n)s lines at a time.") % {"n": f"{MAX_LINES:,}"}]
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        first, _, rest = line.partition(" ")
        reason = rest.strip() or default_reason.strip()
        try:
            network = str(check_network(first))
        except ValidationError as exc:
            errors.append(gettext("Line %(n)d: %(error)s") % {"n": number, "error": " ".join(exc.messages)})
            continue
        if network in seen:
            errors.append(
                gettext("Line %(n)d: %(network)s is already on line %(first)d.")
                % {"n": number, "network": network, "first": seen[network]}
            )
            continue
        seen[network] = number
        if not reason:
            errors.append(
                gettext("Line %(n)d: %(network)s has no reason; write one after it, or fill in the default reason.")
                % {"n": number, "network": network}
            )
            continue
        entries.append((number, network, reason))
    if not entries and not errors:
        errors.append(gettext("Paste at least one address range, one per line."))
    return entries, errors


def import_blocks(text, *, severity, multiplier=None, actions="", expires_at=None, default_reason="", by=None):
    """Create one Block per line of `text` (see parse_lines), with the severity, multiplier, actions
    and expiry given; in one transaction, so nothing is half-imported. Raises ValidationError listing
    every problem (one message per bad line) and creates nothing then. Returns the blocks created."""
    problems = []
    try:
        actions = canonical_actions(actions)
    except ValidationError as exc:
        problems += exc.messages
    else:
        unknown = unknown_actions(parse_actions(actions))
        if unknown is not None:
            problems += unknown.messages
    problems += [str(m) for m in check_multiplier(severity, multiplier).values()]
    entries, errors = parse_lines(text, default_reason)
    problems += errors
    if problems:
        raise ValidationError(problems)
    now = timezone.now()
    blocks = [
        Block(
            network=network,
            actions=actions,
            severity=severity,
            multiplier=multiplier,
            reason=reason,
            expires_at=expires_at,
            created_by=by,
            created_at=now,
        )
        for _n, network, reason in entries
    ]
    with transaction.atomic():
        created = Block.objects.bulk_create(blocks, batch_size=2000)
        # bulk_create sends no post_save: every process is told here, once (the others after the commit).
        measures.changed(broadcast=False)
        transaction.on_commit(measures.changed, robust=True)
    return created
