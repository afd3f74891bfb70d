"""The app's models, one idea per module; every model (and the messages of their checks) is importable from here."""

from .alerts import Alert
from .blocks import Block, canonical_actions, parse_actions, parse_network
from .fields import LOG_CAP_MESSAGE, MAX_COUNT_MESSAGE, OFFENCE_THRESHOLD_HELP, PERIOD_MESSAGE
from .held import Held, HeldQuerySet
from .offences import OffenceRecord
from .penalties import RESTRICTING, WARNING, Penalty, PenaltyEvent, PenaltyQuerySet, PenaltyStep, active_q
from .policies import (
    ActionPolicy,
    ActionPolicyManager,
    ActionWindow,
    MemberOverride,
    MemberOverrideQuerySet,
    PolicyTier,
)
from .surges import Surge, SurgeTrigger

__all__ = [
    "LOG_CAP_MESSAGE",
    "MAX_COUNT_MESSAGE",
    "OFFENCE_THRESHOLD_HELP",
    "PERIOD_MESSAGE",
    "RESTRICTING",
    "WARNING",
    "ActionPolicy",
    "ActionPolicyManager",
    "ActionWindow",
    "Alert",
    "Block",
    "Held",
    "HeldQuerySet",
    "MemberOverride",
    "MemberOverrideQuerySet",
    "OffenceRecord",
    "Penalty",
    "PenaltyEvent",
    "PenaltyQuerySet",
    "PenaltyStep",
    "PolicyTier",
    "Surge",
    "SurgeTrigger",
    "active_q",
    "canonical_actions",
    "parse_actions",
    "parse_network",
]
