"""Redis key names and the unique tokens of log entries."""

import itertools
import os
import secrets

from ..common.choices import Algorithm
from ..conf import settings
from .identity import member_identity

SLIDING_LOG = Algorithm.SLIDING_LOG.value
TOKEN_BUCKET = Algorithm.TOKEN_BUCKET.value
# The suffix of the key holding each algorithm's state. Different names, so a
# policy switched between algorithms never meets the other's key type
# (WRONGTYPE): the old state simply expires.
_STATE_SUFFIX = {SLIDING_LOG: "log", TOKEN_BUCKET: "tb"}


def state_keys(identity, action, algorithm=SLIDING_LOG, target=None):
    """The decision script's KEYS: state (log or bucket), offences, penalties, pending escalation.

    The identity is the hash tag: every key of one call, and of one member,
    lands on one Redis Cluster slot. Keys never contain the rate (see
    Architecture › Rates outside keys). A target (an escaped thread id, say)
    gives the state its own key per target; offences and the pending mark stay
    per action.
    """
    base = f"{settings.KEY_PREFIX}:{{{identity}}}:{action}"
    state = base if target is None else f"{base}@{target}"
    return [f"{state}:{_STATE_SUFFIX[algorithm]}", f"{base}:off", penalty_key(identity), f"{base}:esc"]


def seen_keys(identity, action):
    """The member's own content index of an action: two hashes, one per parity of the generation of
    two periods (see Guide › Repeated content); in the identity's hash tag, so it is decided in the
    same call as the member's counts."""
    base = f"{settings.KEY_PREFIX}:{{{identity}}}:{action}:seen"
    return (f"{base}:0", f"{base}:1")


def wave_keys(action):
    """The action's wave index: two hashes as seen_keys(), under one hash tag of their own (on a
    cluster another slot than a member's keys)."""
    base = f"{settings.KEY_PREFIX}:{{content:{action}}}:wave"
    return (f"{base}:0", f"{base}:1")


def targets_key(identity, action):
    """The sorted set of the targets an identity was counted on for one action (member: the escaped
    target, score: its last admission, Redis time in microseconds): what a reset reads to forget
    every target (see Architecture › Resetting every target). Beside the identity's other keys, in
    its slot."""
    return f"{settings.KEY_PREFIX}:{{{identity}}}:{action}:targets"


def log_keys(identity, action):
    """state_keys() of the sliding log."""
    return state_keys(identity, action, SLIDING_LOG)


def penalty_key(identity):
    """The hash mirroring an identity's penalties in force (field: action or "*")."""
    return f"{settings.KEY_PREFIX}:{{{identity}}}:penalties"


def member_penalty_key(user_id):
    return penalty_key(member_identity(user_id))


class _Tokens:
    """Unique, short log members: a random per-process prefix plus a counter (see Architecture ›
    Colliding members)."""

    def __init__(self):
        self.renew()
        # A forked child must not repeat its parent's tokens.
        os.register_at_fork(after_in_child=self.renew)

    def renew(self):
        self._prefix = secrets.token_urlsafe(6)
        # next() is the __next__ of a C iterator: the prefix and the counter in hex, each call
        # one token, atomic under the GIL, with no Python frame on the request path. The prefix
        # is URL-safe base64, so it holds no "%".
        self.next = map(f"{self._prefix}%x".__mod__, itertools.count(1)).__next__


tokens = _Tokens()


def policies_version_key():
    """The policy change marker: bumped by every save of a policy, a window, a tier or an override."""
    return f"{settings.KEY_PREFIX}:policies:version"


def refusals_version_key():
    """The marker that ends refusals cached in every process (a reset, a penalty applied or lifted).

    Hash-tagged on the policy marker's name, so both live in one slot and are read with one MGET.
    """
    return f"{{{policies_version_key()}}}:refusals"


def groups_version_key():
    """The marker that ends what every process remembers of members' groups (for trust tiers) and
    the refusals decided under them: moved when a member joins or leaves a group a tier names.
    Hash-tagged like the refusals marker, so the markers are read with one MGET."""
    return f"{{{policies_version_key()}}}:groups"


def changes_channel():
    """The channel on which every move of a change marker is published, "<new value> <marker key>"
    (see Architecture › Policies in every process)."""
    return f"{settings.KEY_PREFIX}:changes"


def measures_version_key():
    """The marker of blocks, surges and surge triggers: bumped by every save or delete of one.

    Hash-tagged on the policy marker's name, so all markers live in one slot and are read with one MGET.
    """
    return f"{{{policies_version_key()}}}:measures"


def trigger_counts_key(action):
    """The hash counting `action` site-wide per window of its surge trigger's period (field: window number)."""
    return f"{settings.KEY_PREFIX}:{{surge:{action}}}:counts"


def trigger_claim_key(action):
    """Set by the one process that starts `action`'s surge, for as long as the surge lasts."""
    return f"{settings.KEY_PREFIX}:{{surge:{action}}}:started"
