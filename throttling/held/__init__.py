"""Held for review: hide what a held decision let a member save, queue it, and a moderator's verdict."""

from .hiding import holding
from .service import approve, hold, reject

__all__ = ["approve", "hold", "holding", "reject"]
