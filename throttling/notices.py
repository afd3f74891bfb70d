"""The documented path of penalty notices: "throttling.notices.PenaltyNoticeMiddleware" and
"throttling.notices.context_processor" in settings.

They live in throttling/adapters/penalty_notices.py, beside the other adapters.
"""

from .adapters.penalty_notices import EXTRA_TAGS, Notice, PenaltyNoticeMiddleware, claim, context_processor, mark_shown

__all__ = ["EXTRA_TAGS", "Notice", "PenaltyNoticeMiddleware", "claim", "context_processor", "mark_shown"]
