"""Forgetting what an identity was counted for: an action's state and offences, on every target of it unless one is named."""

from ..backends.redis import get_backend
from .deciding.plan import site_identity, target_part
from .effects import Blocking, Call
from .keys import SLIDING_LOG, TOKEN_BUCKET, seen_keys, state_keys, targets_key, wave_keys
from .policies.cache import SITE, policies

_ALGORITHMS = (SLIDING_LOG, TOKEN_BUCKET)


def reset_keys(identity, actions, target=None):
    """The keys a reset deletes besides the targets found in the indexes; identity None means the
    site-wide count (of `target` when given)."""
    # Not the penalties hash: lifting a penalty is throttling.penalties.lift().
    part = target_part(target)
    if identity is None:
        identity, part = site_identity(part), None
    keys = [
        key
        for a in actions
        for algorithm in _ALGORITHMS
        for i, key in enumerate(state_keys(identity, a, algorithm, part))
        if i != 2
    ]
    # And the member's recent posts, so a reset member may post again what they had posted.
    keys += [key for a in actions for key in seen_keys(identity, a)]
    return list(dict.fromkeys(keys))


def _glob(text):
    """`text` matched literally by a SCAN pattern."""
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


def site_target_keys(backend, actions):
    """Every key of the per-target site-wide counts of `actions`: each target's count is an identity
    of its own (site_identity(), its own slot, in no index), so they are found with SCAN on every
    master (see Architecture › Resetting every target)."""
    keys = []
    for action in actions:
        head = state_keys(site_identity("x"), action)[0].split("{", 1)[0]  # the prefix and ":"
        pattern = f"{_glob(head)}{{site@*}}:{_glob(action)}:*"
        for key in backend.scan(pattern):
            # The target part is escaped (no "}" or ":"): the key is this action's, not another's
            # whose name the pattern's "*" spans.
            tag, _, rest = key[len(head) :].partition("}:")
            if "}" not in tag and rest.split(":", 1)[0] == action:
                keys.append(key)
    return keys


def _indexes(identity, actions, target):
    """The targets indexes to read: every action's, unless one target is named. A site-wide count
    per target is an identity of its own (its own slot), never in an index."""
    if identity is None or target is not None:
        return []
    return [targets_key(identity, a) for a in actions]


def _target_keys(identity, actions, found):
    """The state keys (either algorithm: a policy may have switched) of the targets an index named."""
    return [
        state_keys(identity, action, algorithm, part.decode())[0]
        for action, parts in zip(actions, found)
        for part in parts
        for algorithm in _ALGORITHMS
    ]


def _wave_marks(identity, specs):
    """content_reset.lua's (KEYS, ARGV), one call per policy among `specs` with a wave limit: there a
    member's own posts are entries of the action's wave index, among every other member's, which a
    reset marks rather than deletes (see Guide › Repeated content)."""
    if identity is None:
        return []
    return [
        (list(wave_keys(spec.action)), [identity, spec.same_content_period])
        for spec in specs
        if spec is not None and spec.same_content_members and spec.same_content_period and spec.scope != SITE
    ]


def forget(identity, actions, target=None):
    """Delete what reset() forgets: two script calls (read the indexes, then delete), or one DEL
    when one target or the site-wide count is named; and a call per wave index that holds the
    member's posts. A flow (see throttling.engine.flow), driven by reset() and areset()."""
    keys = reset_keys(identity, actions, target)
    if identity is None and target is None:
        # A moderator's rare operation: SCAN on every master, with the synchronous client (in a
        # thread, for async code).
        keys += yield Blocking(site_target_keys, (get_backend(), actions))
    indexes = _indexes(identity, actions, target)
    if not indexes:
        if keys:
            yield Call("delete", tuple(keys))
    else:
        read_at, *found = yield Call("script_call", ("targets", indexes, []))
        keys += _target_keys(identity, actions, found)
        yield Call("script_call", ("reset", [*keys, *indexes], [read_at, len(indexes)]))
    specs = []
    for action in actions if identity else ():
        hit, spec = policies.cached(action)
        specs.append(spec if hit else (yield Blocking(policies.get, (action,))))
    for wave, args in _wave_marks(identity, specs):
        yield Call("script_call", ("content_reset", wave, args))
