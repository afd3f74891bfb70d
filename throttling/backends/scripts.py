"""The Lua scripts, package data loaded once and called by SHA1."""

import hashlib
from importlib.resources import files

from .resp import bulk

_LUA = files("throttling.backends") / "lua"


def _script_source(name):
    """A script's text, with the shared decision prelude spliced in where it says "-- @prelude"."""
    text = (_LUA / f"{name}.lua").read_text(encoding="utf-8")
    if "-- @prelude" in text:
        text = text.replace("-- @prelude", (_LUA / "_prelude.lua").read_text(encoding="utf-8"), 1)
    return text


# One decision script per algorithm (the values of ActionPolicy.algorithm).
DECISION_SCRIPTS = ("sliding_log", "token_bucket")

# Scripts other than decisions: the penalties, the undo of timed-out decisions, offences of local refusals,
# the change markers.
OTHER_SCRIPTS = ("mirror_penalties", "close_run", "forget", "add_offences", "bump_marker")


class Script:
    """A Lua script known by its SHA1; loaded on a node when the node says NOSCRIPT."""

    __slots__ = ("name", "source", "sha", "packed_sha")

    def __init__(self, name):
        self.name = name
        self.source = _script_source(name)
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()
        self.packed_sha = bulk(self.sha)
