"""The in-process cache of action policies and the change marker that keeps every process current."""

import logging
import math
import threading
import time
from dataclasses import dataclass, field, replace

from django.db import DatabaseError

from ..backends.redis import get_backend
from ..backends.resp import bulk
from ..choices import Mode, OnBackendFailure, Scope
from ..conf import MAX_BUCKET_SIZE, MAX_LOG_ENTRIES, settings
from ..exceptions import BackendError
from ..models import ActionPolicy, MemberOverride
from .keys import SLIDING_LOG, TOKEN_BUCKET
from .watch import eviction_watch

# Plain strings: PolicySpec fields are compared on every decision.
ENFORCE, SHADOW = Mode.ENFORCE.value, Mode.SHADOW.value
MEMBER, SITE = Scope.MEMBER.value, Scope.SITE.value


@dataclass(frozen=True)
class TierSpec:
    group_id: int | None
    new_member_days: int | None
    multiplier: float


@dataclass(frozen=True)
class OverrideSpec:
    action: str  # "" for every action
    exempt: bool
    multiplier: float | None
    expires_at: float | None  # a Unix time, or None


logger = logging.getLogger("throttling")

# The change marker's version when Redis could not be asked.
UNREAD = object()
# Least seconds between two warnings that the marker could not be read.
UNREAD_LOG_EVERY = 60.0


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
    algorithm: str = SLIDING_LOG
    mode: str = ENFORCE
    scope: str = MEMBER
    tiers: tuple = ()  # TierSpec, in position order
    capped: bool = False  # a window's maximum was above its algorithm's cap, and is decided at the cap
    script_args: tuple = field(init=False)  # (period, max, period, max, ...) encoded once
    packed_windows: bytes = field(init=False)  # the same, as RESP: the script call's tail
    packed_action: bytes = field(init=False)  # the action as RESP (ARGV[3])
    script_argc: int = field(init=False)  # KEYS + ARGV of a decision
    smallest_max: int = field(init=False)

    def __post_init__(self):
        args = tuple(str(n).encode() for w in self.windows for n in w)
        object.__setattr__(self, "script_args", args)
        object.__setattr__(self, "packed_windows", b"".join(map(bulk, args)))
        object.__setattr__(self, "packed_action", bulk(self.action))
        object.__setattr__(self, "script_argc", 4 + 4 + len(args))
        object.__setattr__(self, "smallest_max", min(m for _, m in self.windows))
        object.__setattr__(self, "_scaled", {})

    def scaled(self, multiplier):
        """This policy with every window's maximum multiplied (at least 1, within the algorithm's cap)."""
        if multiplier == 1:
            return self
        spec = self._scaled.get(multiplier)
        if spec is None:
            cap = MAX_BUCKET_SIZE if self.algorithm == TOKEN_BUCKET else MAX_LOG_ENTRIES
            windows = tuple((p, min(cap, max(1, math.floor(m * multiplier + 1e-9)))) for p, m in self.windows)
            spec = self._scaled[multiplier] = replace(self, windows=windows)
        return spec


