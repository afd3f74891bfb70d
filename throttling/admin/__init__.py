"""The moderators' admin, by room: policies/, penalties/, raids/, whatif/ and report/, each page's views,
forms and figures apart; importing this package registers every ModelAdmin."""

# Each module imported here registers its ModelAdmin.
from . import held  # noqa: F401
from .penalties import ladder, penalty  # noqa: F401
from .policies import override, policy  # noqa: F401
from .raids import alerts, blocks, surges  # noqa: F401
