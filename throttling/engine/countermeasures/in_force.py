"""Blocks and surges in force, kept in every process like the policies: what a decision asks before Redis.

`measures.applied()` is the one question decide.plan() asks, and only while a block, a surge or a
surge trigger exists: a refusal (a block that refuses), or the policy with every window multiplied
(surges, blocks that tighten or loosen), or the policy reporting its admissions as shadow refusals.
It costs no Redis command and no SQL (see Raids › Decided in the process).

Surges and triggers are few rows, loaded with the policies (on the request thread, or in a thread
for async code). Blocks may be many: loaded there once, at a process's first decision, and from
then on read and indexed again by a thread of their own, the builder, while decisions go on with
the index in place; the new one replaces it in one assignment. A change marker of their own, moved
by every save or delete, tells each process's background thread to have both read again: a change
is live everywhere within a second (see Raids › While blocks are indexed again).
"""

import logging
import os
import threading
import time
from dataclasses import replace
from urllib.parse import unquote

from django.db import DatabaseError, connections

from ...backends.redis import get_backend
from ...common.choices import Reason
from ...conf import settings
from ..background.poller import UNREAD, announce, out_of_date, poller
from ..background.task_sender import sender
from ..decision import Decision
from ..identity import MEMBER_PREFIX, client_number
from ..keys import measures_version_key
from ..offences.report_batches import buffer
from ..policies.cache import MEMBER, policies
from ..refusal_memory import local_refusals
from .block_lookup import (
    EXPIRES_AT,
    HOLD,
    LOOSEN,
    MULTIPLIER,
    PK,
    REFUSE,
    REFUSED_BEFORE,
    SEVERITY,
    SHADOW,
    TIGHTEN,
    BlockSet,
    fingerprint,
    load_blocks,
)
from .surge_state import SurgeSet, TriggerCounts, load_surges

logger = logging.getLogger("throttling")

BLOCKED = Reason.BLOCKED.value
SHADOWED = Reason.SHADOW.value
# Seconds a member refused by a block without an end is told to wait (Retry-After): long enough
# that nobody hammers, short enough that a block deleted meanwhile is not waited out for long.
BLOCK_RETRY_AFTER = 3600
REFUSED_TASK = "throttling.tasks.block_refused"
ENDED_TASK = "throttling.tasks.surge_ended"
_SHADOWED_MAX = 1024
# Seconds before a read of the blocks that failed (the database unreachable) is tried again by the
# builder; the index in place stays in force meanwhile.
BUILD_RETRY = 5.0
# Seconds forget() waits for a build under way to end.
BUILD_JOIN = 30.0