class PolicyCache:
    """Policies of every action, loaded in one go and kept in process.

    Steady state costs no SQL. Saving a policy clears this process's copy and
    bumps a change marker in Redis; every process reads that marker at most
    every THROTTLING_POLICY_REFRESH seconds, so an edit is live everywhere
    within a second (see Architecture › Policies in every process).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._unread_logged_at = None
        self.clear()

    def clear(self):
        self._policies = None
        self.overrides = {}
        self._version = None
        self._loaded_at = 0.0
        self._polled_at = 0.0

    def get(self, action):
        now = time.monotonic()
        # Read once: another thread may clear() the attribute at any moment.
        policies = self._policies
        if policies is None or now - self._loaded_at > settings.POLICY_MAX_AGE:
            policies = self._reload(now, self._read_version())
        elif now - self._polled_at >= settings.POLICY_REFRESH:
            policies = self._poll(now) or policies
        return policies.get(action)

    def cached(self, action):
        """(True, the action's policy) when get() would do no I/O now; (False, None) otherwise."""
        policies = self._policies
        now = time.monotonic()
        if (
            policies is None
            or now - self._loaded_at > settings.POLICY_MAX_AGE
            or now - self._polled_at >= settings.POLICY_REFRESH
        ):
            return False, None
        return True, policies.get(action)

    def get_cached(self, action):
        """The action's policy as last loaded, without any I/O (None when none is loaded)."""
        return (self._policies or {}).get(action)

    def actions(self):
        self.get("")
        return sorted(self._policies or ())

    def _read_version(self):
        """The change marker, or UNREAD when Redis did not answer.

        A failed read never fails the decision that polled: the marker may live
        on another node than the member's state (a cluster), or the connection
        may be the only thing broken. The decision's own call decides; the
        cached policies stay in force and the marker is read again at the next
        poll (see Architecture › Policies in every process).
        """
        try:
            return get_backend().get(version_key())
        except BackendError as exc:
            now = time.monotonic()
            if self._unread_logged_at is None or now - self._unread_logged_at >= UNREAD_LOG_EVERY:
                self._unread_logged_at = now
                logger.warning(
                    "throttling: could not read the policy change marker (%s); the cached policies "
                    "stay in force and the marker is read again at the next poll",
                    exc,
                )
            return UNREAD

    def _poll(self, now):
        """Reload if the change marker moved; returns the new policies, or None."""
        self._polled_at = now
        eviction_watch.look_if_due(now)
        version = self._read_version()
        if version is not UNREAD and version != self._version:
            # Also after a load that could not read the marker (its version is
            # UNREAD): what changed meanwhile is picked up at the first answer.
            return self._reload(now, version)
        return None  # unchanged, or Redis did not answer: keep what we have

    def _reload(self, now, version):
        with self._lock:
            try:
                policies = load_policies()
                overrides = load_overrides()
            except DatabaseError:
                logger.exception("throttling: could not load action policies")
                return self._policies or {}
            self._policies = policies
            self.overrides = overrides
            self._version = version
            self._loaded_at = self._polled_at = now
            return policies


def policy_windows(policy):
    """((period, max_count), ...) of an ActionPolicy row: its main window first, then its extra windows."""
    return ((policy.period, policy.max_count), *((w.period, w.max_count) for w in policy.windows.all()))


def capped_windows(algorithm, windows):
    """`windows` as they are decided: no maximum above the algorithm's cap.

    The form, save() and the policy table's constraint keep a sliding log within its cap,
    but rows written around them (bulk_create, update(), loaddata, a bucket switched to the
    log) are not refused by the database; decided as written they would cost up to a
    million log entries per member (see Architecture › Bounded memory).
    """
    cap = MAX_BUCKET_SIZE if algorithm == TOKEN_BUCKET else MAX_LOG_ENTRIES
    return tuple((period, min(cap, max_count)) for period, max_count in windows)


def load_policies():
    specs = {}
    for p in ActionPolicy.objects.prefetch_related("windows", "tiers"):
        written = policy_windows(p)
        windows = capped_windows(p.algorithm, written)
        specs[p.action] = PolicySpec(
            action=p.action,
            windows=windows,
            capped=windows != written,
            enabled=p.enabled,
            exempt_staff=p.exempt_staff,
            fail_open={OnBackendFailure.OPEN: True, OnBackendFailure.CLOSED: False}.get(p.on_backend_failure),
            verb=p.verb,
            offence_threshold=p.offence_threshold,
            offence_window=p.offence_window,
            algorithm=p.algorithm,
            mode=p.mode,
            scope=p.scope,
            tiers=tuple(
                TierSpec(t.group_id, t.new_member_days, float(t.multiplier))
                for t in sorted(p.tiers.all(), key=lambda t: (t.position, t.pk))
            ),
        )
        if windows != written:
            logger.warning(
                "throttling: policy %r has a window above its algorithm's cap; decided as %s", p.action, windows
            )
    return specs


def load_overrides():
    """Member overrides in force: {user id: (OverrideSpec, ...)}. Few rows, loaded with the policies."""
    out = {}
    for o in MemberOverride.objects.active():
        expires = o.expires_at.timestamp() if o.expires_at else None
        multiplier = float(o.multiplier) if o.multiplier is not None else None
        out.setdefault(o.user_id, []).append(OverrideSpec(o.action, o.exempt, multiplier, expires))
    return {uid: tuple(specs) for uid, specs in out.items()}


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
