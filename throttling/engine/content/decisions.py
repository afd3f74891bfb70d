"""Decisions with content: the post's keys judged in the decision's own script call, the wave's half first on a
cluster, what a refusal for repeated content means, and forgetting a post (see Guide › Repeated content)."""

import struct
from dataclasses import dataclass
from typing import NamedTuple

from django.core.signals import setting_changed
from django.dispatch import receiver

from ...backends.resp import bulk
from ...backends.routing import slot_of
from ...conf import settings
from ...exceptions import BackendError, BackendTimeout
from ..background.undo_timeouts import in_doubt
from ..deciding.replies import interpret
from ..decision import DUPLICATE, REPEATED, SHADOW, WAVE, Decision
from ..effects import TOPOLOGY, Call
from ..keys import seen_keys, wave_keys
from ..policies.cache import SHADOW as SHADOW_MODE
from ..policies.cache import SITE
from . import fingerprints as content

# The content variant of each algorithm's decision script (backends/lua/_content.lua).
CONTENT_SCRIPTS = {"sliding_log": "sliding_log_content", "token_bucket": "token_bucket_content"}

# Fingerprints of texts seen lately, by the text's hash (never the text): a wave brings the same text
# to a process again and again. The hash is Python's own: computed once per string, salted per process,
# 64 bits among at most a few thousand texts. Bounded like every per-process cache (see
# Architecture › Bounded memory), and forgotten when a THROTTLING_ setting changes.
_fingerprints = {}
_FINGERPRINTS_MAX = 4096
_NOTHING = object()  # a text with nothing left once normalised
_wave_words = []  # THROTTLING_CONTENT_WAVE_WORDS, read once until a setting changes


def fingerprint_for(policy, text):
    """What a decision under `policy` compares of `text`, or None when no content limit applies to it."""
    if not policy.same_content_period or policy.scope == SITE:
        return None
    if not isinstance(text, str):
        raise TypeError(f"content must be the text of the post (a str), not {type(text).__name__}")
    seen = hash(text)
    found = _fingerprints.get(seen)
    if found is None:
        found = content.fingerprint(text) or _NOTHING
        if len(_fingerprints) >= _FINGERPRINTS_MAX:
            _fingerprints.clear()
        _fingerprints[seen] = found
    if found is _NOTHING:
        return None  # nothing to compare
    if not policy.same_content_max and not _makes_wave(found):
        return None  # a post that makes no wave, where only a member's repeat counts
    return found


def _makes_wave(found):
    """Whether a post counts towards a wave: it has a payload (a link, an address, a mention), or it
    is long enough to be distinctive (see Guide › Repeated content › What counts as the same)."""
    if not _wave_words:
        _wave_words.append(settings.CONTENT_WAVE_WORDS)
    return found.makes_wave(_wave_words[0])


@dataclass(frozen=True, slots=True)
class Layout:
    """Where one member's content goes under one policy, known before any post."""

    mine: tuple  # the member's own content index
    waves: tuple  # the action's wave index, which also holds members' own posts; () without a wave limit
    split: bool  # the wave lives in another slot than the member's keys (a cluster): two calls
    packed_mine: bytes  # the member's index as the content variant's KEYS, in RESP
    packed_waves: bytes  # the wave's
    specs: tuple  # the start of the script's last argument (see _content.lua), by what the wave is (NO_WAVE ...)
    written: tuple  # the indexes a decision writes (see _written), without and with a wave


class Posted(NamedTuple):
    """What an admitted decision with content wrote, kept on the Decision so a refund forgets it."""

    written: tuple  # the indexes it wrote to (see _written)
    token: str
    fingerprint: object


# What the content variant is told of the wave (_content.lua): none (a post that makes no wave, or no limit), judged
# in the same call from the index, admitted or refused by the wave's half elsewhere (a cluster).
NO_WAVE, WAVE_HERE, WAVE_ADMITTED, WAVE_REFUSED = range(4)
# Added to the wave's byte when a match is held for review, not refused (see Guide › Held for review).
HOLD_ANSWER = 16
_SPEC = struct.Struct("<BHHIdB")


_layouts = {}
_starts = {}  # a decision's KEYS -> their length in RESP
_LAYOUTS_MAX = 8192


