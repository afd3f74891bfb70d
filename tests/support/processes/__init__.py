"""Processes the tests start: Redis topologies, Celery workers, web servers, reporting processes."""
