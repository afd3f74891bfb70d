"""Policies declared in code (THROTTLING_DEFAULT_POLICIES): checked against the models, created after migrate."""

import logging
import sys
from decimal import Decimal, InvalidOperation

from django.contrib.auth.models import Group
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import DEFAULT_DB_ALIAS, connections, router, transaction

from ...common.durations import parse_duration_text, parse_rates
from ...conf import settings
from ...models import ActionPolicy, ActionWindow, PolicyTier
from .cache import invalidate_policies

logger = logging.getLogger("throttling")

SETTING = "THROTTLING_DEFAULT_POLICIES"
EXAMPLE = '{"flag": ["3/min", "20/day"], "reply": "5/10s"}'
DICT_EXAMPLE = '{"reply": {"rate": "5/m", "windows": ["100/d"], "verb": "replied"}}'
# What a policy declared as a dict may say, beside "rate" and "windows": the model's own field names.
POLICY_FIELDS = (
    "verb",
    "description",
    "algorithm",
    "mode",
    "scope",
    "enabled",
    "exempt_staff",
    "on_backend_failure",
    "offence_threshold",
    "offence_window",
    "hold_until_approved",
)
TIER_FIELDS = ("group", "new_member_days", "multiplier")
# "same_content": {"max": 1, "period": "10m", "members": 5, "answer": "hold"}: the model's same_content_* fields.
CONTENT_FIELDS = {
    "max": "same_content_max",
    "members": "same_content_members",
    "period": "same_content_period",
    "answer": "same_content_answer",
}
CONTENT_EXAMPLE = '{"max": 1, "period": "10m", "members": 5}'


def _rate_texts(value):
    """The rate texts of a declared value, main window first: "5/m", ["3/min", "20/day"], or a dict's."""
    if not isinstance(value, dict):
        return value
    windows = value.get("windows", [])
    if isinstance(windows, str):
        windows = [windows]
    if not isinstance(windows, (list, tuple)):
        raise ValueError(f'"windows" is {windows!r}; it must be a list of rates such as ["100/d"].')
    if "rate" not in value:
        raise ValueError(f'a policy declared as a dict needs a "rate", e.g. {DICT_EXAMPLE}.')
    return [value["rate"], *windows]


def build(action, rates, value=None):
    """The unsaved policy, extra windows and trust tiers that `rates` (main window first) and a declared
    dict `value` (its fields and tiers) declare for `action`. Tiers name their group, not yet looked up."""
    main, *extra = rates
    fields = {name: value[name] for name in POLICY_FIELDS if name in value} if isinstance(value, dict) else {}
    if isinstance(value, dict) and "same_content" in value:
        fields.update(content_fields(value["same_content"]))
    policy = ActionPolicy(action=action, period=main.period, max_count=main.max_count, **fields)
    windows = [ActionWindow(policy=policy, period=r.period, max_count=r.max_count) for r in extra]
    tiers = []
    for position, tier in enumerate(value.get("tiers", []) if isinstance(value, dict) else []):
        row = PolicyTier(
            policy=policy,
            position=position,
            new_member_days=tier.get("new_member_days"),
            multiplier=_decimal(tier.get("multiplier")),
        )
        tiers.append((row, tier.get("group")))
    return policy, windows, tiers


def content_fields(declared):
    """The same_content_* fields a declared "same_content" dict says (its shape checked by _shape)."""
    fields = {field: declared.get(key) for key, field in CONTENT_FIELDS.items()}
    if fields["same_content_answer"] is None:
        del fields["same_content_answer"]  # the model's default: refuse
    period = fields["same_content_period"]
    if isinstance(period, str) and period.strip().isdigit():
        fields["same_content_period"] = int(period)
    elif isinstance(period, str):
        parsed = parse_duration_text(period)
        # A text that reads as no length is left as it is: the model says what is wrong with it.
        if parsed is not None and not parsed.microseconds:
            fields["same_content_period"] = int(parsed.total_seconds())
    return fields


def _decimal(number):
    try:
        return Decimal(str(number)) if number is not None else None
    except InvalidOperation:
        return number


