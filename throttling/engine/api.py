"""The decision API: check / peek / acquire / reset / refund, one Redis script call each."""

import logging
import time
from time import perf_counter

from .. import observe
from ..backends.redis import get_backend
from ..exceptions import BackendError
from . import duplicates
from .decide import (
    bucket_refund,
    interpret,
    keyed,
    log_refund_target,
    not_decided,
    penalised_by,
    penalty_probe,
    plan,
    policy_or_decision,
    refusal_key,
    remember_refusal,
    sent,
    slotted,
)
from .decision import THROTTLED, TOO_COSTLY, Decision
from .identity import identify
from .keys import TOKEN_BUCKET, changes_channel
from .local import local_refusals
from .offences import record_offence
from .policies import policies
from .reset import forget

logger = logging.getLogger("throttling")

# Safe methods only read; they are not behaviour a community limits.
DEFAULT_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def check(who, action, *, cost=1, target=None, key=None, content=None):
    """Decide and, when admitted, record `cost`. One EVALSHA.

    `target` (a thread, a post, a recipient: anything with a str()) counts per
    (identity, target) instead of per identity: replies per thread. `key` (an
    API key, a header: what throttle_key returns) is counted instead of `who`;
    the member behind `who` is still refused while penalised. `content` (the
    text of the post) is judged in the same call against the policy's limits
    on repeated content, when it has any (see Guide › Repeated content).
    """
    started = perf_counter()
    decision = _decide(who, action, cost, True, target, key, content)
    observe.decided(decision, perf_counter() - started)
    return decision


def peek(who, action, *, cost=1, target=None, key=None, content=None):
    """Decide as check() would, recording nothing."""
    started = perf_counter()
    decision = _decide(who, action, cost, False, target, key, content)
    observe.decided(decision, perf_counter() - started)
    return decision


def is_action_allowed(who, action):
    """The classic interface: True when admitted (and recorded, like check)."""
    return check(who, action).allowed


def acquire(who, action, *, timeout, cost=1, target=None, content=None):
    """check() until admitted or `timeout` seconds have passed, sleeping the wait in between.

    For background jobs (Redisson's tryAcquire(timeout)): it sleeps each
    refusal's retry_after (no busy loop) and never sleeps past the deadline;
    the last Decision is returned, admitted or not. A penalty, an unknown
    action denied, or Redis failing closed is not waited out when its wait
    ends after the deadline.
    """
    if timeout < 0:
        raise ValueError(f"timeout must be at least 0 seconds, not {timeout!r}")
    deadline = time.monotonic() + timeout
    while True:
        decision = check(who, action, cost=cost, target=target, content=content)
        if decision.allowed or decision.reason == TOO_COSTLY:  # no wait makes room for it
            return decision
        left = deadline - time.monotonic()
        wait = max(decision.retry_after, 0.001)
        if wait > left:
            return decision
        time.sleep(wait)


def _decide(who, action, cost, record, target=None, key=None, content=None):
    generation = local_refusals.generation  # before the policy and Redis are read
    policy = policy_or_decision(action, cost)
    if type(policy) is Decision:
        return policy
    identity, user, member = keyed(who, key)
    if local_refusals.entries:
        refused = local_refusals.answer(refusal_key(identity, action, target, member, cost), user, policy, record)
        if refused is not None:
            if record and refused.reason == THROTTLED:
                record_offence(refused, user, 0, 0, "")
            return refused
    planned = plan(policy, identity, user, cost, record, target, member, who)
    if type(planned) is Decision:
        return planned
    said = None if content is None else duplicates.fingerprint_for(planned[4], content)
    try:
        backend = get_backend()
        if slotted(backend, member):
            planned = plan(policy, identity, user, cost, record, target, standing=planned[4])
            probe = penalty_probe(policy, member)
            if probe:
                refused = penalised_by(probe, backend.decide_packed(*sent(probe)))
                if refused is not None:
                    remember_refusal(refusal_key(identity, action, target, member, cost), probe, refused, generation)
                    return refused
        if said is None:
            decision, crossing = interpret(planned, backend.decide_packed(*sent(planned)))
        else:
            decision, crossing = duplicates.decide(backend, planned, said)
    except BackendError as exc:
        return not_decided(planned, exc)
    if record and decision.offences and decision.penalty is None:
        record_offence(decision, user, planned[2], crossing, planned[1])
    if not decision.allowed:
        remember_refusal(refusal_key(identity, action, target, member, cost), planned, decision, generation)
    return decision


def http_methods(methods):
    """HTTP method names as requests carry them: upper case ("post" is POST); one name or several."""
    if isinstance(methods, str):
        methods = (methods,)
    return frozenset(str(m).upper() for m in methods)


def view_action(view, method):
    """The action a view class declares for an HTTP method (throttle_action(s)), or None; method names
    in either case ({"post": "reply"}, throttle_methods = ["post"])."""
    actions = getattr(view, "throttle_actions", None)
    if actions:
        for named, action in actions.items():
            if isinstance(named, str) and named.upper() == method:
                return action
        return None
    action = getattr(view, "throttle_action", None)
    if action and method in http_methods(getattr(view, "throttle_methods", DEFAULT_METHODS)):
        return action
    return None


def refund(decision):
    """Give back what an admitted decision took (the view failed; see Architecture › Counting what did not happen): its log entries or its tokens, and its post's content.

    A decision is refunded at most once.
    """
    if not decision.entries:
        return False
    try:
        backend = get_backend()
        if decision.entries[0] == TOKEN_BUCKET:
            backend.decide(TOKEN_BUCKET, *bucket_refund(decision))
        else:
            backend.refund_log(decision.log_key, decision.entries, changes_channel(), *log_refund_target(decision))
    except BackendError as exc:
        logger.warning("throttling: could not refund %r: %s", decision.action, exc)
        return False
    decision.entries = ()
    if decision.content:
        try:
            for keys, args in duplicates.forget_calls(*decision.content):
                backend.decide("content_forget", keys, args)
        except BackendError as exc:  # the quota is back; the post is forgotten when its period ends
            logger.warning("throttling: could not forget the content of a refunded %r: %s", decision.action, exc)
        decision.content = ()
    # Every other process forgets them as the refund's message arrives.
    local_refusals.forget(decision.log_key)
    return True


def reset(who, action=None, *, target=None):
    """Forget the state and offences of `who` for one action, or for every action with a policy:
    on every target of it, or on `target` only.

    `who` None resets the site-wide count of site-wide policies and every target's count (found with
    SCAN on every master: a moderator's act, not a decision), or `target`'s alone when given.
    """
    identity = None if who is None else identify(who)[0]
    actions = [action] if action else policies.actions()
    forget(identity, actions, target)
    local_refusals.end_everywhere()
