"""The Redis mirror of penalties in force, and the resync that restores it and records expiries."""

import logging

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext

from .. import signals
from ..backends.redis import get_backend
from ..conf import settings
from ..engine.deciding.penalty_codec import PenaltyInfo
from ..engine.keys import member_penalty_key
from ..engine.offences.escalations import resend_unsent
from ..engine.refusal_memory import local_refusals
from ..models import RESTRICTING, Penalty, PenaltyEvent

logger = logging.getLogger("throttling")


def announce(signal, penalty, **kwargs):
    """Send `signal` about `penalty` (run on commit)."""
    signal.send(sender=type(penalty), penalty=penalty, **kwargs)


def announce_on_commit(signal, penalty, **kwargs):
    """Send `signal` about `penalty` once the transaction commits; a receiver that raises is logged.

    The callback is a function, never a partial: Django names a robust callback that raised by its
    __qualname__, which a partial lacks, and the AttributeError would escape from the commit."""

    def send_signal():
        announce(signal, penalty, **kwargs)

    transaction.on_commit(send_signal, robust=True)


def mirror_members(user_ids, now=None, chunk=500):
    """Write the Redis mirror of these members' penalties in force (or remove it).

    Per member and scope (an action, or "*" for all actions) the penalty in
    force that ends last is mirrored; the hash expires with the longest one.
    """
    now = now or timezone.now()
    user_ids = list(dict.fromkeys(user_ids))
    for start in range(0, len(user_ids), chunk):
        ids = user_ids[start : start + chunk]
        by_user = {uid: {} for uid in ids}
        for p in Penalty.objects.active(now).filter(user_id__in=ids).order_by("ends_at"):
            by_user[p.user_id][p.action or "*"] = p  # ordered by end: the last one wins
        mirrors = []
        for uid, scopes in by_user.items():
            fields = {scope: PenaltyInfo.of(p).encode() for scope, p in scopes.items()}
            expire_at = max((int(p.ends_at.timestamp() * 1000) + 1 for p in scopes.values()), default=0)
            mirrors.append((member_penalty_key(uid), expire_at, fields))
        get_backend().mirror_penalties(mirrors)
    # Refusals cached in any process may be this penalty's, or end with it (see Architecture › Floods answered locally).
    local_refusals.end_everywhere()


def record_expiries(now=None):
    """Mark penalties that have ended as expired, with an event and a signal. Returns how many."""
    now = now or timezone.now()
    ended = Penalty.objects.filter(RESTRICTING, ends_at__lte=now, lifted_at__isnull=True, expired_at__isnull=True)
    count = 0
    for penalty in ended.iterator():
        with transaction.atomic():
            # The conditional update makes concurrent resyncs record each expiry once.
            if not Penalty.objects.filter(pk=penalty.pk, expired_at__isnull=True, lifted_at__isnull=True).update(
                expired_at=now
            ):
                continue
            penalty.expired_at = now
            PenaltyEvent.objects.create(
                penalty=penalty,
                kind=PenaltyEvent.Kind.EXPIRED,
                at=now,
                details=gettext("Ended at %(end)s; the strike still counts.") % {"end": penalty.ends_at.isoformat()},
            )
            announce_on_commit(signals.penalty_expired, penalty)
        count += 1
    return count


def resync(now=None):
    """Re-mirror every member whose penalties could be in Redis; record expiries.

    After a Redis flush or failover the penalties in force hold again; a lift
    that could not reach Redis takes effect. Escalations no worker has
    completed are sent again (see resend_unsent), never applied twice: a run
    with its penalty already in the database is only closed. Returns
    {"mirrored": n, "expired": m, "resent": k}.
    """
    now = now or timezone.now()
    expired = record_expiries(now)
    # Members with a penalty ending in the future, lifted or not: a lifted one
    # may still be in Redis if the lift could not reach it.
    user_ids = list(Penalty.objects.filter(ends_at__gt=now).values_list("user_id", flat=True).distinct())
    mirror_members(user_ids, now)
    resent = 0
    if settings.PENALTIES:
        try:
            resent = resend_unsent(applied=_runs_with_a_penalty)
        except Exception as exc:  # the broker is still down: they wait for the next resync
            logger.error("throttling: unsent escalations not sent again yet: %s", exc)
    return {"mirrored": len(user_ids), "expired": expired, "resent": resent}


def _runs_with_a_penalty(runs):
    return set(Penalty.objects.filter(crossing__in=list(runs)).values_list("crossing", flat=True))
