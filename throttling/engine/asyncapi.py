"""The decision API for async code: the same flows as api.py (flow.py), awaited, never blocking the event loop."""

from time import perf_counter

from asgiref.sync import sync_to_async

from ..common import observe
from . import flow
from .effects import arun
from .policies.cache import policies
from .refusal_memory import local_refusals
from .reset import forget


async def acheck(who, action, *, cost=1, target=None, key=None, content=None):
    """check() for async code: the same decision, awaited, never blocking the event loop.

    `who` may be a request of an async view: its user is read with
    `request.auser()`. Policies come from the process's cache; when the cache
    is due for a look at Redis or the database, that look runs in a thread.
    """
    started = perf_counter()
    decision = await arun(flow.decide(who, action, cost, True, target, key, content))
    observe.decided(decision, perf_counter() - started)
    return decision


async def apeek(who, action, *, cost=1, target=None, key=None, content=None):
    """peek() for async code."""
    started = perf_counter()
    decision = await arun(flow.decide(who, action, cost, False, target, key, content))
    observe.decided(decision, perf_counter() - started)
    return decision


async def areset(who, action=None, *, target=None):
    """reset() for async code."""
    identity = None if who is None else await arun(flow.identity_of(who))
    if action:
        actions = [action]
    else:
        hit, _ = policies.cached(None)
        if not hit:  # the cache is due for a reload: in a thread
            await sync_to_async(policies.get, thread_sensitive=True)(None)
        actions = policies.actions()
    await arun(forget(identity, actions, target))
    await sync_to_async(local_refusals.end_everywhere, thread_sensitive=False)()


async def arefund(decision):
    """refund() for async code."""
    return await arun(flow.refund(decision))
