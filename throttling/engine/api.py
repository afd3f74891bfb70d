"""The decision API: check / peek / acquire / reset / refund, one Redis script call each, each a flow
(flow.py) driven in this thread."""

import time
from time import perf_counter

from ..common import observe
from . import flow
from .decision import TOO_COSTLY
from .effects import run
from .policies.cache import policies
from .refusal_memory import local_refusals
from .reset import forget

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
    decision = run(flow.decide(who, action, cost, True, target, key, content))
    observe.decided(decision, perf_counter() - started)
    return decision


def peek(who, action, *, cost=1, target=None, key=None, content=None):
    """Decide as check() would, recording nothing."""
    started = perf_counter()
    decision = run(flow.decide(who, action, cost, False, target, key, content))
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
        action = actions.get(method)  # as written most often: the request's own upper case
        if action is not None:
            return action
        for named, action in actions.items():
            if isinstance(named, str) and named.upper() == method:
                return action
        return None
    action = getattr(view, "throttle_action", None)
    if action:
        methods = getattr(view, "throttle_methods", DEFAULT_METHODS)
        # Every request asks: the default and upper-case names are answered without building a set.
        if method in methods or (methods is not DEFAULT_METHODS and method in http_methods(methods)):
            return action
    return None


def refund(decision):
    """Give back what an admitted decision took (the view failed; see Architecture › Counting what did not happen): its log entries or its tokens, and its post's content.

    A decision is refunded at most once.
    """
    return run(flow.refund(decision))


def reset(who, action=None, *, target=None):
    """Forget the state and offences of `who` for one action, or for every action with a policy:
    on every target of it, or on `target` only.

    `who` None resets the site-wide count of site-wide policies and every target's count (found with
    SCAN on every master: a moderator's act, not a decision), or `target`'s alone when given.
    """
    identity = None if who is None else run(flow.identity_of(who))
    actions = [action] if action else policies.actions()
    run(forget(identity, actions, target))
    local_refusals.end_everywhere()
