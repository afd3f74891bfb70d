"""The decision: check / peek / reset / refund over one Redis script, with an in-process policy cache."""

import itertools
import json
import logging
import math
import os
import secrets
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from datetime import UTC, datetime

from django.db import DatabaseError
from django.utils import formats, timezone, translation
from django.utils.translation import gettext, ngettext

from . import history, signals
from .backends.redis import get_backend
from .conf import settings
from .exceptions import BackendError
from .identity import identify, member_identity

logger = logging.getLogger("throttling")

# Why a decision came out as it did.
ADMITTED = "admitted"
THROTTLED = "throttled"
UNKNOWN_ACTION = "unknown_action"
DISABLED = "disabled"
EXEMPT = "exempt"
BACKEND_FAILURE = "backend_failure"
PENALISED = "penalised"

# Safe methods only read; they are not behaviour a community limits.
DEFAULT_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


# slots and no frozen: a frozen dataclass pays object.__setattr__ per field,
# which is measurable on a path that is otherwise one Redis round trip.
@dataclass(slots=True)
class Decision:
    allowed: bool
    action: str
    limit: int | None = None
    remaining: int | None = None
    retry_after: float = 0.0
    reset_after: float = 0.0
    reason: str = ADMITTED
    identity: str = ""
    offences: int = 0
    verb: str = field(default="", repr=False)
    # The penalty that refused this decision (reason PENALISED), else None.
    penalty: "PenaltyInfo | None" = None
    # True when this refusal made the member a repeat offender (an escalation was queued).
    escalated: bool = False
    # Where the entries this decision recorded live, so refund() can give them back.
    log_key: str = field(default="", repr=False, compare=False)
    entries: tuple = field(default=(), repr=False, compare=False)

    def __bool__(self):
        return self.allowed

    @property
    def message(self):
        return refusal_message(self)


@dataclass(frozen=True, slots=True)
class PenaltyInfo:
    """A penalty in force, as the decision script read it from the Redis mirror."""

    penalty_id: int
    level: int
    action: str  # "" when it restricts all actions
    ends_at: datetime
    reason: str

    @property
    def all_actions(self):
        return not self.action

    def encode(self):
        """The mirror's value: "<ends_at_us>|<json>"; the script reads only the number."""
        ends_us = int(self.ends_at.timestamp() * 1_000_000)
        details = json.dumps([self.penalty_id, self.level, self.action, self.reason[:300]], ensure_ascii=False)
        return f"{ends_us}|{details}"

    @classmethod
    def decode(cls, raw):
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8")
        ends_us, _, details = raw.partition("|")
        penalty_id, level, action, reason = json.loads(details)
        ends_at = datetime.fromtimestamp(int(ends_us) / 1_000_000, tz=UTC)
        return cls(penalty_id, level, action, ends_at, reason)


@dataclass(frozen=True)
class PolicySpec:
    action: str
    windows: tuple  # ((period, max_count), ...), main window first
    enabled: bool
    exempt_staff: bool
    fail_open: bool | None
    verb: str
    offence_threshold: int | None = None  # None: THROTTLING_OFFENCE_THRESHOLD
    offence_window: int | None = None  # None: THROTTLING_OFFENCE_WINDOW
    script_args: tuple = field(init=False)  # (period, max, period, max, ...) encoded once
    smallest_max: int = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "script_args", tuple(str(n).encode() for w in self.windows for n in w))
        object.__setattr__(self, "smallest_max", min(m for _, m in self.windows))


