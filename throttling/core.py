"""The decision: check / peek / acquire / reset / refund, one Redis script call each."""

import logging
import threading
import time
from functools import lru_cache

from asgiref.sync import sync_to_async
from django.utils import timezone

from . import history, signals, trust
from .backends.aio import get_async_backend
from .backends.redis import get_backend
from .conf import settings
from .decision import (  # noqa: F401 (the reasons are part of this module's API)
    ADMITTED,
    BACKEND_FAILURE,
    DISABLED,
    EXEMPT,
    PENALISED,
    SHADOW,
    THROTTLED,
    UNKNOWN_ACTION,
    Decision,
)
from .exceptions import BackendError, BackendTimeout
from .identity import _escape, client_ip, identify, member_identity
from .keys import (  # noqa: F401 (re-exported: long-standing import paths)
    SLIDING_LOG,
    TOKEN_BUCKET,
    PenaltyInfo,
    bulk,
    log_keys,
    member_penalty_key,
    packed_state_keys,
    penalty_key,
    state_keys,
    tokens,
)
from .messages import local_time, penalty_message, refusal_message, wait_in_words  # noqa: F401
from .policies import (  # noqa: F401
    SITE,
    PolicySpec,
    invalidate_policies,
    load_policies,
    policies,
    version_key,
)

logger = logging.getLogger("throttling")

# Safe methods only read; they are not behaviour a community limits.
DEFAULT_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

class _InDoubt:
    """Decisions that timed out after being sent: once Redis answers again, and a moment later
    (a stalled server reads what was waiting first), what they may have written is undone."""

    SETTLE_AFTER = 1.0  # seconds
    MAX = 1000

    def __init__(self):
        self.entries = []
        self._lock = threading.Lock()

    def add(self, algorithm, keys, token, cost):
        with self._lock:
            if len(self.entries) < self.MAX:
                self.entries.append((time.monotonic(), algorithm, keys[0], keys[3], token, cost))

    def settle(self):
        due = time.monotonic() - self.SETTLE_AFTER
        with self._lock:
            ready = [e for e in self.entries if e[0] <= due]
            self.entries = [e for e in self.entries if e[0] > due]
        backend = get_backend()
        for index, (_, algorithm, state_key, pending_key, token, cost) in enumerate(ready):
            kind = "bucket" if algorithm == TOKEN_BUCKET else "log"
            try:
                backend.forget(state_key, pending_key, kind, token, cost)
            except BackendError:
                with self._lock:  # Redis went away again: try the rest later
                    self.entries[:0] = ready[index:]
                return


_in_doubt = _InDoubt()
_warned_unknown = set()
_last_failure_log = [0.0]
# The escalation argument of a refund, which never counts an offence.
_NO_OFFENCE = b"1 0 1"


def check(who, action, *, cost=1, target=None):
    """Decide and, when admitted, record `cost`. One EVALSHA.

    `target` (a thread, a post, a recipient: anything with a str()) counts per
    (identity, target) instead of per identity: replies per thread.
    """
    return _decide(who, action, cost, True, target)


def peek(who, action, *, cost=1, target=None):
    """Decide as check() would, recording nothing."""
    return _decide(who, action, cost, False, target)


def is_action_allowed(who, action):
    """The classic interface: True when admitted (and recorded, like check)."""
    return check(who, action).allowed


def acquire(who, action, *, timeout, cost=1, target=None):
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
        decision = check(who, action, cost=cost, target=target)
        if decision.allowed:
            return decision
        left = deadline - time.monotonic()
        wait = max(decision.retry_after, 0.001)
        if wait > left:
            return decision
        time.sleep(wait)


