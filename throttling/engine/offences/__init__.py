"""Offences: a refused attempt recorded, counted for the report, and escalated by task name."""

from ...common.moved import forward

# Names of the module this package replaced (see Architecture › Moved modules).
__getattr__ = forward(__name__)
