"""What moderators do against a raid: surges started and ended, blocks imported in bulk, alerts told and mailed."""

from .alerts import mail_due, moderator_emails, tell
from .bulk_import import import_blocks, parse_lines
from .first_refusals import first_refusal
from .surge_mode import end_surge, notice_ended_surges, start_surge, start_triggered_surge

__all__ = [
    "end_surge",
    "first_refusal",
    "import_blocks",
    "mail_due",
    "moderator_emails",
    "notice_ended_surges",
    "parse_lines",
    "start_surge",
    "start_triggered_surge",
    "tell",
]
