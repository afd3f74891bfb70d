"""The in-process cache of action policies and the change marker that keeps every process current."""

import itertools
import logging
import math
import threading
import time
from dataclasses import dataclass, field, replace

from django.db import DatabaseError

from ...backends.resp import bulk
from ...common.choices import ContentAnswer, Mode, OnBackendFailure, Reason, Scope
from ...conf import MAX_BUCKET_SIZE, MAX_LOG_ENTRIES, settings
from ...models import ActionPolicy, MemberOverride
from ..background.poller import UNREAD, announce, out_of_date, poller
from ..keys import SLIDING_LOG, TOKEN_BUCKET, policies_version_key
from ..refusal_memory import local_refusals

# Plain strings: PolicySpec fields are compared on every decision.
ENFORCE, SHADOW = Mode.ENFORCE.value, Mode.SHADOW.value
MEMBER, SITE = Scope.MEMBER.value, Scope.SITE.value

_serials = itertools.count(1)


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
    # Repeated content (see Guide › Repeated content): a member's repeats, different members' posts
    # of one content (a wave), within a period of seconds; None: no such limit.
    same_content_max: int | None = None
    same_content_members: int | None = None
    same_content_period: int | None = None
    # The reason of an admission: Reason.SHADOW under a block in shadow mode (see engine.measures).
    admitted: str = Reason.ADMITTED.value
    # Held for review (see Guide › Held for review): a repeat or a wave is held, not refused; a
    # member's posts are held until this many of their held posts were approved (None: never).
    content_holds: bool = False
    hold_until_approved: int | None = None
    # Why an admission under this spec is held (Reason.BLOCKED, Reason.NEW_MEMBER), or "": see holding().
    held: str = ""
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
        # Unique to this spec for the life of the process (never reused, unlike id()): what
        # decide.plan() remembers a decision's shape by.
        object.__setattr__(self, "serial", next(_serials))

    def scaled(self, multiplier, content=1):
        """This policy with every window's maximum multiplied (at least 1, within the algorithm's cap),
        and its repeated-content limits by `content` (a surge's multiplier: at least 1 each)."""
        if multiplier == 1 and content == 1:
            return self
        spec = self._scaled.get((multiplier, content))
        if spec is None:
            cap = MAX_BUCKET_SIZE if self.algorithm == TOKEN_BUCKET else MAX_LOG_ENTRIES
            windows = tuple((p, min(cap, max(1, math.floor(m * multiplier + 1e-9)))) for p, m in self.windows)
            limits = {}
            if content != 1:
                for name in ("same_content_max", "same_content_members"):
                    limit = getattr(self, name)
                    if limit:
                        limits[name] = max(1, math.floor(limit * content + 1e-9))
            spec = self._scaled[(multiplier, content)] = replace(self, windows=windows, **limits)
        return spec

    def holding(self, reason):
        """This policy with its admissions held for review, for `reason` (see Guide › Held for review)."""
        if self.held == reason:
            return self
        spec = self._scaled.get(reason)
        if spec is None:
            spec = self._scaled[reason] = replace(self, held=reason)
        return spec


