"""The documented path of ActionThrottleMiddleware (MIDDLEWARE = [..., "throttling.middleware.ActionThrottleMiddleware"]).

The adapter lives in throttling/adapters/middleware.py, beside the other adapters.
"""

from .adapters.middleware import ActionThrottleMiddleware

__all__ = ["ActionThrottleMiddleware"]
