"""The moderators' admin: one module per model admin, the report in its own package."""

from . import ladder, override, penalty, policy  # noqa: F401  (each registers its ModelAdmin)