def _layout(policy, identity):
    """The Layout of `identity` under `policy` (a flow: the topology is asked when it is first made)."""
    key = (policy.serial, identity)
    layout = _layouts.get(key)
    if layout is None:
        mine = seen_keys(identity, policy.action)
        waves = wave_keys(policy.action) if policy.same_content_members else ()
        split = bool(waves) and (yield TOPOLOGY) == "cluster" and slot_of(mine[0]) != slot_of(waves[0])
        layout = Layout(
            mine,
            waves,
            split,
            b"".join(map(bulk, mine)),
            b"".join(map(bulk, waves)),
            tuple(_spec(policy, identity, wave) for wave in (NO_WAVE, WAVE_HERE, WAVE_ADMITTED)),
            tuple(_written(mine, waves, split, wave, policy.same_content_max) for wave in (False, True)),
        )
        if len(_layouts) >= _LAYOUTS_MAX:
            _layouts.clear()
        _layouts[key] = layout
    return layout


def _spec(policy, identity, wave, wait=0):
    """The start of a content variant's last argument: what is judged, and who posts (its keys follow)."""
    who = identity.encode()
    max_, members = policy.same_content_max or 0, policy.same_content_members or 0
    if policy.content_holds:
        wave += HOLD_ANSWER
    return _SPEC.pack(wave, max_, members, policy.same_content_period, wait, len(who)) + who


@receiver(setting_changed)
def _forget(setting, **kwargs):
    if setting.startswith("THROTTLING_") or setting == "CACHES":
        _layouts.clear()
        _starts.clear()
        _fingerprints.clear()
        _wave_words.clear()


def _sent(planned, fingerprint, layout, wave, spec=None):
    """decide_packed()'s arguments: the planned decision with the content index's two KEYS after its
    own (the targets index among them, per target) and the content's ARGV after its windows (and the
    target). `wave` (NO_WAVE ...): WAVE_HERE judges it in the wave's index, which also holds the
    member's own posts; the others use the member's own index. `spec`: the spec of a refusal elsewhere."""
    keys, body, policy = planned.keys, planned.body, planned.policy
    start = _starts.get(keys)
    if start is None:
        if len(_starts) >= _LAYOUTS_MAX:
            _starts.clear()
        start = _starts[keys] = sum(map(len, map(bulk, keys)))  # where the body's ARGV begin
    body = b"%s%s%s%s" % (
        body[:start],
        layout.packed_waves if wave == WAVE_HERE else layout.packed_mine,
        body[start:],
        bulk((spec or layout.specs[wave]) + fingerprint.packed),
    )
    # Two KEYS and an ARGV more than the plain decision's: four KEYS, or five and the target per target.
    extra = len(keys) - 4
    return CONTENT_SCRIPTS[policy.algorithm], 6 + extra, body, policy.script_argc + 3 + 2 * extra, keys[0]


def _written(mine, waves, split, wave, max_):
    """The content indexes a decision writes: on one server the wave's alone (it holds the member's
    posts too), else the member's own (with a limit per member) and the wave's (with a wave)."""
    if wave and not split:
        return (waves,)
    return tuple(ix for ix, used in ((mine, max_), (waves if wave else (), True)) if used and ix)


def _interpreted(planned, reply, fingerprint, layout, wave):
    """(the Decision a content variant's reply means, the escalation run it started or 0)."""
    if len(reply) == 9:
        return _duplicate(planned, reply), reply[6]
    if len(reply) == 10:
        return _held(planned, reply, fingerprint, layout, wave), 0
    decision, crossing = interpret(planned, reply)
    if decision.entries:
        decision.content = Posted(layout.written[wave], planned.token, fingerprint)
    return decision, crossing


def _held(planned, reply, fingerprint, layout, wave):
    """The Decision of a match the policy holds for review: admitted and recorded like any post, held
    (see Guide › Held for review); under a policy in shadow mode, a shadow admission."""
    decision, _ = interpret(planned, reply[:6])
    if decision.entries:
        decision.content = (layout.written[wave], planned[1], fingerprint)
    decision.duplicate = REPEATED if reply[8] == 1 else WAVE
    if planned[4].mode == SHADOW_MODE:
        decision.reason = SHADOW
    else:
        decision.held, decision.reason = True, DUPLICATE
    return decision


