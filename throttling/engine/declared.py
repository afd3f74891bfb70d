"""Policies declared in code (THROTTLING_DEFAULT_POLICIES): checked against the models, created after migrate."""

import logging
import sys

from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import DEFAULT_DB_ALIAS, connections, router, transaction

from ..conf import settings
from ..durations import parse_rates
from ..models import ActionPolicy, ActionWindow
from .policies import invalidate_policies

logger = logging.getLogger("throttling")

SETTING = "THROTTLING_DEFAULT_POLICIES"
EXAMPLE = '{"flag": ["3/min", "20/day"], "reply": "5/10s"}'


def build(action, rates):
    """The unsaved policy and extra windows that `rates` (main window first) declare for `action`."""
    main, *extra = rates
    policy = ActionPolicy(action=action, period=main.period, max_count=main.max_count)
    return policy, [ActionWindow(policy=policy, period=r.period, max_count=r.max_count) for r in extra]


def problems(declared):
    """Everything in the setting that the rate grammar or the models would refuse, in plain words.

    Needs no database, so `manage.py check` can say it before migrate runs.
    """
    if not isinstance(declared, dict):
        return [
            f"{SETTING} is {declared!r}; it must be a dict from action name to a rate or a list "
            f"of rates, e.g. {EXAMPLE}."
        ]
    found = []
    for action, value in declared.items():
        if not isinstance(action, str):
            found.append(f'{SETTING} has the key {action!r}, which is not an action name such as "flag".')
            continue
        try:
            rates = parse_rates(value)
        except ValueError as exc:
            found.append(f"{SETTING}[{action!r}]: {exc}")
            continue
        texts = [value] if isinstance(value, str) else list(value)
        found += [f"{SETTING}[{action!r}]: {problem}" for problem in _refusals(action, texts, rates)]
    return found


def _refusals(action, texts, rates):
    policy, windows = build(action, rates)
    try:
        # Unique checks and table constraints need the database; the field
        # validators and clean() hold the same ranges and the log cap.
        policy.full_clean(validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        for field, messages in exc.message_dict.items():
            about = "the action name is refused" if field == "action" else f"{texts[0]!r} is refused"
            yield from (f"{about}: {message}" for message in messages)
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
            _create(action, parse_rates(value), using)
            created.append(action)
    if not created:
        return
    if verbosity >= 1:
        out.write(f"  Created action policies from {SETTING}: {', '.join(created)}.\n")
    try:
        invalidate_policies()
    except Exception:  # no Redis (yet) must never fail migrate; processes reload within POLICY_MAX_AGE
        logger.warning("throttling: could not announce the policies created from %s", SETTING, exc_info=True)


def _create(action, rates, using):
    policy, windows = build(action, rates)
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
