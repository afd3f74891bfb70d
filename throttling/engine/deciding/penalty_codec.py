"""The penalty mirror's codec: a penalty in force as the decision script reads it from Redis."""

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from ...common.words import render_reason

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
