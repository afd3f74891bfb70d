"""A block's first refusal: told to moderators once, whichever process saw it first."""

from django.db import transaction
from django.utils import timezone

from ..common.choices import AlertKind
from ..models import Block
from .alerts import tell


def first_refusal(block_id, action, now=None):
    """Record that block `block_id` refused a request of `action`; the first time anywhere, tell the
    moderators. True when this call was the first."""
    now = now or timezone.now()
    with transaction.atomic():
        # The conditional update lets exactly one of the processes that each saw a first refusal through.
        if not Block.objects.filter(pk=block_id, first_refused_at__isnull=True).update(first_refused_at=now):
            return False
        block = Block.objects.select_related("user").get(pk=block_id)
        tell(
            AlertKind.BLOCK_REFUSED,
            target=block.target_display(),
            action=action,
            reason=block.reason,
            severity=block.severity,
            block=block.pk,
        )
    return True
