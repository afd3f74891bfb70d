"""A deliberately simple reference of the engine's decisions, written from the documented rules alone.

Sliding log: an action at t is admitted when, in every window, fewer than max admitted actions lie in
(t − period, t]; it is then logged (refused ones never are). Token bucket: the textbook GCRA, with a
theoretical arrival time per window in exact fractions, an emission interval T = period ÷ max and a
tolerance of (max − 1) · T, plus the script's documented allowances (1e-9 of a token; a debt never
above one period). Every window must admit (all-or-nothing), and each key (member, or member and
target) has its own state. No shortcut is taken: each decision looks at the whole log.
"""

from fractions import Fraction

US = 1_000_000
EPS = Fraction(1, 10**9)


class ReferenceLog:
    def __init__(self, windows):
        self.windows = windows
        self.admitted = []

    def decide(self, t):
        for period, most in self.windows:
            inside = [s for s in self.admitted if t - period * US < s <= t]
            if len(inside) + 1 > most:
                return False
        self.admitted.append(t)
        return True


class ReferenceBucket:
    def __init__(self, windows):
        self.windows = windows
        self.tat = [None] * len(windows)  # theoretical arrival time per window, µs

    def decide(self, t):
        new = []
        for i, (period, most) in enumerate(self.windows):
            interval = Fraction(period * US, most)
            tat = self.tat[i] if self.tat[i] is not None else Fraction(t)
            tat = max(tat, Fraction(t))
            tat = min(tat, t + most * interval)  # a debt never exceeds one period
            # Admitted when the request fits: TAT − t ≤ (max − 1) · T, within 1e-9 of a token.
            if tat - t > (most - 1 + EPS) * interval:
                return False
            new.append(tat + interval)
        self.tat = new
        return True


KINDS = {"sliding_log": ReferenceLog, "token_bucket": ReferenceBucket}


def reference_decisions(rows, windows, algorithm, multipliers=None):
    """[(member, target, t, admitted)] for rows of (member, target, t), in time order per key.

    `multipliers` maps a member to its windows, when they differ from `windows`.
    """
    states = {}
    out = []
    for member, target, t in sorted(rows, key=lambda r: r[2]):
        key = (member, target)
        if key not in states:
            mine = (multipliers or {}).get(member, windows)
            states[key] = KINDS[algorithm](mine)
        out.append((member, target, t, states[key].decide(t)))
    return out
