"""Exceptions raised by the throttling app."""


class ThrottlingError(Exception):
    """Base class of the app's own errors."""


class BackendError(ThrottlingError):
    """Redis could not answer a decision (refused, timed out, flushed, misconfigured)."""


class BackendTimeout(BackendError):
    """A command was sent but its reply did not come in time: Redis may still run it."""


class ImproperlyConfiguredBackend(BackendError):
    """THROTTLING_REDIS_URL cannot be read, or THROTTLING_CACHE_ALIAS does not name a django-redis cache."""
