"""Benchmark of throttling against the raw script, DRF's ScopedRateThrottle and django-ratelimit."""
