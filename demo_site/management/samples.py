"""Sample rows the demo's commands make, marked as such: members who cannot sign in, and penalties long over."""

from django.contrib.auth import get_user_model

from throttling.models import Penalty, PenaltyEvent


def sample_member(username):
    """The member `username`, made or found, marked as sample data in their last name; no password works."""
    user, _ = get_user_model().objects.get_or_create(username=username, defaults={"last_name": "(sample data)"})
    if user.has_usable_password():
        user.set_unusable_password()
        user.save()
    return user


def ended_penalty(user, action, rung, start, reason):
    """A penalty of the ladder's `rung` on `action`, applied automatically at `start` and long over, with
    the events an escalation and the resync would have recorded."""
    ends = start + rung.duration
    penalty = Penalty.objects.create(
        user=user,
        action=action,
        level=rung.level,
        starts_at=start,
        ends_at=ends,
        reason=reason,
        automatic=True,
        expired_at=None if rung.is_warning else ends,
    )
    PenaltyEvent.objects.create(penalty=penalty, kind=PenaltyEvent.Kind.APPLIED, at=start, details=reason)
    if not rung.is_warning:
        PenaltyEvent.objects.create(penalty=penalty, kind=PenaltyEvent.Kind.EXPIRED, at=ends, details=reason)
    return penalty
