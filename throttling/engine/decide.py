"""What a decision sends to Redis and what the reply means: shared by the sync and the async API."""

import logging
import time

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils import timezone

from .. import observe, signals
from ..backends.resp import bulk
from ..conf import settings
from ..exceptions import BackendTimeout
from . import trust
from .approvals import held_for_approval
from .decision import (
    ADMITTED,
    BACKEND_FAILURE,
    DISABLED,
    EXEMPT,
    PENALISED,
    SHADOW,
    THROTTLED,
    TOO_COSTLY,
    UNKNOWN_ACTION,
    Decision,
)
from .doubt import in_doubt
from .identity import escape, identify
from .keys import TOKEN_BUCKET, changes_channel, penalty_key, state_keys, targets_key, tokens
from .local import local_refusals
from .measures import measures
from .mirror import PenaltyInfo
from .moderators import is_moderator
from .policies import MEMBER, SITE, policies
from .policies import SHADOW as SHADOW_MODE

logger = logging.getLogger("throttling")

_warned_unknown = set()
_last_failure_log = [0.0]
# The escalation argument of a refund, which never counts an offence.
_NO_OFFENCE = b"1 0 1"


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


def target_part(target):
    if target is None:
        return None
    text = str(target)
    if not text:
        raise ValueError("A target must not be empty; pass None to count per identity only.")
    return escape(text)


def site_identity(part):
    """What a site-wide policy counts under: one count for everyone, per target when given
    (an escaped target part), so busy targets spread over a cluster."""
    return "site" if part is None else f"site@{part}"


def keyed(who, key):
    """(identity counted, user, member whose penalties refuse): `key` (a client-chosen string,
    throttle_key) chooses what is counted; the member behind `who`, if any, stays refused while
    penalised."""
    identity, user = identify(who)
    if key is None:
        return identity, user, None
    return *identify(str(key)), (identity if user is not None else None)


def slotted(backend, member):
    """True when a member's penalty mirror may live on another node than a key's count (a cluster):
    the decision is planned again without it, after a penalty_probe()."""
    return member is not None and backend.topology.kind == "cluster"


def sent(planned):
    """decide_packed()'s arguments for a plan: algorithm, KEYS count, RESP body, KEYS + ARGV count, routing key."""
    policy, keys = planned[4], planned[0]
    if len(keys) == 4:
        return policy.algorithm, 4, planned[3], policy.script_argc, keys[0]
    # Per target: the targets index in KEYS and the target after the windows.
    return policy.algorithm, 5, planned[3], policy.script_argc + 2, keys[0]


def penalised_by(probe, reply):
    """The refusal a penalty_probe()'s reply means when a penalty is in force, else None."""
    refused, _ = interpret(probe, reply)
    return refused if refused.reason == PENALISED else None


def penalty_probe(policy, member):
    """A peek at the member's own keys of a per-member policy, or None.

    On a cluster a key's count and the member's penalty mirror hash to different slots, so one
    script cannot read both: this call reads the mirror first (one more round trip, only for a
    signed-in member's decision under a key on a cluster).
    """
    if policy.scope != MEMBER:
        return None
    return plan(policy, member, None, 1, False)


def plan(policy, identity, user, cost, record, target=None, penalties=None, who=None, standing=None):
    """What a decision sends: (keys, token, offence window, RESP body, policy, identity, user, cost, record, target).

    `policy` comes back scaled by the member's trust tier or override, and by the blocks and surges
    in force for `who` (the request, user or string decided). `penalties` is the member identity
    whose penalty mirror the script reads in place of the counted identity's. `standing` is the
    policy a first plan of the same decision came back with, when it is planned again (a cluster).
    """
    if standing is not None:
        policy = standing
    else:
        if user is not None:
            if policy.exempt_staff and is_moderator(user):
                return Decision(True, policy.action, reason=EXEMPT, identity=identity, verb=policy.verb)
            multiplier = trust.standing(policy, user, policies.overrides)
            if multiplier != 1:
                if multiplier == trust.EXEMPT:
                    return Decision(True, policy.action, reason=EXEMPT, identity=identity, verb=policy.verb)
                policy = policy.scaled(multiplier)
        if policy.hold_until_approved is not None:  # trust earned by approval (see Guide › Held for review)
            policy = held_for_approval(policy, user)
        if measures.active:  # a block, a surge or a surge trigger exists (see Raids › Decided in the process)
            policy = measures.applied(policy, who, user, identity, cost, record, penalties)
            if type(policy) is Decision:
                return policy
    if cost > policy.smallest_max:
        return _too_costly(policy, identity)
    part = target_part(target)
    shape_key = (policy.serial, identity, part, cost, record, user is None, penalties)
    shape = _shapes.get(shape_key)
    if shape is None:
        shape = _shape(shape_key, policy, identity, part, cost, record, user, penalties)
    keys, window, head, tail = shape
    token = tokens.next()
    # KEYS and ARGV as RESP: the keys, mode and cost (head), the token, then the action and what
    # the script reads only when it refuses (offence window, threshold, pending TTL) and the windows.
    body = b"%s$%d\r\n%s\r\n%s" % (head, len(token), token.encode(), tail)
    return keys, token, window, body, policy, identity, user, cost, record, target


