"""The documented path of the plain-view adapter: `from throttling.decorators import throttle_action`.

The adapter lives in throttling/adapters/decorators.py, beside the other adapters.
"""

from .adapters.decorators import throttle_action

__all__ = ["throttle_action"]