def _decide(who, action, cost, record, target=None):
    policy = _policy_or_decision(action, cost)
    if type(policy) is Decision:
        return policy
    identity, user = identify(who)
    plan = _plan(policy, identity, user, cost, record, target)
    if type(plan) is Decision:
        return plan
    try:
        error = policies.backend_error
        if error is not None:
            raise error
        reply = get_backend().decide_packed(plan[4].algorithm, 4, plan[3], plan[4].script_argc, plan[0][0])
    except BackendError as exc:
        return _not_decided(plan, exc)
    if _in_doubt.entries:
        _in_doubt.settle()
    decision, crossing = _interpret(plan, reply)
    if record and decision.offences and decision.penalty is None:
        _offence(decision, user, plan[2], crossing, plan[1])
    return decision


def _check_cost(cost):
    # bool is an int in Python; True as a cost is a mistake, not 1.
    if type(cost) is not int or cost < 1:
        raise ValueError(f"cost must be a whole number of at least 1, not {cost!r}")


def _policy_or_decision(action, cost):
    """The action's PolicySpec, or the Decision when none is needed (off, unknown, disabled)."""
    _check_cost(cost)
    if not settings.ENABLED:
        return Decision(True, action, reason=DISABLED)
    policy = policies.get(action)
    return _policy_checked(action, policy)


def _policy_checked(action, policy):
    if policy is None:
        return _unknown(action)
    if not policy.enabled:
        return Decision(True, action, reason=DISABLED, verb=policy.verb)
    return policy


def _target_part(target):
    if target is None:
        return None
    text = str(target)
    if not text:
        raise ValueError("A target must not be empty; pass None to count per identity only.")
    return _escape(text)


def _plan(policy, identity, user, cost, record, target=None):
    """What a decision sends: (keys, token, offence window, RESP body, policy, identity, user, cost, record, target).

    `policy` comes back scaled by the member's trust tier or override.
    """
    action = policy.action
    if user is not None and policy.exempt_staff and (user.is_staff or user.is_superuser):
        return Decision(True, action, reason=EXEMPT, identity=identity, verb=policy.verb)
    if user is not None:
        multiplier = trust.standing(policy, user, policies.overrides)
        if multiplier == trust.EXEMPT:
            return Decision(True, action, reason=EXEMPT, identity=identity, verb=policy.verb)
        policy = policy.scaled(multiplier)
    if cost > policy.smallest_max:
        raise ValueError(
            f"cost {cost} can never be admitted by {action!r}: a window allows {policy.smallest_max}"
        )
    part = _target_part(target)
    counted, threshold = identity, 0  # only members are penalised; anonymous identities are only throttled
    if policy.scope == SITE:
        # One count for everyone (per target when given, so busy targets spread over a cluster).
        counted, part = ("site" if part is None else f"site@{part}"), None
    elif user is not None and settings.PENALTIES and policy.mode != SHADOW:
        threshold = settings.OFFENCE_THRESHOLD if policy.offence_threshold is None else policy.offence_threshold
    keys, packed_keys = packed_state_keys(counted, action, policy.algorithm, part)
    token = tokens.next()
    window = policy.offence_window or settings.OFFENCE_WINDOW
    # KEYS and ARGV as RESP: mode and cost, token, action, and what the script
    # reads only when it refuses (offence window, threshold, pending TTL).
    body = b"%s%s$%d\r\n%s\r\n%s%s%s" % (
        packed_keys,
        _mode(record, cost),
        len(token),
        token.encode(),
        policy.packed_action,
        _escalation(window, threshold, settings.ESCALATION_TIMEOUT),
        policy.packed_windows,
    )
    return keys, token, window, body, policy, identity, user, cost, record, target


def _not_decided(plan, exc):
    keys, token, _, _, policy, identity, _, cost, _, _ = plan
    if isinstance(exc, BackendTimeout):
        # Sent, but no answer: Redis may still run it (trap 8, issue 11).
        _in_doubt.add(policy.algorithm, keys, token, cost)
    return _backend_failure(policy, identity, exc)