def _duplicate(planned, reply):
    keys, _, _, _, policy, identity, _, _, _, target = planned
    limit, wait, offences, crossing, kind = reply[1], reply[3], reply[5], reply[6], reply[8]
    shadow = policy.mode == SHADOW_MODE  # would have been refused: counted, shown, never refused
    return Decision(
        allowed=shadow,
        action=policy.action,
        limit=limit,
        remaining=0,
        retry_after=0.0 if shadow else wait / 1e6,
        reset_after=wait / 1e6,
        reason=SHADOW if shadow else DUPLICATE,
        identity=identity,
        offences=offences,
        verb=policy.verb,
        escalated=crossing != 0,
        windows=policy.windows,
        keys=keys,
        target=None if target is None else str(target),
        duplicate=REPEATED if kind == 1 else WAVE,
    )


def _wave_call(planned, fingerprint, layout):
    """content_wave.lua's KEYS and ARGV: judge the wave, and reserve a place in it when recording."""
    policy = planned.policy
    spec = b"%d %d %s" % (policy.same_content_members, policy.same_content_period, b"c" if planned.record else b"p")
    return list(layout.waves), [spec, planned.identity.encode(), planned.token.encode(), fingerprint.packed]


def _verdict(planned, reply):
    """(the wave for the member's decision, the spec of a refusal): what the wave's half answered."""
    if reply[0] == 1:
        return WAVE_ADMITTED, None
    return WAVE_REFUSED, _spec(planned.policy, planned.identity, WAVE_REFUSED, reply[1])


def forget_calls(written, token, fingerprint):
    """content_forget.lua's (KEYS, ARGV), one call per index a decision with content wrote (`written`)."""
    return [(list(index), [token, *fingerprint.keys]) for index in written]


def _in_doubt(written, token, fingerprint):
    for keys, args in forget_calls(written, token, fingerprint):
        in_doubt.add_call("content_forget", keys, args)


def decide(planned, fingerprint):
    """(Decision, escalation run or 0) of a decision with content: one script call, or on a cluster
    where the wave lives in another slot, the wave's half first (see Guide › Repeated content).
    A flow (see throttling.engine.flow), run inside the decision's."""
    layout = yield from _layout(planned.policy, planned.identity)
    wave = bool(layout.waves) and _makes_wave(fingerprint)
    token, max_ = planned.token, planned.policy.same_content_max
    if wave and layout.split:
        keys, args = _wave_call(planned, fingerprint, layout)
        try:
            verdict, refusal = _verdict(planned, (yield Call("decide", ("content_wave", keys, args))))
        except BackendTimeout:
            _in_doubt((layout.waves,), token, fingerprint)
            raise
        reserved = planned.record and verdict == WAVE_ADMITTED
        try:
            reply = yield Call("decide_packed", _sent(planned, fingerprint, layout, verdict, refusal))
        except BackendError as exc:
            timeout = isinstance(exc, BackendTimeout)
            yield from _undo(_written(layout.mine, layout.waves, True, reserved, max_ and timeout), token, fingerprint)
            raise
        decision, crossing = _interpreted(planned, reply, fingerprint, layout, wave)
        if reserved and not decision.entries:
            yield from _undo((layout.waves,), token, fingerprint)
        return decision, crossing
    try:
        reply = yield Call("decide_packed", _sent(planned, fingerprint, layout, WAVE_HERE if wave else NO_WAVE))
    except BackendTimeout:
        _in_doubt(layout.written[wave], token, fingerprint)
        raise
    return _interpreted(planned, reply, fingerprint, layout, wave)


def _undo(written, token, fingerprint):
    """Forget what the member's decision did not keep (a reservation in the wave; after a timeout,
    what that decision may have written): now, or once Redis answers again."""
    calls = forget_calls(written, token, fingerprint)
    for n, (keys, args) in enumerate(calls):
        try:
            yield Call("decide", ("content_forget", keys, args))
        except BackendError:
            for later_keys, later_args in calls[n:]:
                in_doubt.add_call("content_forget", later_keys, later_args)
            return