class PolicyCache:
    """Policies of every action, loaded in one go and kept in process.

    Steady state costs no SQL (DESIGN request path). Saving a policy clears
    this process's copy and bumps a change marker in Redis; every process reads
    that marker at most every THROTTLING_POLICY_REFRESH seconds, so an edit is
    live everywhere within a second (STYLE habit 4).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._local = threading.local()
        self.clear()

    def clear(self):
        self._policies = None
        self._version = None
        self._loaded_at = 0.0
        self._polled_at = 0.0

    def get(self, action):
        self._local.backend_error = None
        now = time.monotonic()
        # Read once: another thread may clear() the attribute at any moment.
        policies = self._policies
        if policies is None or now - self._loaded_at > settings.POLICY_MAX_AGE:
            policies = self._reload(now, self._read_version())
        elif now - self._polled_at >= settings.POLICY_REFRESH:
            policies = self._poll(now) or policies
        return policies.get(action)

    @property
    def backend_error(self):
        """The Redis error met by this thread's last get(), if any."""
        return getattr(self._local, "backend_error", None)

    def actions(self):
        self.get("")
        return sorted(self._policies or ())

    def _read_version(self):
        try:
            return get_backend().get(version_key())
        except BackendError as exc:
            # The decision skips Redis after this, so an outage costs one
            # timeout per request, not two.
            self._local.backend_error = exc
            return None

    def _poll(self, now):
        """Reload if the change marker moved; returns the new policies, or None."""
        self._polled_at = now
        version = self._read_version()
        if self._local.backend_error is None and version != self._version:
            return self._reload(now, version)
        return None  # unchanged, or Redis is down: keep what we have

    def _reload(self, now, version):
        with self._lock:
            try:
                policies = load_policies()
            except DatabaseError:
                logger.exception("throttling: could not load action policies")
                return self._policies or {}
            self._policies = policies
            self._version = version
            self._loaded_at = self._polled_at = now
            return policies


def load_policies():
    from .models import ActionPolicy

    specs = {}
    for p in ActionPolicy.objects.prefetch_related("windows"):
        windows = ((p.period, p.max_count), *((w.period, w.max_count) for w in p.windows.all()))
        specs[p.action] = PolicySpec(
            action=p.action,
            windows=windows,
            enabled=p.enabled,
            exempt_staff=p.exempt_staff,
            fail_open={"open": True, "closed": False}.get(p.on_backend_failure),
            verb=p.verb,
            offence_threshold=p.offence_threshold,
            offence_window=p.offence_window,
        )
    return specs


policies = PolicyCache()


def version_key():
    return f"{settings.KEY_PREFIX}:policies:version"


def invalidate_policies(*, broadcast=True):
    """Forget cached policies here and, with broadcast, tell every other process."""
    policies.clear()
    if broadcast:
        try:
            get_backend().incr(version_key())
        except BackendError as exc:
            logger.warning(
                "throttling: policy change could not be announced (%s); other processes "
                "pick it up within THROTTLING_POLICY_MAX_AGE seconds",
                exc,
            )


def log_keys(identity, action):
    """The script's KEYS: log, offences, penalties, pending escalation.

    The identity is the hash tag: every key of one call, and of one member,
    lands on one Redis Cluster slot. Keys never contain the rate (trap 4).
    """
    base = f"{settings.KEY_PREFIX}:{{{identity}}}:{action}"
    return [f"{base}:log", f"{base}:off", penalty_key(identity), f"{base}:esc"]


def penalty_key(identity):
    """The hash mirroring an identity's penalties in force (field: action or "*")."""
    return f"{settings.KEY_PREFIX}:{{{identity}}}:penalties"


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


_tokens = _Tokens()
_warned_unknown = set()
_last_failure_log = [0.0]


def check(who, action, *, cost=1):
    """Decide and, when admitted, record `cost` entries. One EVALSHA."""
    return _decide(who, action, cost, record=True)


def peek(who, action, *, cost=1):
    """Decide as check() would, recording nothing."""
    return _decide(who, action, cost, record=False)


def is_action_allowed(who, action):
    """The classic interface: True when admitted (and recorded, like check)."""
    return check(who, action).allowed


