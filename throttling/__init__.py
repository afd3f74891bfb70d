"""Action throttling for Django communities: exact under concurrency, edited in the admin."""

from importlib import import_module

from .common import moved

__version__ = "0.2.0"

# The public API and the module that defines each name (a bare name is an engine module).
_API = {
    "Decision": "decision",
    "check": "api",
    "peek": "api",
    "acquire": "api",
    "reset": "api",
    "refund": "api",
    "is_action_allowed": "api",
    "acheck": "asyncapi",
    "apeek": "asyncapi",
    "areset": "asyncapi",
    "arefund": "asyncapi",
    "invalidate_policies": "policies.cache",
    "start_surge": "throttling.raids.surge_mode",
    "end_surge": "throttling.raids.surge_mode",
    # Held for review: hide and queue what a held decision let a member save, and the verdicts.
    "hold": "throttling.held.service",
    "holding": "throttling.held.hiding",
    "approve": "throttling.held.service",
    "reject": "throttling.held.service",
}

# Above the engine: what a policy would have done to the site's history.
_REPLAYER = {
    "replay": "throttling.replayer.replays",
    "suggest": "throttling.replayer.suggestions",
}

__all__ = [*_API, *_REPLAYER]


def __getattr__(name):
    # The API needs Django's app registry (it reads models); importing it lazily
    # keeps `import throttling` (e.g. in setup.cfg) free of side effects.
    module = _API.get(name) or _REPLAYER.get(name)
    if module is None:
        raise AttributeError(f"module 'throttling' has no attribute {name!r}")
    value = getattr(import_module(module if module.startswith("throttling.") else f"throttling.engine.{module}"), name)
    # Kept as a module attribute: the next `throttling.check` is a plain lookup, not this call.
    globals()[name] = value
    return value


# Old paths of modules that moved still import (see throttling/common/moved.py).
moved.install()