class Measures:
    """The blocks and surges of this process, and the hook a decision calls while any exists."""

    def __init__(self):
        self._lock = threading.Lock()  # one load of the surges at a time
        self._blocks_lock = threading.Lock()  # one read of the blocks at a time: the first load, or the builder's
        self._swap = threading.Lock()  # what is in force replaced, and `active` with it
        self._builder_lock = threading.Lock()
        self._builder = None  # the builder thread while it runs
        self._wanted = False  # the builder has a check of the blocks to do
        self._generation = 0  # moved by forget(): a build begun before it is not put in force
        self._seen = UNREAD  # the marker as the background thread read it last
        self._own = None  # the marker's value after this process's own last save, until its message comes back
        self.counts = TriggerCounts()
        self.forget()
        os.register_at_fork(after_in_child=self._forked)
        poller.watch(measures_version_key, self._marker_read)
        poller.every_look(self.flush)
        poller.every_look(self.check_if_due)
        policies.accompany(self)

    def forget(self):
        """Forget what was loaded: the next decision loads it again. A build under way is waited for,
        and not put in force."""
        with self._builder_lock:
            self._generation += 1
            self._wanted = False
            # From here no check starts a builder (check_blocks asks under this lock) until the next
            # decision loads: a look of the background thread meanwhile cannot start a read behind
            # the join below.
            self._deciding = False
            builder = self._builder
        if builder is not None and builder is not threading.current_thread():
            builder.join(BUILD_JOIN)
        with self._swap:
            self.blocks = BlockSet()
            self.surges = SurgeSet()
            # False while no block, surge or trigger exists: then decisions never call applied().
            self.active = False
            self._fingerprint = None  # the blocks' fingerprint() when they were indexed; None: never
        # True once this process's first decision began loading the blocks: only a process that
        # decides keeps an index (a Celery worker or an admin-only process starting a surge does not).
        self._deciding = False
        self._version = UNREAD
        self._due = True
        self._loaded_at = 0.0
        self._checked_at = 0.0  # when the builder was last asked to check the blocks
        self._failed = False  # the builder's last read of the blocks failed
        self._told = set()  # blocks whose first refusal this process has reported
        self._ended = set()  # surges whose end this process has reported
        self._shadowed = {}  # policy serial -> the same policy admitting as shadow
        policies.touch()

    def _forked(self):
        # A forked child has no builder, and no lock its parent's threads held is held in it: a
        # build its parent had under way is done again at the child's first look.
        self._lock, self._blocks_lock = threading.Lock(), threading.Lock()
        self._swap, self._builder_lock = threading.Lock(), threading.Lock()
        if self._builder is not None or self._wanted:
            self._checked_at = -float("inf")
        self._builder, self._wanted = None, False

    # -- loading -------------------------------------------------------------

    def load_if_due(self):
        """Surges and triggers when the marker moved, at first use and every THROTTLING_POLICY_MAX_AGE
        seconds; blocks at first use only (called by the policy cache as it reloads)."""
        if not self._due and self._deciding and time.monotonic() - self._loaded_at <= settings.POLICY_MAX_AGE:
            return
        with self._lock:
            self._deciding = True
            # The marker's value before the rows are read, current from now on: the background
            # thread's read during the load finds it unchanged, and a save after it moves it again.
            version, previous = self._seen, self._version
            self._version, self._due = version, False
            generation = self._generation
            try:
                surges = load_surges()
                if self._fingerprint is None:
                    # A process's first load: with no index in place, nothing could decide a
                    # blocked request meanwhile, so this decision waits for it (see Raids ›
                    # While blocks are indexed again). Later changes are the builder's.
                    self._read_blocks(generation)
            except DatabaseError:
                logger.exception("throttling: could not load blocks and surges; those loaded before stay in force")
                self._version = previous
                # Blocks never loaded: the builder tries again (decisions meanwhile apply none).
                self._failed = self._fingerprint is None
                return
            with self._swap:
                if generation != self._generation:
                    return
                replaced, self.surges = self.surges, surges
                self._shadowed = {}
                self.active = bool(self.blocks.count or surges)
            self._loaded_at = time.monotonic()
            # Only surges in force are loaded: one whose end passed since the background thread's
            # last look is told now, or never by this process.
            self._tell_ended(replaced)

    def _read_blocks(self, generation):
        """Read the blocks' fingerprint, and the blocks themselves into a new index when it moved; the
        index in place is replaced in one assignment once the new one is built."""
        with self._blocks_lock:
            self._checked_at = time.monotonic()
            found = fingerprint()
            if found == self._fingerprint:
                return
            blocks = load_blocks()
            with self._swap:
                if generation != self._generation:
                    return  # forgotten meanwhile: the next decision loads what is current
                self.blocks, self._fingerprint = blocks, found
                self.active = bool(blocks.count or self.surges)
        # Refusals decided under the index replaced (a block tightening a range) end with it.
        local_refusals.clear()

    def check_blocks(self):
        """Have the builder thread read the blocks' fingerprint, and index them again if it moved.
        Returns at once: decisions go on with the index in place until the new one replaces it."""
        with self._builder_lock:
            if not self._deciding:
                return  # the first decision loads them (asked under the lock: see forget)
            self._checked_at = time.monotonic()
            self._wanted = True
            if self._builder is not None:
                return  # it checks again when its build is done
            thread = threading.Thread(target=self._build, name="throttling-blocks", daemon=True)
            try:
                thread.start()
            except RuntimeError:  # the interpreter is exiting: no thread may start
                return
            self._builder = thread

    def check_if_due(self):
        """The background thread's look: blocks checked every THROTTLING_POLICY_MAX_AGE seconds once
        loaded, and BUILD_RETRY seconds after a read that failed."""
        wait = BUILD_RETRY if self._failed else settings.POLICY_MAX_AGE
        if time.monotonic() - self._checked_at >= wait:
            self.check_blocks()

    def settle(self, timeout=None):
        """Wait until the builder has no check of the blocks left to do (the new index in force, or
        none needed): True, or False when `timeout` seconds passed first. Decisions never wait for
        it; a command that imports blocks, a test or a benchmark may."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._builder_lock:
                builder = self._builder
            if builder is None:
                return True
            builder.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if builder.is_alive():
                return False

    def _build(self):
        """The builder thread: checks the blocks until no check is wanted, then ends."""
        try:
            while True:
                with self._builder_lock:
                    if not self._wanted:
                        self._builder = None
                        return
                    self._wanted = False
                    generation = self._generation
                try:
                    self._read_blocks(generation)
                except Exception:  # the index in place stays in force, whatever a read meets
                    self._failed = True
                    logger.exception(
                        "throttling: could not read the blocks; those in force stay so, tried again in %g s",
                        BUILD_RETRY,
                    )
                else:
                    self._failed = False
        finally:
            with self._builder_lock:
                if self._builder is threading.current_thread():
                    self._builder = None
            # The thread's own database connection, which no request ends.
            connections.close_all()

    def _marker_read(self, version, pushed=False):
        """The background thread read the marker, or a message of the change channel gave its value."""
        self._seen = version
        if not self._deciding:
            # Nothing loaded yet: the first load reads the rows as they are then.
            return
        if out_of_date(self, version, pushed):
            # Compared with the value read before the load began (none, if the thread had not read
            # it yet): a save during the first load is not missed, and a read that brings nothing
            # new costs a look at the surges and at the blocks' fingerprint.
            self._due = True
            policies.touch()
            # A loosened block or an ended surge must not be answered with an old refusal.
            local_refusals.clear()
            self.check_blocks()

    def changed(self, *, broadcast=True):
        """A block, surge or trigger was saved or deleted: reload here, and with broadcast in every process.

        Without broadcast (a save, inside its transaction) surges are read again by the next decision,
        which may be in that transaction; blocks are read by the builder, which sees only what is
        committed: it is asked with the broadcast, once the change is committed.
        """
        self._due = True
        policies.touch()
        local_refusals.clear()
        if broadcast:
            self.check_blocks()
            announce(self, measures_version_key, "a change of blocks or surges")

    def flush(self):
        """The background thread's look: trigger counts to Redis, and surges whose end has passed told
        to Celery (which tells moderators once, whichever process sends it first)."""
        surges = self.surges
        self._tell_ended(surges)
        if surges.triggers:
            self.counts.flush(get_backend(), surges)

    def _tell_ended(self, surges):
        """Send the task that tells moderators of each surge of `surges` whose end has passed, once per process."""
        if surges.surges:
            now = time.time()
            for surge in surges.surges:
                if surge.ends_at <= now and surge.pk not in self._ended:
                    self._ended.add(surge.pk)
                    sender.send(ENDED_TASK, (surge.pk,))

    # -- the request path ---------------------------------------------------

    def applied(self, policy, who, user, identity, cost, record, member=None):
        """`policy` as the blocks and surges in force leave it for this request, or the Decision of a
        block that refuses it. `member` is the member identity of a decision counted under a key."""
        now = time.time()
        action = policy.action
        surges = self.surges
        if record and action in surges.triggers:
            self.counts.add(action, cost)
        multiplier = surges.multiplier(action, now) if surges.surges else 1
        # A surge multiplies the repeated-content limits too; a block's tightening is the member's
        # windows alone (see Raids › Surge mode).
        content = multiplier
        blocks = self.blocks
        if blocks.count:
            number = client_number(who) if blocks.ranges and hasattr(who, "META") else None
            block = blocks.find(action, number, _member_key(user, member), now)
            if block is not None:
                severity = block[SEVERITY]
                if severity == REFUSE:
                    return self._refused(policy, block, identity, user, record, now)
                if severity == SHADOW:
                    if record:
                        # Recorded as a would-be refusal, as a policy in shadow mode records them.
                        buffer.add(identity, user.pk if user is not None else None, action, shadow=True)
                    policy = self._shadow_of(policy)
                elif severity == HOLD:
                    # Admitted, and what it saves held for review (see Guide › Held for review).
                    policy = policy.holding(BLOCKED)
                elif severity in (TIGHTEN, LOOSEN) and policy.scope == MEMBER:
                    # Like an override, never a site-wide count's: it is everyone's.
                    multiplier *= block[MULTIPLIER]
        if multiplier != 1 or content != 1:
            policy = policy.scaled(round(multiplier, 4), round(content, 4) if policy.same_content_period else 1)
        return policy

    def _shadow_of(self, policy):
        spec = self._shadowed.get(policy.serial)
        if spec is None:
            if len(self._shadowed) >= _SHADOWED_MAX:
                self._shadowed = {}
            spec = self._shadowed[policy.serial] = replace(policy, admitted=SHADOWED)
        return spec

    def _refused(self, policy, block, identity, user, record, now):
        left = None if block[EXPIRES_AT] is None else max(0.0, block[EXPIRES_AT] - now)
        if record:
            buffer.add(identity, user.pk if user is not None else None, policy.action, blocked=True)
            if not block[REFUSED_BEFORE] and block[PK] not in self._told:
                # Once per process; the task tells moderators once in all (Block.first_refused_at).
                self._told.add(block[PK])
                sender.send(REFUSED_TASK, (block[PK], policy.action))
        # Never which block or range: only that the action is not available, and when to try again.
        return Decision(
            False,
            policy.action,
            0,
            0,
            max(1.0, left) if left is not None else float(BLOCK_RETRY_AFTER),
            left or 0.0,
            BLOCKED,
            identity,
            0,
            policy.verb,
            None,
            False,
            (),
            policy.windows,
        )


def _member_key(user, member):
    """The primary key (as text) of the member behind a decision, or None for a visitor."""
    if user is not None:
        return str(user.pk)
    if member is not None and member.startswith(MEMBER_PREFIX):
        return unquote(member[len(MEMBER_PREFIX) :])
    return None


measures = Measures()
