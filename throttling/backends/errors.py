"""What Redis errors mean for the throttle: their codes, and the BackendError each becomes."""

from contextlib import contextmanager

from redis.exceptions import (
    AskError,
    BusyLoadingError,
    ClusterDownError,
    MasterDownError,
    MovedError,
    NoScriptError,
    ReadOnlyError,
    RedisError,
    TryAgainError,
)
from redis.exceptions import TimeoutError as RedisTimeoutError

from ..exceptions import BackendError, BackendTimeout

_ERROR_WORDS = (
    (MovedError, "MOVED"),  # before AskError, its base class
    (AskError, "ASK"),
    (NoScriptError, "NOSCRIPT"),
    (ReadOnlyError, "READONLY"),
    (MasterDownError, "MASTERDOWN"),
    (BusyLoadingError, "LOADING"),
    (TryAgainError, "TRYAGAIN"),
    (ClusterDownError, "CLUSTERDOWN"),
)


def error_word(exc):
    """(the error's code, the rest of its message): redis-py's parser drops the code of the
    errors it knows, hiredis keeps it."""
    message = str(exc)
    word, _, rest = message.partition(" ")
    if word.isupper():
        return word, rest
    for cls, name in _ERROR_WORDS:
        if isinstance(exc, cls):
            return name, message
    return "", message


@contextmanager
def as_backend_error():
    """Every Redis failure leaves the backends as BackendError (BackendTimeout when the reply did
    not come in time), never as a 500."""
    try:
        yield
    except RedisError as exc:
        raise backend_error(exc) from exc


def backend_error(exc):
    """The BackendError a Redis failure becomes (BackendTimeout when the reply did not come in time)."""
    error = BackendTimeout if isinstance(exc, RedisTimeoutError) else BackendError
    return error(f"{type(exc).__name__}: {exc}")
