"""Where the engine reports what it decided and sent, for whoever measures it.

Every hook is a no-op until throttling.metrics replaces them (THROTTLING_METRICS):
the engine calls them unconditionally, and a call to an empty function is the
whole cost when metrics are off.
"""

# What became of an escalation (the outcome label of throttling_escalations_total).
QUEUED = "queued"  # recorded in Redis and handed to the sender thread
SENT = "sent"  # the broker took the task
KEPT_FOR_RESEND = "kept_for_resend"  # the send failed: the record waits in Redis for the next resync
RESENT = "resent"  # a resync sent it again
APPLIED = "applied"  # a worker applied the rung (a new penalty)
LOST = "lost"  # the send failed and Redis could not keep the record either
ESCALATION_OUTCOMES = (QUEUED, SENT, KEPT_FOR_RESEND, RESENT, APPLIED, LOST)


def decided(decision, seconds):
    """A decision was made (by Redis, locally, or without Redis); `seconds` it took."""


def refused_locally(decision):
    """A refusal was answered from this process's memory, without a Redis call."""


def escalation(outcome):
    """An escalation was queued, sent, kept for resend, resent, applied or lost (one of ESCALATION_OUTCOMES)."""


def backend_error():
    """A Redis call failed (the decision failed open or closed)."""
