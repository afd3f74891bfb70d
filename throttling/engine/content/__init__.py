"""Content: what a post says made comparable, and decisions that judge it in the same script call."""

from ...common.moved import forward

# Names of the module this package replaced (see Architecture › Moved modules).
__getattr__ = forward(__name__)
