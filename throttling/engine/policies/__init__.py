"""Policies in every process: the cache and its change marker, declared policies, trust tiers and overrides."""
