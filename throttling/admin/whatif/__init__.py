"""The policy page's "What would this do?": the replay view and its figures."""

from ...common.moved import forward

# Names of the module this package replaced (see Architecture › Moved modules).
__getattr__ = forward(__name__)