class PolicyCache:
    """Policies of every action, loaded in one go and kept in process.

    Steady state costs no SQL and no Redis command. Saving a policy clears this
    process's copy, bumps a change marker in Redis and publishes its new value on
    the change channel; each process's background thread marks its copy stale when
    the message arrives (or when its read of the marker, every
    THROTTLING_POLICY_REFRESH seconds, finds it moved), so the next decision
    reloads it: an edit is live everywhere at once, within a second if the message
    was missed (see Architecture › Policies in every process).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._seen = UNREAD  # the marker as the background thread read it last
        self._own = None  # the value this process's own last save gave the marker, until its message comes back
        self._companions = []
        self.clear()
        poller.watch(policies_version_key, self._marker_read)

    def accompany(self, companion):
        """Load another cache of rows moderators edit (blocks and surges) with the policies.

        Each reload of the policies calls `companion.load_if_due()`; a companion that learns it is
        out of date calls touch(), so the next decision reloads (in a thread, for async code).
        """
        self._companions.append(companion)

    def touch(self):
        """Make the next decision reload (a companion's rows changed)."""
        self._stale = True

    def clear(self):
        self._policies = None
        self.overrides = {}
        self._version = UNREAD
        self._loaded_at = 0.0
        self._stale = False

    def get(self, action):
        if poller.thread is None:
            poller.start()
        # Read once: another thread may clear() the attribute at any moment.
        policies = self._policies
        if policies is None or self._stale or time.monotonic() - self._loaded_at > settings.POLICY_MAX_AGE:
            policies = self._reload()
        return policies.get(action)

    def cached(self, action):
        """(True, the action's policy) when get() would do no I/O now; (False, None) otherwise."""
        policies = self._policies
        if policies is None or self._stale or time.monotonic() - self._loaded_at > settings.POLICY_MAX_AGE:
            return False, None
        if poller.thread is None:
            poller.start()
        return True, policies.get(action)

    def get_cached(self, action):
        """The action's policy as last loaded, without any I/O (None when none is loaded)."""
        return (self._policies or {}).get(action)

    def actions(self):
        self.get("")
        return sorted(self._policies or ())

    def _marker_read(self, version, pushed=False):
        """The background thread read the change marker, or a message of the change channel
        (`pushed`) gave its new value: a version other than the one loaded (a save, or the marker
        lost with Redis), or any message, makes the next decision reload, and ends the refusals
        the old policies and overrides decided."""
        self._seen = version
        if out_of_date(self, version, pushed):
            self._stale = True
            local_refusals.clear()

    def _reload(self):
        with self._lock:
            # The version the thread saw last, taken before the rows are read: a save after it
            # moves the marker again, and the thread marks this copy stale.
            version, before = self._seen, self._version
            self._stale = False
            # Taken as loaded before the rows are read: the background thread reading this same
            # marker value meanwhile is no change, where comparing it with the version of the copy
            # being replaced would make the next decision read the rows again for nothing.
            self._version = version
            try:
                policies = load_policies()
                overrides = load_overrides()
            except DatabaseError:
                logger.exception("throttling: could not load action policies")
                self._version = before  # the next marker read finds the copy out of date again
                return self._policies or {}
            self._policies = policies
            self.overrides = overrides
            self._loaded_at = time.monotonic()
            # After the policies are in place: a marker read meanwhile finds them current.
            for companion in self._companions:
                companion.load_if_due()
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
            **content_limits(p),
            hold_until_approved=p.hold_until_approved,
        )
        if windows != written:
            logger.warning(
                "throttling: policy %r has a window above its algorithm's cap; decided as %s", p.action, windows
            )
    return specs


def content_limits(policy):
    """A row's repeated-content limits as PolicySpec takes them: none without a period (or per
    member on a site-wide policy, which counts everyone together), whatever else the row says."""
    period = policy.same_content_period
    if not period or policy.scope == SITE or not (policy.same_content_max or policy.same_content_members):
        return {}
    return {
        "same_content_max": policy.same_content_max or None,
        "same_content_members": policy.same_content_members or None,
        "same_content_period": period,
        "content_holds": policy.same_content_answer == ContentAnswer.HOLD,
    }


def load_overrides():
    """Member overrides in force: {user id: (OverrideSpec, ...)}. Few rows, loaded with the policies."""
    out = {}
    for o in MemberOverride.objects.active():
        expires = o.expires_at.timestamp() if o.expires_at else None
        multiplier = float(o.multiplier) if o.multiplier is not None else None
        out.setdefault(o.user_id, []).append(OverrideSpec(o.action, o.exempt, multiplier, expires))
    return {uid: tuple(specs) for uid, specs in out.items()}


policies = PolicyCache()


version_key = policies_version_key  # the name older code and the tests use


def invalidate_policies(*, broadcast=True):
    """Forget cached policies (and the refusals they decided) here and, with broadcast, tell every other process."""
    policies.clear()
    local_refusals.clear()
    if broadcast:
        announce(policies, policies_version_key, "policy change")
