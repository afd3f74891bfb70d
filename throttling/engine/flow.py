"""The decision flow, written once for sync and async code: generators that yield each wait as a named
effect, driven by api.py (which calls) and asyncapi.py (which awaits). See Architecture › One flow, two
drivers."""

import logging

from ..conf import settings
from ..exceptions import BackendError
from .content import decisions as content_decisions
from .deciding.plan import (
    bucket_refund,
    log_refund_target,
    penalty_probe,
    plan,
    refusal_key,
    remember_refusal,
    sent,
)
from .deciding.replies import check_cost, interpret, not_decided, penalised_by, policy_checked
from .decision import DISABLED, THROTTLED, Decision
from .effects import TOPOLOGY, Blocking, Call, UserOf
from .identity import identify, request_identity
from .keys import TOKEN_BUCKET, changes_channel
from .offences.record import record_offence
from .policies import approvals, trust
from .policies.cache import policies
from .refusal_memory import local_refusals

logger = logging.getLogger("throttling")


def decide(who, action, cost, record, target=None, key=None, content=None):
    """The decision of check() and peek() (record False), acheck() and apeek(): a generator of effects
    whose return value is the Decision."""
    generation = local_refusals.generation  # before the policy and Redis are read
    check_cost(cost)
    if not settings.ENABLED:
        return Decision(True, action, reason=DISABLED)
    hit, policy = policies.cached(action)
    if not hit:
        policy = yield Blocking(policies.get, (action,))
    policy = policy_checked(action, policy)
    if type(policy) is Decision:
        return policy
    if hasattr(who, "META"):  # a request: its user may need the session, and so the database
        identity, user = request_identity(who, (yield UserOf(who)))
    else:
        identity, user = identify(who)
    member = None
    if key is not None:
        # A client-chosen string (throttle_key) is counted; the member behind `who`, if any, stays
        # refused while penalised.
        member = identity if user is not None else None
        identity, user = identify(str(key))
    if local_refusals.entries:
        refused = local_refusals.answer(refusal_key(identity, action, target, member, cost), user, policy, record)
        if refused is not None:
            if record and refused.reason == THROTTLED:
                if refused.offences == 1:  # the action_throttled signal's receivers run
                    yield Blocking(record_offence, (refused, user, 0, 0, ""))
                else:
                    record_offence(refused, user, 0, 0, "")  # an in-process count only
            return refused
    # A tier that names a group needs the member's groups: read here, where the driver may use a thread.
    groups = (yield Blocking(trust.groups.get, (user,))) if trust.needs_groups(policy, user) else None
    # Whether the member earned trust (hold_until_approved) may need a count of their approvals:
    # asked here too, and handed to plan() so it is asked once.
    trusted = None
    if approvals.needs_count(policy, user):
        trusted = yield Blocking(approvals.approvals.trusted, (user, action, policy.hold_until_approved))
    planned = plan(policy, identity, user, cost, record, target, member, who, groups=groups, trusted=trusted)
    if type(planned) is Decision:
        return planned
    said = None if content is None else content_decisions.fingerprint_for(planned.policy, content)
    try:
        if member is not None and (yield TOPOLOGY) == "cluster":
            # The member's penalty mirror and the key's count live in different slots: read the
            # mirror first, then decide without it.
            planned = plan(policy, identity, user, cost, record, target, standing=planned.policy)
            probe = penalty_probe(policy, member)
            if probe:
                refused = penalised_by(probe, (yield Call("decide_packed", sent(probe))))
                if refused is not None:
                    remember_refusal(refusal_key(identity, action, target, member, cost), probe, refused, generation)
                    return refused
        if said is None:
            decision, crossing = interpret(planned, (yield Call("decide_packed", sent(planned))))
        else:
            decision, crossing = yield from content_decisions.decide(planned, said)
    except BackendError as exc:
        return not_decided(planned, exc)
    if record and decision.offences and decision.penalty is None:
        # The throttled signal's receivers and the escalation's hand-off are synchronous code.
        yield Blocking(record_offence, (decision, user, planned.window, crossing, planned.token))
    if not decision.allowed:
        remember_refusal(refusal_key(identity, action, target, member, cost), planned, decision, generation)
    return decision


def refund(decision):
    """refund() and arefund(): give back what an admitted decision took, once; True when given back."""
    if not decision.entries:
        return False
    try:
        if decision.entries[0] == TOKEN_BUCKET:
            yield Call("decide", (TOKEN_BUCKET, *bucket_refund(decision)))
        else:
            refunded = (decision.log_key, decision.entries, changes_channel(), *log_refund_target(decision))
            yield Call("refund_log", refunded)
    except BackendError as exc:
        logger.warning("throttling: could not refund %r: %s", decision.action, exc)
        return False
    decision.entries = ()
    if decision.content:
        try:
            for keys, args in content_decisions.forget_calls(*decision.content):
                yield Call("decide", ("content_forget", keys, args))
        except BackendError as exc:  # the quota is back; the post is forgotten when its period ends
            logger.warning("throttling: could not forget the content of a refunded %r: %s", decision.action, exc)
        decision.content = ()
    # Every other process forgets them as the refund's message arrives.
    local_refusals.forget(decision.log_key)
    return True


def identity_of(who):
    """reset()'s and areset()'s identity of `who`: a generator, since a request's user may need the database."""
    if hasattr(who, "META"):
        return request_identity(who, (yield UserOf(who)))[0]
    return identify(who)[0]
