"""Start surge mode in the demo (every limit tightened for a while), or end it: what a moderator does in a raid."""

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

import throttling
from demo_site import DEMO_ADMIN
from throttling.common.words import local_time
from throttling.models import Surge


class Command(BaseCommand):
    help = (
        "Start surge mode: every limit of the demo multiplied by --multiplier for --minutes, as the demo's "
        "moderator, with a reason; --end ends every surge now. The admin shows a banner meanwhile."
    )

    def add_arguments(self, parser):
        parser.add_argument("--multiplier", default="0.5", help="below 1: 0.5 halves every limit (default 0.5)")
        parser.add_argument("--minutes", type=int, default=30, help="how long it lasts (default 30)")
        parser.add_argument("--reason", default="Raid on the demo's front page", help="kept with the surge")
        parser.add_argument("--actions", default="", help="only these actions, comma-separated (default: all)")
        parser.add_argument("--end", action="store_true", help="end every surge in force instead")

    def handle(self, *args, **options):
        moderator = get_user_model().objects.filter(username=DEMO_ADMIN).first()
        if options["end"]:
            ended = throttling.end_surge(by=moderator, reason=options["reason"])
            if not ended:
                self.stdout.write("No surge was on.")
            for surge in ended:
                self.stdout.write(self.style.SUCCESS(f"Ended: {surge}. The limits are back within a second."))
            return
        try:
            surge = throttling.start_surge(
                options["multiplier"], options["minutes"], options["reason"], options["actions"] or None, by=moderator
            )
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from exc
        self.stdout.write(
            self.style.SUCCESS(
                f"Surge mode is on: {surge} until {local_time(surge.ends_at)}. Reason: {surge.reason}\n"
                f"Every process applies it within a second; the admin (/admin/throttling/) shows a banner. "
                f"End it early with: python manage.py demo_surge --end"
            )
        )
        others = Surge.objects.in_force(timezone.now()).exclude(pk=surge.pk).count()
        if others:
            self.stdout.write(f"{others} other surge(s) are on too; the smallest multiplier applies.")