def _decide(who, action, cost, record):
    if not isinstance(cost, int) or cost < 1:
        raise ValueError(f"cost must be a whole number of at least 1, not {cost!r}")
    if not settings.ENABLED:
        return Decision(True, action, reason=DISABLED)
    policy = policies.get(action)
    if policy is None:
        return _unknown(action)
    if not policy.enabled:
        return Decision(True, action, reason=DISABLED, verb=policy.verb)
    identity, user = identify(who)
    if user is not None and policy.exempt_staff and (user.is_staff or user.is_superuser):
        return Decision(True, action, reason=EXEMPT, identity=identity, verb=policy.verb)
    if cost > policy.smallest_max:
        raise ValueError(
            f"cost {cost} can never be admitted by {action!r}: a window allows {policy.smallest_max}"
        )
    keys = log_keys(identity, action)
    token = _tokens.next() if record else ""
    window = policy.offence_window or settings.OFFENCE_WINDOW
    threshold = 0  # only members are penalised; anonymous identities are only throttled
    if user is not None and settings.PENALTIES:
        threshold = settings.OFFENCE_THRESHOLD if policy.offence_threshold is None else policy.offence_threshold
    args = (
        b"check" if record else b"peek",
        cost,
        token,
        action,
        window,
        threshold,
        settings.ESCALATION_TIMEOUT,
        *policy.script_args,
    )
    try:
        if policies.backend_error is not None:
            raise policies.backend_error
        reply = get_backend().decide(keys, args)
    except BackendError as exc:
        return _backend_failure(policy, identity, exc)
    allowed, limit, remaining, retry_us, reset_us, offences, *extra = reply
    crossing = 0
    if extra:  # only a crossing or a penalty lengthens the reply
        if len(extra) > 1:
            return _penalised(policy, identity, extra[1], retry_us, offences)
        crossing = extra[0]
    entries = ()
    if allowed and record:
        entries = (token, *(f"{token}.{j}" for j in range(2, cost + 1)))
    decision = Decision(
        allowed=bool(allowed),
        action=action,
        limit=limit,
        remaining=remaining,
        retry_after=retry_us / 1e6,
        reset_after=reset_us / 1e6,
        reason=ADMITTED if allowed else THROTTLED,
        identity=identity,
        offences=offences,
        verb=policy.verb,
        escalated=bool(crossing),
        log_key=keys[0],
        entries=entries,
    )
    if not allowed and record:
        _offence(decision, user, window, crossing, token)
    return decision


def _offence(decision, user, window, crossing, run):
    """Bookkeeping of a refused attempt, all in process or deferred: no extra round trip."""
    from . import penalties  # it builds on this module

    history.buffer.add(decision.identity, user.pk if user is not None else None, decision.action)
    if decision.offences == 1:
        # The first refusal of an offence window: throttled after being admitted.
        signals.action_throttled.send(
            sender=Decision, action=decision.action, identity=decision.identity, user=user, decision=decision
        )
    if crossing:
        penalties.enqueue_escalation(user.pk, decision.action, run, decision.offences, window)


def _penalised(policy, identity, raw, retry_us, offences):
    try:
        info = PenaltyInfo.decode(raw)
    except (ValueError, TypeError) as exc:
        # A mirror we cannot read still refuses: the script has judged it in force.
        logger.warning("throttling: unreadable penalty mirror for %s: %s", identity, exc)
        info = PenaltyInfo(0, 0, policy.action, timezone.now(), "")
    return Decision(
        allowed=False,
        action=policy.action,
        limit=0,
        remaining=0,
        retry_after=retry_us / 1e6,
        reset_after=retry_us / 1e6,
        reason=PENALISED,
        identity=identity,
        offences=offences,
        verb=policy.verb,
        penalty=info,
    )


def view_action(view, method):
    """The action a view class declares for an HTTP method (throttle_action(s)), or None."""
    actions = getattr(view, "throttle_actions", None)
    if actions:
        return actions.get(method)
    action = getattr(view, "throttle_action", None)
    if action and method in getattr(view, "throttle_methods", DEFAULT_METHODS):
        return action
    return None


def _unknown(action):
    if action not in _warned_unknown:
        _warned_unknown.add(action)
        logger.warning(
            "throttling: no policy for action %r; %s (add one in the admin, "
            "or set THROTTLING_UNKNOWN_ACTION)",
            action,
            "refusing it" if settings.UNKNOWN_ACTION == "deny" else "allowing it",
        )
    if settings.UNKNOWN_ACTION == "deny":
        return Decision(False, action, retry_after=float(settings.FAIL_CLOSED_RETRY_AFTER), reason=UNKNOWN_ACTION)
    return Decision(True, action, reason=UNKNOWN_ACTION)


