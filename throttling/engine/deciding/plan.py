"""What one decision sends to Redis: the policy as it applies to this member, the keys, and the script's
arguments packed as RESP once per member and policy, named as a `Plan`."""

import logging
from typing import NamedTuple

from django.core.signals import setting_changed
from django.dispatch import receiver

from ...backends.resp import bulk
from ...conf import settings
from ..countermeasures.in_force import measures
from ..decision import EXEMPT, PENALISED, THROTTLED, Decision
from ..identity import escape
from ..keys import changes_channel, penalty_key, state_keys, targets_key, tokens
from ..moderators import is_moderator
from ..offences.record import offence_threshold
from ..policies import trust
from ..policies.approvals import held_for_approval
from ..policies.cache import MEMBER, SITE, policies
from ..refusal_memory import local_refusals
from .replies import too_costly

logger = logging.getLogger("throttling")

_new_plan = tuple.__new__

# The escalation argument of a refund, which never counts an offence.
_NO_OFFENCE = b"1 0 1"


class Plan(NamedTuple):
    """What one decision sends, and what reading its reply needs: plan()'s hand-off to the script call
    and to replies.interpret()."""

    keys: tuple  # the identity's keys: penalties, state, offences, pending escalation[, targets index]
    token: str  # the unique member this decision's log entry gets (see Architecture › Colliding members)
    window: int  # the offence window, in seconds
    body: bytes  # KEYS and ARGV as RESP
    policy: object  # the PolicySpec as it applies: scaled by tier, override, block or surge
    identity: str  # what is counted
    user: object  # the member deciding, or None
    cost: int
    record: bool  # check() records; peek() does not
    target: object  # what the count is per (a thread …), or None


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


def sent(planned):
    """decide_packed()'s arguments for a Plan: algorithm, KEYS count, RESP body, KEYS + ARGV count, routing key."""
    policy, keys = planned.policy, planned.keys
    if len(keys) == 4:
        return policy.algorithm, 4, planned.body, policy.script_argc, keys[0]
    # Per target: the targets index in KEYS and the target after the windows.
    return policy.algorithm, 5, planned.body, policy.script_argc + 2, keys[0]


def penalty_probe(policy, member):
    """A peek at the member's own keys of a per-member policy, or None.

    On a cluster a key's count and the member's penalty mirror hash to different slots, so one
    script cannot read both: this call reads the mirror first (one more round trip, only for a
    signed-in member's decision under a key on a cluster).
    """
    if policy.scope != MEMBER:
        return None
    return plan(policy, member, None, 1, False)


def plan(
    policy,
    identity,
    user,
    cost,
    record,
    target=None,
    penalties=None,
    who=None,
    standing=None,
    groups=None,
    trusted=None,
):
    """What a decision sends: a Plan, or the Decision when no script call is needed (exempt, too costly,
    refused by a block).

    `policy` comes back scaled by the member's trust tier or override, and by the blocks and surges
    in force for `who` (the request, user or string decided). `penalties` is the member identity
    whose penalty mirror the script reads in place of the counted identity's. `standing` is the
    policy a first plan of the same decision came back with, when it is planned again (a cluster).
    `groups` holds the ids of the member's groups, `trusted` whether they earned trust by approvals,
    when the flow has read them already.
    """
    if standing is not None:
        policy = standing
    else:
        if user is not None:
            if policy.exempt_staff and is_moderator(user):
                return Decision(True, policy.action, reason=EXEMPT, identity=identity, verb=policy.verb)
            multiplier = trust.standing(policy, user, policies.overrides, groups)
            if multiplier != 1:
                if multiplier == trust.EXEMPT:
                    return Decision(True, policy.action, reason=EXEMPT, identity=identity, verb=policy.verb)
                policy = policy.scaled(multiplier)
        if policy.hold_until_approved is not None:  # trust earned by approval (see Guide › Held for review)
            policy = held_for_approval(policy, user, trusted)
        if measures.active:  # a block, a surge or a surge trigger exists (see Raids › Decided in the process)
            policy = measures.applied(policy, who, user, identity, cost, record, penalties)
            if type(policy) is Decision:
                return policy
    if cost > policy.smallest_max:
        return too_costly(policy, identity)
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
    # tuple.__new__: a Plan without the Python-level __new__ a NamedTuple adds, on every decision.
    return _new_plan(Plan, (keys, token, window, body, policy, identity, user, cost, record, target))


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
    threshold = offence_threshold(planned.policy, planned.user)
    if threshold and decision.offences < threshold:
        return
    keys = planned.keys
    spec = f"{planned.window} {threshold} {settings.ESCALATION_TIMEOUT}"
    local_refusals.remember(key, decision, (keys[1], keys[3], spec), generation)


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