def _shape(value):
    """What is wrong with the shape of a declared dict (unknown keys, tiers that are not dicts)."""
    if not isinstance(value, dict):
        return
    # "history": where the action's past lives, for replaying drafts (checked by throttling.E013).
    known = {"rate", "windows", "tiers", "history", "same_content", *POLICY_FIELDS}
    for key in value:
        if key not in known:
            yield (
                f"{key!r} is not something a policy can say; use {', '.join(sorted(known))} "
                "(the names of the admin's fields)."
            )
    same = value.get("same_content", {})
    if not isinstance(same, dict):
        yield f'"same_content" is {same!r}; it must be a dict such as {CONTENT_EXAMPLE}.'
    else:
        for key in same:
            if key not in CONTENT_FIELDS:
                yield f'"same_content" has {key!r}; it says max, members, period and answer, e.g. {CONTENT_EXAMPLE}.'
        period = same.get("period")
        if isinstance(period, str) and not period.strip().isdigit() and parse_duration_text(period) is None:
            yield f'"same_content" has the period {period!r}; write a length such as "10m", "1h" or 600 (seconds).'
        for key in ("max", "members"):
            if key in same and (type(same[key]) is not int and same[key] is not None):
                yield f'"same_content" has {key} {same[key]!r}; it must be a whole number, e.g. {CONTENT_EXAMPLE}.'
        if "period" in same and type(same["period"]) not in (int, str) and same["period"] is not None:
            yield f'"same_content" has the period {same["period"]!r}; write a length such as "10m", or seconds.'

    tiers = value.get("tiers", [])
    if not isinstance(tiers, (list, tuple)):
        yield f'"tiers" is {tiers!r}; it must be a list such as [{{"group": "trusted", "multiplier": 2}}].'
        return
    for n, tier in enumerate(tiers, 1):
        if not isinstance(tier, dict):
            yield f'tier {n} is {tier!r}; each tier is a dict such as {{"new_member_days": 7, "multiplier": 0.5}}.'
            continue
        for key in tier:
            if key not in TIER_FIELDS:
                yield f"tier {n} has {key!r}; a tier says {', '.join(TIER_FIELDS)}."
        if "multiplier" not in tier:
            yield f'tier {n} has no "multiplier": say how its members’ limits are scaled, e.g. 2 or 0.5.'
        group = tier.get("group")
        if group is not None and (not isinstance(group, str) or not group.strip()):
            yield f'tier {n} names the group {group!r}; give the group\'s name, e.g. "trusted".'


def problems(declared):
    """Everything in the setting that the rate grammar or the models would refuse, in plain words.

    Needs no database, so `manage.py check` can say it before migrate runs.
    """
    if not isinstance(declared, dict):
        return [
            f"{SETTING} is {declared!r}; it must be a dict from action name to a rate, a list "
            f"of rates, e.g. {EXAMPLE}, or a dict of what the policy says, e.g. {DICT_EXAMPLE}."
        ]
    found = []
    for action, value in declared.items():
        if not isinstance(action, str):
            found.append(f'{SETTING} has the key {action!r}, which is not an action name such as "flag".')
            continue
        shape = list(_shape(value))
        if shape:
            found += [f"{SETTING}[{action!r}]: {problem}" for problem in shape]
            continue
        try:
            texts = _rate_texts(value)
            rates = parse_rates(texts)
        except ValueError as exc:
            found.append(f"{SETTING}[{action!r}]: {exc}")
            continue
        texts = [texts] if isinstance(texts, str) else list(texts)
        found += [f"{SETTING}[{action!r}]: {problem}" for problem in _refusals(action, texts, rates, value)]
    return found


