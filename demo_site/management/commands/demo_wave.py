"""Play a wave of spam accounts posting the same link as replies, until the repeated-content limit stops it."""

from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from demo_site.management.playing import add_addr_argument, detail_of, played_member, reach, sandbox_thread
from throttling.choices import ContentAnswer, HeldStatus
from throttling.models import ActionPolicy, Held

LINK = "https://quick-cash.example/join?ref=8812"
# What each account of the wave posts: the same spam, each a little different, as waves are.
WAVE = (
    f"Hey everyone, I found this amazing site that pays you to test apps from home. I made 300 dollars last week "
    f"in my spare time and no experience is needed. Sign up with my link and get a bonus today: {LINK}",
    f"Hey everyone, I found this incredible site that pays you to test apps from home. I made 300 dollars last "
    f"week in my spare time and no experience is needed. Sign up with my link and get a bonus today: {LINK}",
    f"HEY EVERYONE 👋 I found this amazing site that pays you to test apps from home!!! I made 300 dollars last "
    f"week in my spare time and no experience is needed. Sign up with my link and get a bonus today: "
    f"{LINK}&utm_source=forum",
    f"I made 300 dollars last week in my spare time and no experience is needed. Hey everyone, I found this "
    f"amazing site that pays you to test apps from home. Sign up with my link and get a bonus today: {LINK}",
)
# Set on the "reply" policy when it has no limit on repeated content, as a moderator would in the admin.
LIMITS = {"same_content_max": 1, "same_content_members": 3, "same_content_period": 600}


class Command(BaseCommand):
    help = (
        "Play a wave of spam: several new accounts reply the same link (a word changed, an emoji or a "
        "tracking parameter added) until the repeated-content limit refuses the wave. Talks to the running "
        "demo (DEMO_ADDR) when it answers, else calls the views in this process."
    )

    def add_arguments(self, parser):
        parser.add_argument("--accounts", type=int, default=6, help="accounts in the wave (default 6)")
        parser.add_argument(
            "--hold",
            action="store_true",
            help="hold the wave for review instead of refusing it: its replies are saved hidden and wait in "
            "Throttling › Held for review",
        )
        add_addr_argument(parser)

    def say(self, text="", style=None):
        self.stdout.write(style(text) if style else text)

    def handle(self, *args, accounts, addr, hold=False, **options):
        if accounts < 2:
            raise CommandError("--accounts must be at least 2: a wave is several members.")
        base = f"http://{addr}"
        policy = self.limited_policy()
        if hold and policy.same_content_answer != ContentAnswer.HOLD:
            policy.same_content_answer = ContentAnswer.HOLD
            policy.save()  # live in every process at once, as an admin edit is
            self.say("The “reply” policy now holds repeated content for review instead of refusing it.")
        members = policy.same_content_members
        self.say(
            f"The “reply” policy lets {members} different member{'s' if members != 1 else ''} post the same "
            f"content within {policy.same_content_period} s"
            + (f", and each member {policy.same_content_max} time(s)." if policy.same_content_max else ".")
        )
        demo = reach(base)
        self.say(f"A wave of {accounts} accounts replies the same link against {demo.description}:")
        sandbox = sandbox_thread(played_member("wave-1"))
        path = reverse("api-replies", args=[sandbox.pk])
        admitted = refused = held = 0
        for n in range(1, accounts + 1):
            account = played_member(f"wave-{n}")
            demo.login(account)
            before = _queued()
            status, payload = demo.send("POST", path, {"body": WAVE[(n - 1) % len(WAVE)]})
            if status < 400 and _queued() > before:
                held += 1
                self.say(f"  {account.get_username():<8} held     {status}  saved hidden, waiting for a moderator")
            elif status < 400:
                admitted += 1
                self.say(f"  {account.get_username():<8} admitted {status}")
            elif status == 429:
                refused += 1
                self.say(f"  {account.get_username():<8} refused  {status}  {detail_of(payload)}", self.style.WARNING)
            else:
                raise CommandError(f"Unexpected answer {status} to POST {path}: {detail_of(payload)}")
        # The first account tries its post again: its own repeat.
        first = played_member("wave-1")
        demo.login(first)
        before = _queued()
        status, payload = demo.send("POST", path, {"body": WAVE[0]})
        if status < 400 and _queued() > before:
            held += 1
            self.say(f"  wave-1   again    {status}  held for review")
        else:
            self.say(f"  wave-1   again    {status}  {detail_of(payload)}")
        if held:
            self.say(
                f"{admitted} admitted, {held} held for review: hidden from readers until a moderator approves "
                f"them, or rejects them as refused attempts: {base}{reverse('admin:throttling_held_changelist')}",
                self.style.SUCCESS,
            )
            return
        if refused == 0:
            raise CommandError("Nothing was refused: is the repeated-content limit on the “reply” policy in force?")
        self.say(
            f"{admitted} admitted, {refused} refused as a wave. Only hashes of the text reached Redis. The report "
            f"shows the refusals as “reply, repeated content”: {base}{reverse('admin:throttling_report')}",
            self.style.SUCCESS,
        )

    def limited_policy(self):
        policy = ActionPolicy.objects.filter(action="reply").first()
        if policy is None or not policy.enabled:
            raise CommandError("The “reply” policy is missing or disabled: add or enable it in the admin.")
        if not policy.same_content_period:
            for name, value in LIMITS.items():
                setattr(policy, name, value)
            policy.full_clean()
            policy.save()  # live in every process at once, as an admin edit is
            self.say("The “reply” policy had no limit on repeated content: set one, as a moderator would in the admin.")
        return policy


def _queued():
    """How many replies wait in the review queue."""
    return Held.objects.filter(action="reply", status=HeldStatus.PENDING).count()
