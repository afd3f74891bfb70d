"""What a flow waits for, as named effects, and the two drivers that wait for them: `run()` calls, in
this thread; `arun()` awaits, never blocking the event loop. The decision flow (flow.py) and a reset
(reset.py) are written once, as generators of these effects; the drivers are the only place where sync
and async code differ (see Architecture › One flow, two drivers)."""

from collections.abc import Callable
from typing import Any, NamedTuple

from asgiref.sync import sync_to_async

from ..backends.aio import get_async_backend
from ..backends.redis import get_backend
from ..exceptions import BackendError


class Call(NamedTuple):
    """One command to the throttle's Redis: a method of the backend (the sync and the async backend have
    the same ones) and its arguments."""

    method: str
    args: tuple


class Blocking(NamedTuple):
    """Work that may read the database or run signal receivers: called in place by run(), in a thread by
    arun()."""

    function: Callable
    args: tuple


class UserOf(NamedTuple):
    """The user of a request: `request.user` for run(), `await request.auser()` for arun()."""

    request: Any


class Topology(NamedTuple):
    """The kind of the throttle's Redis ("server", "sentinel" or "cluster"), asked only where it matters."""


TOPOLOGY = Topology()


def run(flow):
    """Drive `flow` in this thread; its return value. A BackendError is raised inside the flow, where the
    effect was yielded."""
    reply = error = None
    while True:
        try:
            effect = flow.send(reply) if error is None else flow.throw(error)
        except StopIteration as done:
            return done.value
        error = None
        kind = type(effect)
        try:
            if kind is Call:
                reply = getattr(get_backend(), effect.method)(*effect.args)
            elif kind is UserOf:
                reply = getattr(effect.request, "user", None)
            elif kind is Blocking:
                reply = effect.function(*effect.args)
            else:
                reply = get_backend().topology.kind
        except BackendError as exc:
            reply, error = None, exc


async def arun(flow):
    """run() for async code: the same flow, each wait awaited."""
    reply = error = None
    while True:
        try:
            effect = flow.send(reply) if error is None else flow.throw(error)
        except StopIteration as done:
            return done.value
        error = None
        kind = type(effect)
        try:
            if kind is Call:
                reply = await getattr(get_async_backend(), effect.method)(*effect.args)
            elif kind is UserOf:
                # The session, and so the database, without blocking the loop (Django's auser()).
                auser = getattr(effect.request, "auser", None)
                reply = await auser() if auser is not None else getattr(effect.request, "user", None)
            elif kind is Blocking:
                reply = await sync_to_async(effect.function, thread_sensitive=True)(*effect.args)
            else:
                reply = get_async_backend().topology.kind
        except BackendError as exc:
            reply, error = None, exc
