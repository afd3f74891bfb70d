from django.core.management.base import BaseCommand, CommandError

from ...exceptions import BackendError
from ...penalties import resync


class Command(BaseCommand):
    help = (
        "Mirror every penalty in force from the database into Redis (after a Redis flush, "
        "restart or failover) and record penalties that have ended as expired."
    )

    def handle(self, *args, **options):
        try:
            result = resync()
        except BackendError as exc:
            raise CommandError(
                f"Redis could not be updated: {exc}. Nothing in the database was lost; run this again once Redis is back."
            ) from exc
        self.stdout.write(
            self.style.SUCCESS(
                f"Mirrored the penalties of {result['mirrored']} member(s); recorded {result['expired']} expiry(ies); "
                f"sent {result['resent']} escalation(s) no worker had completed."
            )
        )
