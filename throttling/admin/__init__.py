"""The moderators' admin: one module per model admin, the report in its own package."""

from . import alerts, blocks, held, ladder, override, penalty, policy, surges  # noqa: F401  (each registers its ModelAdmin)