def _interpret(plan, reply):
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
        else:
            entries = (token, *(f"{token}.{j}" for j in range(2, cost + 1)))
    reason = ADMITTED
    if not allowed:
        reason = THROTTLED
        if policy.mode == SHADOW:
            # Would have been refused: counted as an offence, shown in the report, never refused.
            allowed, reason, retry_us = 1, SHADOW, 0
    decision = Decision(
        allowed=bool(allowed),
        action=policy.action,
        limit=limit,
        remaining=remaining,
        retry_after=retry_us / 1e6,
        reset_after=reset_us / 1e6,
        reason=reason,
        identity=identity,
        offences=offences if reason != ADMITTED else 0,
        verb=policy.verb,
        escalated=bool(crossing),
        entries=entries,
        windows=policy.windows,
        keys=keys,
        target=None if target is None else str(target),
    )
    return decision, crossing


async def acheck(who, action, *, cost=1, target=None):
    """check() for async code: the same decision, awaited, never blocking the event loop.

    `who` may be a request of an async view: its user is read with
    `request.auser()`. Policies come from the process's cache; when the cache
    is due for a look at Redis or the database, that look runs in a thread.
    """
    return await _adecide(who, action, cost, True, target)


async def apeek(who, action, *, cost=1, target=None):
    """peek() for async code."""
    return await _adecide(who, action, cost, False, target)


async def areset(who, action=None, *, target=None):
    """reset() for async code."""
    identity, _ = await _aidentify(who)
    if action:
        actions = [action]
    else:
        await _apolicy(None)
        actions = policies.actions()
    await get_async_backend().delete(*_reset_keys(identity, actions, target))


async def arefund(decision):
    """refund() for async code."""
    if not decision.entries:
        return False
    try:
        if decision.entries[0] == TOKEN_BUCKET:
            await get_async_backend().decide(TOKEN_BUCKET, *_bucket_refund(decision))
        else:
            await get_async_backend().remove_members(decision.log_key, decision.entries)
    except BackendError as exc:
        logger.warning("throttling: could not refund %r: %s", decision.action, exc)
        return False
    decision.entries = ()
    return True


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
    """(the action's PolicySpec or None, the Redis error met looking), with any I/O in a thread."""
    hit, policy = policies.cached(action)
    if hit:
        return policy, None
    return await sync_to_async(policies.get_with_error, thread_sensitive=True)(action)


async def _adecide(who, action, cost, record, target=None):
    _check_cost(cost)
    if not settings.ENABLED:
        return Decision(True, action, reason=DISABLED)
    policy, error = await _apolicy(action)
    policy = _policy_checked(action, policy)
    if type(policy) is Decision:
        return policy
    identity, user = await _aidentify(who)
    if trust.needs_groups(policy, user):
        await sync_to_async(trust.groups.get, thread_sensitive=True)(user)
    plan = _plan(policy, identity, user, cost, record, target)
    if type(plan) is Decision:
        return plan
    try:
        if error is not None:
            raise error
        reply = await get_async_backend().decide_packed(
            plan[4].algorithm, 4, plan[3], plan[4].script_argc, plan[0][0]
        )
    except BackendError as exc:
        return _not_decided(plan, exc)
    if _in_doubt.entries:
        await sync_to_async(_in_doubt.settle, thread_sensitive=False)()
    decision, crossing = _interpret(plan, reply)
    if record and decision.offences and decision.penalty is None:
        # Signals and the escalation's send to Celery are synchronous code.
        await sync_to_async(_offence, thread_sensitive=True)(decision, user, plan[2], crossing, plan[1])
    return decision


@lru_cache(maxsize=64)
def _mode(record, cost):
    return bulk(b"c%d" % cost if record else b"p%d" % cost)


@lru_cache(maxsize=64)
def _escalation(window, threshold, pending):
    return bulk(b"%d %d %d" % (window, threshold, pending))


