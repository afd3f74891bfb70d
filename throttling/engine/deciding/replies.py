"""What a decision answers: a script's reply read into a Decision, and the answers given without one (an
unknown or disabled action, a cost no window holds, Redis failing)."""

import logging
import time

from django.utils import timezone

from ... import signals
from ...common import observe
from ...conf import settings
from ...exceptions import BackendTimeout
from ..background.undo_timeouts import in_doubt
from ..decision import (
    ADMITTED,
    BACKEND_FAILURE,
    DISABLED,
    PENALISED,
    SHADOW,
    THROTTLED,
    TOO_COSTLY,
    UNKNOWN_ACTION,
    Decision,
)
from ..keys import TOKEN_BUCKET
from ..policies.cache import SHADOW as SHADOW_MODE
from ..policies.cache import policies
from .penalty_codec import PenaltyInfo

logger = logging.getLogger("throttling")

_warned_unknown = set()
_last_failure_log = [0.0]


def check_cost(cost):
    # bool is an int in Python; True as a cost is a mistake, not 1.
    if type(cost) is not int or cost < 1:
        raise ValueError(f"cost must be a whole number of at least 1, not {cost!r}")


def policy_or_decision(action, cost):
    """The action's PolicySpec, or the Decision when none is needed (off, unknown, disabled)."""
    check_cost(cost)
    if not settings.ENABLED:
        return Decision(True, action, reason=DISABLED)
    return policy_checked(action, policies.get(action))


def policy_checked(action, policy):
    if policy is None:
        return _unknown(action)
    if not policy.enabled:
        return Decision(True, action, reason=DISABLED, verb=policy.verb)
    return policy


def not_decided(planned, exc):
    """The answer when Redis failed a planned decision: the site's fail-open choice."""
    policy = planned.policy
    if isinstance(exc, BackendTimeout):
        # Sent, but no answer: Redis may still run it (see Architecture › Backend failure is not a 500).
        in_doubt.add(policy.algorithm, planned.keys, planned.token, planned.cost)
    return _backend_failure(policy, planned.identity, exc)


def interpret(planned, reply):
    """(the Decision a script reply means for a Plan, the escalation run it started or 0)."""
    keys, token, _, _, policy, identity, _, cost, record, target = planned  # every field, read once
    allowed, limit, remaining, retry_us, reset_us, offences, *extra = reply
    crossing = 0
    if extra:  # only a crossing or a penalty lengthens the reply
        if len(extra) > 1:
            return _penalised(policy, identity, extra[1], retry_us, offences), 0
        crossing = extra[0]
    entries = ()
    if allowed and record:
        if policy.algorithm == TOKEN_BUCKET:
            entries = (TOKEN_BUCKET, cost)
        elif cost == 1:
            entries = (token,)
        else:
            entries = (token, *[f"{token}.{j}" for j in range(2, cost + 1)])
    reason = policy.admitted  # ADMITTED, or SHADOW under a block in shadow mode
    if not allowed:
        reason = THROTTLED
        if policy.mode == SHADOW_MODE:
            # Would have been refused: counted as an offence, shown in the report, never refused.
            allowed, reason, retry_us = 1, SHADOW, 0
    # Positional, in Decision's field order: the common case, built once per decision.
    decision = Decision(
        allowed != 0,  # allowed
        policy.action,  # action
        limit,  # limit
        remaining,  # remaining
        retry_us / 1e6,  # retry_after
        reset_us / 1e6,  # reset_after
        reason,  # reason
        identity,  # identity
        offences if reason != ADMITTED else 0,  # offences
        policy.verb,  # verb
        None,  # penalty
        crossing != 0,  # escalated
        entries,  # entries
        policy.windows,  # windows
        keys,  # keys
        None if target is None else str(target),  # target
    )
    if policy.held and allowed and reason == ADMITTED:
        # Admitted, and held for review: by a block that holds, or until the member earns trust.
        decision.held, decision.reason = True, policy.held
    return decision, crossing


def _penalised(policy, identity, raw, retry_us, offences):
    try:
        info = PenaltyInfo.decode(raw)
    except (ValueError, TypeError) as exc:
        # A mirror we cannot read still refuses: the script has judged it in force.
        logger.warning("throttling: unreadable penalty mirror for %s: %s", identity, exc)
        info = PenaltyInfo(0, 0, policy.action, timezone.now(), "")
    shadow = policy.mode == SHADOW_MODE  # a shadow policy refuses nobody, a penalised member included
    return Decision(
        allowed=shadow,
        action=policy.action,
        limit=0,
        remaining=0,
        retry_after=0.0 if shadow else retry_us / 1e6,
        reset_after=retry_us / 1e6,
        reason=SHADOW if shadow else PENALISED,
        identity=identity,
        offences=offences,
        verb=policy.verb,
        penalty=info,
        windows=policy.windows,
    )


_WARNED_UNKNOWN_MAX = 256


def _unknown(action):
    if action not in _warned_unknown:
        if len(_warned_unknown) >= _WARNED_UNKNOWN_MAX:
            # Action names may come from user input: the memory of warnings is
            # bounded (at worst a name is warned about again).
            _warned_unknown.clear()
        _warned_unknown.add(action)
        logger.warning(
            "throttling: no policy for action %r; %s (add one in the admin, or set THROTTLING_UNKNOWN_ACTION)",
            action,
            "refusing it" if settings.UNKNOWN_ACTION == "deny" else "allowing it",
        )
    if settings.UNKNOWN_ACTION == "deny":
        return Decision(False, action, retry_after=float(settings.FAIL_CLOSED_RETRY_AFTER), reason=UNKNOWN_ACTION)
    return Decision(True, action, reason=UNKNOWN_ACTION)


def _backend_failure(policy, identity, exc):
    observe.backend_error()
    # A shadow policy refuses nobody, not even when Redis is down and the site fails closed.
    fail_open = policy.mode == SHADOW_MODE or (settings.FAIL_OPEN if policy.fail_open is None else policy.fail_open)
    now = time.monotonic()
    # One log line per 10 s: an outage must be visible, not flood the log.
    if now - _last_failure_log[0] > 10:
        _last_failure_log[0] = now
        logger.warning(
            "throttling: Redis unavailable (%s); failing %s for %r",
            exc,
            "open" if fail_open else "closed",
            policy.action,
        )
    signals.backend_failure.send(
        sender=Decision, action=policy.action, identity=identity, error=exc, fail_open=fail_open
    )
    return Decision(
        allowed=fail_open,
        action=policy.action,
        retry_after=0.0 if fail_open else float(settings.FAIL_CLOSED_RETRY_AFTER),
        reason=BACKEND_FAILURE,
        identity=identity,
        verb=policy.verb,
    )


def penalised_by(probe, reply):
    """The refusal a penalty_probe()'s reply means when a penalty is in force, else None."""
    refused, _ = interpret(probe, reply)
    return refused if refused.reason == PENALISED else None


def too_costly(policy, identity):
    # Limits are data a moderator edits (a tier or an override of x0.5 on a policy of 3), so
    # a cost no window can hold is an answer, never an exception on the request path.
    shadow = policy.mode == SHADOW_MODE
    return Decision(
        allowed=shadow,
        action=policy.action,
        limit=policy.smallest_max,
        remaining=policy.smallest_max,
        reason=SHADOW if shadow else TOO_COSTLY,
        identity=identity,
        verb=policy.verb,
    )
