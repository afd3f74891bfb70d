"""Redis key names, per-call tokens and the penalty mirror format: below both the decision and the penalties."""

import itertools
import json
import os
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache

from .conf import settings
from .identity import member_identity

SLIDING_LOG = "sliding_log"
TOKEN_BUCKET = "token_bucket"
# The suffix of the key holding each algorithm's state. Different names, so a
# policy switched between algorithms never meets the other's key type
# (WRONGTYPE): the old state simply expires.
_STATE_SUFFIX = {SLIDING_LOG: "log", TOKEN_BUCKET: "tb"}


def state_keys(identity, action, algorithm=SLIDING_LOG, target=None):
    """The decision script's KEYS: state (log or bucket), offences, penalties, pending escalation.

    The identity is the hash tag: every key of one call, and of one member,
    lands on one Redis Cluster slot. Keys never contain the rate (trap 4). A
    target (an escaped thread id, say) gives the state its own key per target;
    offences and the pending mark stay per action.
    """
    base = f"{settings.KEY_PREFIX}:{{{identity}}}:{action}"
    state = base if target is None else f"{base}@{target}"
    return [f"{state}:{_STATE_SUFFIX[algorithm]}", f"{base}:off", penalty_key(identity), f"{base}:esc"]


def bulk(value):
    """One RESP bulk string."""
    if isinstance(value, str):
        value = value.encode()
    elif isinstance(value, int):
        value = b"%d" % value
    return b"$%d\r\n%s\r\n" % (len(value), value)


@lru_cache(maxsize=8192)
def _packed_state_keys(prefix, identity, action, algorithm, target):
    keys = state_keys(identity, action, algorithm, target)
    return tuple(keys), b"".join(map(bulk, keys))


def packed_state_keys(identity, action, algorithm, target=None):
    """(state_keys(...), the same keys as RESP): members come back often, so both are remembered."""
    return _packed_state_keys(settings.KEY_PREFIX, identity, action, algorithm, target)


def log_keys(identity, action):
    """state_keys() of the sliding log."""
    return state_keys(identity, action, SLIDING_LOG)


def penalty_key(identity):
    """The hash mirroring an identity's penalties in force (field: action or "*")."""
    return f"{settings.KEY_PREFIX}:{{{identity}}}:penalties"


def member_penalty_key(user_id):
    return penalty_key(member_identity(user_id))


class _Tokens:
    """Unique, short log members: a random per-process prefix plus a counter (trap 2)."""

    def __init__(self):
        self.renew()
        # A forked child must not repeat its parent's tokens.
        os.register_at_fork(after_in_child=self.renew)

    def renew(self):
        self._prefix = secrets.token_urlsafe(6)
        self._counter = itertools.count(1)

    def next(self):
        return f"{self._prefix}{next(self._counter):x}"


tokens = _Tokens()


# Characters of a moderator's reason the Redis mirror carries.
MAX_REASON = 300


@dataclass(frozen=True, slots=True)
class PenaltyInfo:
    """A penalty in force, as the decision script read it from the Redis mirror."""

    penalty_id: int
    level: int
    action: str  # "" when it restricts all actions
    ends_at: datetime
    reason: str  # a moderator's words, as typed
    reason_code: str = ""  # an automatic reason: rendered in the reader's language (reason_text)
    reason_params: tuple = ()  # sorted (name, value) pairs: hashable, so messages can be cached

    @classmethod
    def of(cls, penalty):
        """The mirror of a Penalty row, as the decision script will hand it back."""
        return cls(
            penalty.pk,
            penalty.level,
            penalty.action,
            penalty.ends_at,
            penalty.reason[:MAX_REASON],
            penalty.reason_code,
            params_tuple(penalty.reason_params),
        )

    @property
    def all_actions(self):
        return not self.action

    @property
    def reason_text(self):
        from .penalties import render_reason

        return render_reason(self.reason_code, dict(self.reason_params)) or self.reason

    def encode(self):
        """The mirror's value: "<ends_at_us>|<json>"; the script reads only the number."""
        ends_us = int(self.ends_at.timestamp() * 1_000_000)
        fields = [self.penalty_id, self.level, self.action, self.reason[:MAX_REASON]]
        if self.reason_code:
            fields += [self.reason_code, dict(self.reason_params)]
        return f"{ends_us}|{json.dumps(fields, ensure_ascii=False)}"

    @classmethod
    def decode(cls, raw):
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8")
        ends_us, _, details = raw.partition("|")
        penalty_id, level, action, reason, *coded = json.loads(details)
        ends_at = datetime.fromtimestamp(int(ends_us) / 1_000_000, tz=UTC)
        code, params = (coded + ["", {}])[:2]
        return cls(penalty_id, level, action, ends_at, reason, code or "", params_tuple(params))


def params_tuple(params):
    """Reason parameters as sorted (name, value) pairs (PenaltyInfo.reason_params)."""
    return tuple(sorted((params or {}).items()))
