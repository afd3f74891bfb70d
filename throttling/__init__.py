"""Action throttling for Django communities: exact under concurrency, edited in the admin."""

__version__ = "0.1.0"

__all__ = [
    "Decision",
    "check",
    "peek",
    "acquire",
    "reset",
    "refund",
    "is_action_allowed",
    "acheck",
    "apeek",
    "areset",
    "arefund",
]


def __getattr__(name):
    # The API lives in core, which needs Django's app registry; importing it
    # lazily keeps `import throttling` (e.g. in setup.cfg) free of side effects.
    if name in __all__:
        from . import core

        return getattr(core, name)
    raise AttributeError(f"module 'throttling' has no attribute {name!r}")
