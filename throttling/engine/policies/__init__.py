"""Policies in every process: the cache and its change marker, declared policies, trust tiers and overrides."""

from ...common.moved import forward

# Names of the module this package replaced (see Architecture › Moved modules).
__getattr__ = forward(__name__)