def _backend_failure(policy, identity, exc):
    fail_open = settings.FAIL_OPEN if policy.fail_open is None else policy.fail_open
    now = time.monotonic()
    # One log line per 10 s: an outage must be visible, not flood the log.
    if now - _last_failure_log[0] > 10:
        _last_failure_log[0] = now
        logger.warning(
            "throttling: Redis unavailable (%s); failing %s for %r",
            exc,
            "open" if fail_open else "closed",
            policy.action,
        )
    signals.backend_failure.send(
        sender=Decision, action=policy.action, identity=identity, error=exc, fail_open=fail_open
    )
    return Decision(
        allowed=fail_open,
        action=policy.action,
        retry_after=0.0 if fail_open else float(settings.FAIL_CLOSED_RETRY_AFTER),
        reason=BACKEND_FAILURE,
        identity=identity,
        verb=policy.verb,
    )


def refund(decision):
    """Give back the entries an admitted decision recorded (the view failed; trap 9)."""
    if not decision.entries:
        return False
    try:
        get_backend().remove_members(decision.log_key, decision.entries)
    except BackendError as exc:
        logger.warning("throttling: could not refund %r: %s", decision.action, exc)
        return False
    return True


def reset(who, action=None):
    """Forget the log and offences of `who` for one action, or for every action with a policy."""
    identity, _ = identify(who)
    actions = [action] if action else policies.actions()
    # Not the penalties hash: lifting a penalty is throttling.penalties.lift().
    keys = [k for a in actions for i, k in enumerate(log_keys(identity, a)) if i != 2]
    get_backend().delete(*keys)


def wait_in_words(seconds):
    """ "12 seconds", "3 minutes", "5 hours", "2 days": rounded up, never "0"."""
    seconds = max(1, math.ceil(seconds))
    if seconds < 120:
        return ngettext("%(n)d second", "%(n)d seconds", seconds) % {"n": seconds}
    if seconds < 2 * 3600:
        n = math.ceil(seconds / 60)
        return ngettext("%(n)d minute", "%(n)d minutes", n) % {"n": n}
    if seconds < 2 * 86400:
        n = math.ceil(seconds / 3600)
        return ngettext("%(n)d hour", "%(n)d hours", n) % {"n": n}
    n = math.ceil(seconds / 86400)
    return ngettext("%(n)d day", "%(n)d days", n) % {"n": n}


def refusal_message(decision):
    """What a refused member reads: the action and the wait, in words."""
    if decision.penalty is not None:
        return penalty_message(decision.penalty, decision.action)
    wait = wait_in_words(decision.retry_after)
    if decision.reason in (BACKEND_FAILURE, UNKNOWN_ACTION):
        return gettext("This action is temporarily unavailable. Try again in %(wait)s.") % {"wait": wait}
    if decision.verb:
        return gettext("You have %(verb)s too often. Try again in %(wait)s.") % {
            "verb": decision.verb,
            "wait": wait,
        }
    return gettext("You have used “%(action)s” too often. Try again in %(wait)s.") % {
        "action": decision.action,
        "wait": wait,
    }


def local_time(moment):
    """A moment in the active time zone, as members read it: "Nov. 21, 2026, 2:32 p.m. (UTC)"."""
    local = timezone.localtime(moment)
    return f"{formats.date_format(local, 'DATETIME_FORMAT')} ({local.tzname()})"


def penalty_message(penalty, action):
    """What a penalised member reads: for what, until when, why, and that staff can lift it."""
    # A blocked spammer keeps asking: format each penalty once per language and zone.
    return _penalty_message(penalty, action, translation.get_language(), timezone.get_current_timezone_name())


@lru_cache(maxsize=1024)
def _penalty_message(penalty, action, language, zone):
    params = {"action": action, "until": local_time(penalty.ends_at), "reason": penalty.reason}
    if penalty.all_actions:
        text = gettext("Your account is restricted for all actions until %(until)s.") % params
    else:
        text = gettext("Your account is restricted for this action (“%(action)s”) until %(until)s.") % params
    if penalty.reason:
        text += " " + gettext("Reason: %(reason)s") % params
    return text + " " + gettext("A moderator can lift this restriction if you think it is a mistake.")


def member_penalty_key(user_id):
    return penalty_key(member_identity(user_id))
