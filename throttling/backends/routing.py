"""Routing on a Redis Cluster or behind Sentinel: what a reply error proves, and where to send next."""

from redis.crc import key_slot
from redis.exceptions import ResponseError

from .errors import error_word
from .resp import pack

ASKING = pack("ASKING")
# Replies saying the node is not (or no longer) a master that can take the write:
# the command did not run, so the master is looked up again and it is sent there.
_NOT_MASTER = frozenset({"READONLY", "NOREPLICAS", "MASTERDOWN", "LOADING"})


def follow(exc, followed, topo):
    """What a reply error proves, for a routed call: ("moved", address), ("ask", address) or
    ("elsewhere", None). Each kind is followed once (`followed` remembers); anything else, or a
    kind met twice, raises `exc`. Shared by the synchronous and the asynchronous backend."""
    word, rest = error_word(exc)
    if word in followed:
        raise exc
    followed.add(word)
    if word == "MOVED":
        moved_slot, target = rest.split()
        address = address_of(target)
        topo.moved(int(moved_slot), address)
        return "moved", address
    if word == "ASK":
        # The slot is being migrated and this key is already there: once, on the target, behind ASKING.
        return "ask", address_of(rest.split()[1])
    if word in _NOT_MASTER:
        return "elsewhere", None
    raise exc


def asked(replies):
    """The reply of a command sent behind ASKING (the replies of both)."""
    reply = replies[-1]
    if isinstance(reply, ResponseError):
        raise reply
    return reply


def address_of(text):
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def slot_of(key):
    return key_slot(key.encode() if isinstance(key, str) else key)
