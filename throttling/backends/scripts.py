"""The Lua scripts, package data loaded once and called by SHA1."""

import hashlib
from importlib.resources import files

from .resp import bulk

_LUA = files("throttling.backends") / "lua"

# The content variant of each decision script: the same decision, with the post's content judged in
# the same call (backends/lua/_content.lua, spliced after the prelude; see Guide › Repeated content).
CONTENT_VARIANTS = {"sliding_log_content": "sliding_log", "token_bucket_content": "token_bucket"}


def _lua(name):
    return (_LUA / f"{name}.lua").read_text(encoding="utf-8")


def _script_source(name):
    """A script's text, with the shared parts spliced in where it says "-- @prelude" (the decision
    prelude; in a content variant with the content's layout in it, then the content indexes'
    functions, and the content's judgement and record where the script has their places) and
    "-- @index" (the content indexes' functions)."""
    base = CONTENT_VARIANTS.get(name)
    text = _lua(base or name)
    if "-- @prelude" in text:
        prelude = _lua("_prelude")
        if base:
            parts = _content_parts()
            prelude = prelude.replace("-- @content-layout", parts["layout"], 1) + "\n-- @index\n"
            text = text.replace("-- @content-judge", parts["judge"], 1)
            text = text.replace("-- @content-record", parts["record"], 1)
        text = text.replace("-- @prelude", prelude, 1)
    if "-- @index" in text:
        text = text.replace("-- @index", _lua("_index"), 1)
    return text


def _content_parts():
    """_content.lua cut at its "-- @@ <part>" lines: {"layout": its header and layout, "judge": ..., "record": ...}."""
    header, *sections = _lua("_content").split("\n-- @@ ")
    parts = dict(section.split("\n", 1) for section in sections)
    parts["layout"] = header + "\n" + parts["layout"]
    return parts


# One decision script per algorithm (the values of ActionPolicy.algorithm), and their content variants.
DECISION_SCRIPTS = ("sliding_log", "token_bucket", *CONTENT_VARIANTS)

# Scripts other than decisions: the penalties, the undo of timed-out decisions, offences of local refusals,
# the change markers, resets, refunds of the sliding log, the counts of surge triggers, and the wave half and
# the undo of decisions with content, a reset's mark in a wave index, and the offence of a rejected held post.
OTHER_SCRIPTS = (
    "mirror_penalties",
    "close_run",
    "forget",
    "add_offences",
    "bump_marker",
    "targets",
    "reset",
    "refund",
    "count_window",
    "content_wave",
    "content_forget",
    "content_reset",
    "offend",
)


class Script:
    """A Lua script known by its SHA1; loaded on a node when the node says NOSCRIPT."""

    __slots__ = ("name", "source", "sha", "packed_sha")

    def __init__(self, name):
        self.name = name
        self.source = _script_source(name)
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()
        self.packed_sha = bulk(self.sha)
