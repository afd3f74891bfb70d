"""The documented path of the DRF adapter: `from throttling.throttles import ActionThrottle`.

The adapter lives in throttling/adapters/drf.py, beside the other adapters.
"""

from .adapters.drf import ActionThrottle, ActionThrottled

__all__ = ["ActionThrottle", "ActionThrottled"]