def _offence(decision, user, window, crossing, run):
    """Bookkeeping of a refused attempt, all in process or deferred: no extra round trip."""
    from . import penalties  # the penalties build on the decision, not the other way round

    history.buffer.add(
        decision.identity, user.pk if user is not None else None, decision.action, shadow=decision.reason == SHADOW
    )
    if decision.offences == 1:
        # The first refusal of an offence window: throttled after being admitted.
        signals.action_throttled.send(
            sender=Decision, action=decision.action, identity=decision.identity, user=user, decision=decision
        )
    if crossing:
        penalties.enqueue_escalation(user.pk, decision.action, run, decision.offences, window)


def _penalised(policy, identity, raw, retry_us, offences):
    try:
        info = PenaltyInfo.decode(raw)
    except (ValueError, TypeError) as exc:
        # A mirror we cannot read still refuses: the script has judged it in force.
        logger.warning("throttling: unreadable penalty mirror for %s: %s", identity, exc)
        info = PenaltyInfo(0, 0, policy.action, timezone.now(), "")
    shadow = policy.mode == SHADOW  # a shadow policy refuses nobody, a penalised member included
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


def view_action(view, method):
    """The action a view class declares for an HTTP method (throttle_action(s)), or None."""
    actions = getattr(view, "throttle_actions", None)
    if actions:
        return actions.get(method)
    action = getattr(view, "throttle_action", None)
    if action and method in getattr(view, "throttle_methods", DEFAULT_METHODS):
        return action
    return None


_WARNED_UNKNOWN_MAX = 256


def _unknown(action):
    if action not in _warned_unknown:
        if len(_warned_unknown) >= _WARNED_UNKNOWN_MAX:
            # Action names may come from user input: the memory of warnings is
            # bounded (at worst a name is warned about again).
            _warned_unknown.clear()
        _warned_unknown.add(action)
        logger.warning(
            "throttling: no policy for action %r; %s (add one in the admin, "
            "or set THROTTLING_UNKNOWN_ACTION)",
            action,
            "refusing it" if settings.UNKNOWN_ACTION == "deny" else "allowing it",
        )
    if settings.UNKNOWN_ACTION == "deny":
        return Decision(False, action, retry_after=float(settings.FAIL_CLOSED_RETRY_AFTER), reason=UNKNOWN_ACTION)
    return Decision(True, action, reason=UNKNOWN_ACTION)


def _backend_failure(policy, identity, exc):
    fail_open = settings.FAIL_OPEN if policy.fail_open is None else policy.fail_open
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


def refund(decision):
    """Give back what an admitted decision took (the view failed; trap 9): its log entries or its tokens.

    A decision is refunded at most once.
    """
    if not decision.entries:
        return False
    try:
        if decision.entries[0] == TOKEN_BUCKET:
            get_backend().decide(TOKEN_BUCKET, *_bucket_refund(decision))
        else:
            get_backend().remove_members(decision.log_key, decision.entries)
    except BackendError as exc:
        logger.warning("throttling: could not refund %r: %s", decision.action, exc)
        return False
    decision.entries = ()
    return True


def _bucket_refund(decision):
    """(KEYS, ARGV) giving a bucket decision's tokens back, under the windows it was decided with."""
    args = tuple(str(n).encode() for w in decision.windows for n in w)
    return list(decision.keys), (b"r%d" % decision.entries[1], b"", decision.action, _NO_OFFENCE, *args)


def reset(who, action=None, *, target=None):
    """Forget the state and offences of `who` for one action, or for every action with a policy."""
    identity, _ = identify(who)
    actions = [action] if action else policies.actions()
    get_backend().delete(*_reset_keys(identity, actions, target))


def _reset_keys(identity, actions, target=None):
    # Not the penalties hash: lifting a penalty is throttling.penalties.lift().
    part = _target_part(target)
    keys = [
        key
        for a in actions
        for algorithm in (SLIDING_LOG, TOKEN_BUCKET)
        for i, key in enumerate(state_keys(identity, a, algorithm, part))
        if i != 2
    ]
    return list(dict.fromkeys(keys))