# What a decision sends besides its token, by (policy serial, identity, target part, cost, record,
# anonymous, penalties): everything there is known before the token. Members come back often, so
# each decision after the first formats one token into it; bounded like every per-identity cache
# (see Architecture › Bounded memory), and forgotten when a THROTTLING_ setting changes.
_shapes = {}
_SHAPES_MAX = 8192


def _shape(shape_key, policy, identity, part, cost, record, user, penalties):
    """(keys, offence window, RESP before the token, RESP after it) of plan(), remembered in _shapes."""
    counted, threshold = identity, offence_threshold(policy, user)
    if policy.scope == SITE:
        counted, part = site_identity(part), None
    keys = tuple(state_keys(counted, policy.action, policy.algorithm, part))
    if part is not None:
        # Counted per target: the identity's targets of the action are kept beside, so a reset
        # finds every one (see Architecture › Resetting every target).
        keys = (*keys, targets_key(counted, policy.action))
    if penalties is not None and policy.scope == MEMBER:
        # A key identity is never penalised itself, so its mirror slot holds the member's:
        # still one script call, and a penalised member cannot escape by choosing a key.
        keys = (*keys[:2], penalty_key(penalties), *keys[3:])
    window = policy.offence_window or settings.OFFENCE_WINDOW
    escalation = b"%d %d %d" % (window, threshold, settings.ESCALATION_TIMEOUT)
    shape = (
        keys,
        window,
        b"".join(map(bulk, keys)) + bulk(b"c%d" % cost if record else b"p%d" % cost),
        policy.packed_action + bulk(escalation) + policy.packed_windows + (b"" if part is None else bulk(part)),
    )
    if len(_shapes) >= _SHAPES_MAX:
        _shapes.clear()
    _shapes[shape_key] = shape
    return shape


@receiver(setting_changed)
def _forget_shapes(setting, **kwargs):
    if setting.startswith("THROTTLING_"):
        _shapes.clear()


def offence_threshold(policy, user):
    """Offences that escalate `user` under `policy`; 0: never escalated. Only members are penalised
    (anonymous identities are only throttled), never under a site-wide or a shadow policy."""
    if user is None or policy.scope == SITE or policy.mode == SHADOW_MODE or not settings.PENALTIES:
        return 0
    return settings.OFFENCE_THRESHOLD if policy.offence_threshold is None else policy.offence_threshold


def refusal_key(identity, action, target, member, cost):
    """What a local refusal is remembered by: everything the decision depended on besides time."""
    return identity, action, None if target is None else str(target), member, cost


def remember_refusal(key, planned, decision, generation):
    """Remember a refusal Redis gave (see Architecture › Floods answered locally), when it may be
    answered locally: a throttled refusal once its run of offences has crossed the threshold (so the
    crossing, and the escalation, are Redis's as ever), or when its offences never escalate; a
    penalised one always. Admissions, shadow and exempt answers and failures never get here.
    `generation`: local_refusals.generation as the decision began (see LocalRefusals.remember)."""
    if decision.reason == PENALISED:
        local_refusals.remember(key, decision, None, generation)
        return
    if decision.reason != THROTTLED:
        return
    policy, user = planned[4], planned[6]
    threshold = offence_threshold(policy, user)
    if threshold and decision.offences < threshold:
        return
    keys = planned[0]
    spec = f"{planned[2]} {threshold} {settings.ESCALATION_TIMEOUT}"
    local_refusals.remember(key, decision, (keys[1], keys[3], spec), generation)


def _too_costly(policy, identity):
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


def not_decided(plan, exc):
    keys, token, _, _, policy, identity, _, cost, _, _ = plan
    if isinstance(exc, BackendTimeout):
        # Sent, but no answer: Redis may still run it (see Architecture › Backend failure is not a 500).
        in_doubt.add(policy.algorithm, keys, token, cost)
    return _backend_failure(policy, identity, exc)


def interpret(plan, reply):
    """(the Decision a script reply means, the escalation run it started or 0)."""
    keys, token, _, _, policy, identity, _, cost, record, target = plan
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


def log_refund_target(decision):
    """refund_log()'s (targets index, target) of a per-target sliding-log decision; () per member."""
    return (decision.keys[4], target_part(decision.target)) if len(decision.keys) > 4 else ()


def bucket_refund(decision):
    """(KEYS, ARGV) giving a bucket decision's tokens back, under the windows it was decided with, and
    publishing the refund on the change channel (in the token's place)."""
    args = tuple(str(n).encode() for w in decision.windows for n in w)
    if len(decision.keys) > 4:
        # Per target: a refund is a write of the bucket too, and keeps its targets index (the target last).
        args += (target_part(decision.target),)
    head = (b"r%d" % decision.entries[1], changes_channel(), decision.action, _NO_OFFENCE)
    return list(decision.keys), (*head, *args)
