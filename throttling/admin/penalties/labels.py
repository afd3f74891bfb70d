"""Words of the penalty admin shared by its pages: statuses and levels."""

from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

STATUS_LABELS = {
    "active": _("active"),
    "scheduled": _("scheduled"),
    "warning": _("warning"),
    "expired": _("expired"),
    "lifted": _("lifted"),
}


def level_words(penalty, rung_name, rung_duration):
    """ "2. 15 minutes"; the rung's name only when the penalty has the rung's length.

    A moderator's custom-length penalty is recorded at the member's next level,
    and naming that rung ("1. Warning" on a two-hour block) would mislead.
    """
    if rung_name and rung_duration == penalty.ends_at - penalty.starts_at:
        return f"{penalty.level}. {rung_name}"
    if rung_name:
        return gettext("%(level)d (custom length)") % {"level": penalty.level}
    return str(penalty.level)
