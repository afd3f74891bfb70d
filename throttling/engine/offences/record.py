"""The bookkeeping of a refused attempt: offence history, the throttled signal, the escalation."""

from ... import signals
from ...conf import settings
from ..decision import SHADOW, Decision
from ..policies.cache import SHADOW as SHADOW_MODE
from ..policies.cache import SITE
from .escalations import enqueue_escalation
from .report_batches import buffer


def record_offence(decision, user, window, crossing, run):
    """Bookkeeping of a refused attempt, in process or deferred; only a crossing also writes to Redis,
    recording its escalation before it is sent (see Architecture › Escalations are never lost)."""
    buffer.add(
        decision.identity,
        user.pk if user is not None else None,
        decision.action,
        shadow=decision.reason == SHADOW,
        duplicate=bool(decision.duplicate),
    )
    if decision.offences == 1:
        # The first refusal of an offence window: throttled after being admitted.
        signals.action_throttled.send(
            sender=Decision, action=decision.action, identity=decision.identity, user=user, decision=decision
        )
    if crossing:
        enqueue_escalation(user.pk, decision.action, run, decision.offences, window)


def offence_threshold(policy, user):
    """Offences that escalate `user` under `policy`; 0: never escalated. Only members are penalised
    (anonymous identities are only throttled), never under a site-wide or a shadow policy."""
    if user is None or policy.scope == SITE or policy.mode == SHADOW_MODE or not settings.PENALTIES:
        return 0
    return settings.OFFENCE_THRESHOLD if policy.offence_threshold is None else policy.offence_threshold
