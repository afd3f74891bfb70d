"""The decision API for async code: the same decisions, awaited, never blocking the event loop."""

import logging
from time import perf_counter

from asgiref.sync import sync_to_async

from .. import observe
from ..backends.aio import get_async_backend
from ..conf import settings
from ..exceptions import BackendError
from . import approvals, duplicates, trust
from .decide import (
    bucket_refund,
    check_cost,
    interpret,
    log_refund_target,
    not_decided,
    penalised_by,
    penalty_probe,
    plan,
    policy_checked,
    refusal_key,
    remember_refusal,
    sent,
    slotted,
)
from .decision import DISABLED, THROTTLED, Decision
from .identity import client_ip, identify, member_identity
from .keys import TOKEN_BUCKET, changes_channel
from .local import local_refusals
from .offences import record_offence
from .policies import policies
from .reset import aforget

logger = logging.getLogger("throttling")


async def acheck(who, action, *, cost=1, target=None, key=None, content=None):
    """check() for async code: the same decision, awaited, never blocking the event loop.

    `who` may be a request of an async view: its user is read with
    `request.auser()`. Policies come from the process's cache; when the cache
    is due for a look at Redis or the database, that look runs in a thread.
    """
    started = perf_counter()
    decision = await _adecide(who, action, cost, True, target, key, content)
    observe.decided(decision, perf_counter() - started)
    return decision


async def apeek(who, action, *, cost=1, target=None, key=None, content=None):
    """peek() for async code."""
    started = perf_counter()
    decision = await _adecide(who, action, cost, False, target, key, content)
    observe.decided(decision, perf_counter() - started)
    return decision


async def areset(who, action=None, *, target=None):
    """reset() for async code."""
    identity = None if who is None else (await _aidentify(who))[0]
    if action:
        actions = [action]
    else:
        await _apolicy(None)
        actions = policies.actions()
    await aforget(identity, actions, target)
    await sync_to_async(local_refusals.end_everywhere, thread_sensitive=False)()


async def arefund(decision):
    """refund() for async code."""
    if not decision.entries:
        return False
    try:
        backend = get_async_backend()
        if decision.entries[0] == TOKEN_BUCKET:
            await backend.decide(TOKEN_BUCKET, *bucket_refund(decision))
        else:
            await backend.refund_log(
                decision.log_key, decision.entries, changes_channel(), *log_refund_target(decision)
            )
    except BackendError as exc:
        logger.warning("throttling: could not refund %r: %s", decision.action, exc)
        return False
    decision.entries = ()
    if decision.content:
        try:
            for keys, args in duplicates.forget_calls(*decision.content):
                await backend.decide("content_forget", keys, args)
        except BackendError as exc:  # the quota is back; the post is forgotten when its period ends
            logger.warning("throttling: could not forget the content of a refunded %r: %s", decision.action, exc)
        decision.content = ()
    # Every other process forgets them as the refund's message arrives.
    local_refusals.forget(decision.log_key)
    return True


async def _akeyed(who, key):
    """decide.keyed() without touching the database from the event loop."""
    identity, user = await _aidentify(who)
    if key is None:
        return identity, user, None
    return *identify(str(key)), (identity if user is not None else None)


async def _aidentify(who):
    """identify() without touching the database from the event loop."""
    auser = getattr(who, "auser", None)
    if auser is not None and hasattr(who, "META"):
        user = await auser()
        if user is not None and user.is_authenticated:
            return member_identity(user.pk), user
        return "ip:" + client_ip(who), None
    return identify(who)


async def _apolicy(action):
    """The action's PolicySpec or None, with any I/O in a thread."""
    hit, policy = policies.cached(action)
    if hit:
        return policy
    return await sync_to_async(policies.get, thread_sensitive=True)(action)


async def _adecide(who, action, cost, record, target=None, key=None, content=None):
    generation = local_refusals.generation  # before the policy and Redis are read
    check_cost(cost)
    if not settings.ENABLED:
        return Decision(True, action, reason=DISABLED)
    policy = policy_checked(action, await _apolicy(action))
    if type(policy) is Decision:
        return policy
    identity, user, member = await _akeyed(who, key)
    if local_refusals.entries:
        refused = local_refusals.answer(refusal_key(identity, action, target, member, cost), user, policy, record)
        if refused is not None:
            if record and refused.reason == THROTTLED:
                if refused.offences == 1:  # the action_throttled signal's receivers are synchronous code
                    await sync_to_async(record_offence, thread_sensitive=True)(refused, user, 0, 0, "")
                else:
                    record_offence(refused, user, 0, 0, "")  # an in-process count only
            return refused
    if trust.needs_groups(policy, user):
        await sync_to_async(trust.groups.get, thread_sensitive=True)(user)
    if approvals.needs_count(policy, user):
        await sync_to_async(approvals.approvals.count, thread_sensitive=True)(user, action)
    planned = plan(policy, identity, user, cost, record, target, member, who)
    if type(planned) is Decision:
        return planned
    said = None if content is None else duplicates.fingerprint_for(planned[4], content)
    try:
        backend = get_async_backend()
        if slotted(backend, member):
            planned = plan(policy, identity, user, cost, record, target, standing=planned[4])
            probe = penalty_probe(policy, member)
            if probe:
                refused = penalised_by(probe, await backend.decide_packed(*sent(probe)))
                if refused is not None:
                    remember_refusal(refusal_key(identity, action, target, member, cost), probe, refused, generation)
                    return refused
        if said is None:
            decision, crossing = interpret(planned, await backend.decide_packed(*sent(planned)))
        else:
            decision, crossing = await duplicates.adecide(backend, planned, said)
    except BackendError as exc:
        return not_decided(planned, exc)
    if record and decision.offences and decision.penalty is None:
        # Signals and the escalation's send to Celery are synchronous code.
        await sync_to_async(record_offence, thread_sensitive=True)(decision, user, planned[2], crossing, planned[1])
    if not decision.allowed:
        remember_refusal(refusal_key(identity, action, target, member, cost), planned, decision, generation)
    return decision