def _refusals(action, texts, rates, value=None):
    policy, windows, tiers = build(action, rates, value)
    try:
        # Unique checks and table constraints need the database; the field
        # validators and clean() hold the same ranges and the log cap.
        policy.full_clean(validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        for field, messages in exc.message_dict.items():
            if field == "action":
                about = "the action name is refused"
            elif field in ("period", "max_count", "__all__"):
                about = f"{texts[0]!r} is refused"
            elif field.startswith("same_content_"):
                key = next(k for k, f in CONTENT_FIELDS.items() if f == field)
                said = value["same_content"].get(key)
                about = '"same_content" is refused' if said is None else f'"same_content" {key} {said!r} is refused'
            elif field == "scope" and isinstance(value, dict) and "same_content" in value:
                about = f'"same_content" with the scope {policy.scope!r} is refused'
            else:
                about = f"{field} {getattr(policy, field)!r} is refused"
            yield from (f"{about}: {message}" for message in messages)
    for n, (tier, _group) in enumerate(tiers, 1):
        try:
            tier.full_clean(exclude=["policy", "group"], validate_unique=False, validate_constraints=False)
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                yield from (f"tier {n}: {field} {getattr(tier, field)!r} is refused: {m}" for m in messages)
    seen = {rates[0].period: texts[0]}
    for text, rate, window in zip(texts[1:], rates[1:], windows):
        if rate.period in seen:
            yield f"{seen[rate.period]!r} and {text!r} have the same period; each window of a policy needs its own."
            continue
        seen[rate.period] = text
        try:
            window.full_clean(exclude=["policy"], validate_unique=False, validate_constraints=False)
        except ValidationError as exc:
            yield from (f"{text!r} is refused: {message}" for message in exc.messages)


def _fully_migrated(using):
    """Every throttling migration is applied on `using`, so the tables match the models.

    post_migrate is sent after a partial or backward migrate too (`migrate throttling 0003`).
    """
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(connections[using], ignore_no_migrations=True)
    return set(loader.graph.leaf_nodes("throttling")) <= set(loader.applied_migrations)


def create_declared_policies(sender, using=DEFAULT_DB_ALIAS, verbosity=1, stdout=None, **kwargs):
    """post_migrate receiver: a row for each declared action that has none on `using`.

    Runs after every migrate and every flush, so a flushed database gets the
    declared policies back. A row that exists is never changed, whatever the
    setting says now: a moderator may have edited it. Only the migration's
    unedited starting policy for reply, post or like gives way, as it does to
    any policy created in code (ActionPolicyManager.create).
    """
    declared = settings.DEFAULT_POLICIES
    if not declared:
        return
    if not router.allow_migrate_model(using, ActionPolicy) or not _fully_migrated(using):
        return
    found = problems(declared)
    if found:
        # `manage.py check` (throttling.E006) reports the same before migrate; this
        # is reached only with --skip-checks or by a flush.
        raise ImproperlyConfigured(" ".join(found))
    out = stdout or sys.stdout
    created = []
    with transaction.atomic(using=using):
        rows = ActionPolicy.objects.using(using).filter(action__in=list(declared))
        stock = dict(rows.values_list("action", "stock_default"))
        for action, value in declared.items():
            if stock.get(action) is False:
                if verbosity >= 2:
                    out.write(f"  Action policy {action!r} exists; {SETTING} leaves it as it is.\n")
                continue
            if stock.get(action):
                rows.filter(action=action, stock_default=True).delete()
            _create(action, parse_rates(_rate_texts(value)), using, value)
            created.append(action)
    if not created:
        return
    if verbosity >= 1:
        out.write(f"  Created action policies from {SETTING}: {', '.join(created)}.\n")
    try:
        invalidate_policies()
    except Exception:  # no Redis (yet) must never fail migrate; processes reload within POLICY_MAX_AGE
        logger.warning("throttling: could not announce the policies created from %s", SETTING, exc_info=True)


def _create(action, rates, using, value=None):
    policy, windows, tiers = build(action, rates, value)
    # The router hint makes full_clean() validate the table constraints on
    # `using`. Its unique checks would read the default database whatever
    # `using` is, so they are left out: the action was looked up on `using`
    # above, and the table's unique index backs that up.
    policy._state.db = using
    policy.full_clean(validate_unique=False)
    policy.save(using=using)
    for window in windows:
        window.policy = policy
        window._state.db = using
        window.full_clean(validate_unique=False)
        window.save(using=using)
    for tier, group in tiers:
        tier.policy = policy
        if group is not None:
            # A tier names its group; a group the site has not made yet is made empty, ready to fill.
            tier.group, _ = Group.objects.using(using).get_or_create(name=group)
        tier._state.db = using
        tier.full_clean(validate_unique=False)
        tier.save(using=using)
