"""Play a wave of spam accounts posting the same link as replies, until the repeated-content limit stops it."""

from dataclasses import dataclass

from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from demo_site.management.playing import add_addr_argument, detail_of, played_member, reach, sandbox_thread
from throttling.common.choices import ContentAnswer, HeldStatus
from throttling.models import ActionPolicy, Held

LINK = "https://quick-cash.example/join?ref=8812"
_CYRILLIC = str.maketrans("aceopxyACEHKMOPTX", "асеорхуАСЕНКМОРТХ")


def _invisible(text):
    """A zero-width space inside every word: what a reader does not see."""
    return " ".join(word[:1] + "\u200b" + word[1:] if len(word) > 1 else word for word in text.split(" "))


def _fullwidth_accented(text):
    return "".join(chr(ord(c) + 0xFEE0) if c.isalpha() else c for c in text).replace("ｅ", "ｅ\u0301")


# What each account of the wave posts: the same spam, each a little different, as waves are; the
# later accounts disguise it as a reader cannot see, and are the same post all the same.
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
_SPAM = WAVE[0]
DISGUISED = (
    ("invisible characters inside every word", _invisible(_SPAM)),
    ("Cyrillic lookalike letters", _SPAM.translate(_CYRILLIC)),
    ("fullwidth letters and accents", _fullwidth_accented(_SPAM)),
    # The demo's replies take 5,000 characters at most; the tests pad with 20,000 and more.
    ("4,000 invisible characters of padding before it", "\u200b" * 4_000 + _SPAM),
    ("its link spelled another way", _SPAM.replace(LINK, "HTTP://WWW.Quick-Cash.example:80/join/?ref=8812#top")),
)
# Played after the first three: the wave's accounts disguise their posts.
WAVE = WAVE[:3] + tuple(text for _label, text in DISGUISED) + WAVE[3:]
DISGUISES = dict.fromkeys(WAVE[:3], "") | {text: label for label, text in DISGUISED}
# A short post whose link is the payload, each account spelling the link its own way.
SHORT_WAVE = (
    "Cheap pills at https://pharma.example/buy",
    "Cheap pills at http://www.pharma.example/buy/",
    "Cheap pills at HTTPS://PHARMA.EXAMPLE/buy#order",
    "Cheap pills at https://pharma.example/buy?utm_source=forum&fbclid=x1",
    "[Cheap pills at](https://pharma.example:443/buy)",
    "Ch\u200beap pills at pharma.example/buy",
)
# Set on the "reply" policy when it has no limit on repeated content, as a moderator would in the admin.
LIMITS = {"same_content_max": 1, "same_content_members": 3, "same_content_period": 600}


class Command(BaseCommand):
    help = (
        "Play a wave of spam: several new accounts reply the same link (a word changed, an emoji or a "
        "tracking parameter added, then disguised: invisible characters, lookalike letters, padding, the "
        "link spelled another way) until the repeated-content limit refuses the wave; then a short post "
        "with a link from six accounts. Talks to the running demo (DEMO_ADDR) when it answers, else calls "
        "the views in this process."
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
        tally = self.wave(demo, path, "wave", [WAVE[(n - 1) % len(WAVE)] for n in range(1, accounts + 1)])
        # The first account tries its post again, padded with invisible characters: its own repeat.
        tally += self.wave(
            demo,
            path,
            "wave",
            ["\u200b" * 4_500 + WAVE[0]],
            again=True,
            note="padded with 4,500 invisible characters",
        )
        self.say(
            f"A short post whose link is the payload, from {len(SHORT_WAVE)} accounts, each spelling the link its own way:"
        )
        tally += self.wave(demo, path, "link", SHORT_WAVE)
        admitted, refused, held = tally.admitted, tally.refused, tally.held
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
            f"{admitted} admitted, {refused} refused as repeated content (a wave, or a member's own repeat). Only "
            f"hashes of the text reached Redis. The report "
            f"shows the refusals as “reply, repeated content”: {base}{reverse('admin:throttling_report')}",
            self.style.SUCCESS,
        )

    def wave(self, demo, path, name, posts, again=False, note=""):
        """A Tally of accounts `name`-1 … posting `posts`, one each (`again`: the first account, once more)."""
        admitted = refused = held = 0
        for n, body in enumerate(posts, 1):
            account = played_member(f"{name}-{n}")
            demo.login(account)
            before = _queued()
            status, payload = demo.send("POST", path, {"body": body})
            if status >= 400 and status != 429:
                raise CommandError(f"Unexpected answer {status} to POST {path}: {detail_of(payload)}")
            outcome = "held" if status < 400 and _queued() > before else "admitted" if status < 400 else "refused"
            admitted, refused, held = (
                admitted + (outcome == "admitted"),
                refused + (outcome == "refused"),
                held + (outcome == "held"),
            )
            if again:
                said = {"held": "held for review", "admitted": "admitted"}.get(outcome) or detail_of(payload)
                self.say(f"  {account.get_username():<8} again    {status}  {said}")
            elif outcome == "held":
                self.say(f"  {account.get_username():<8} held     {status}  saved hidden, waiting for a moderator")
            elif outcome == "admitted":
                self.say(f"  {account.get_username():<8} admitted {status}")
            else:
                self.say(f"  {account.get_username():<8} refused  {status}  {detail_of(payload)}", self.style.WARNING)
            if note or DISGUISES.get(body):
                self.say(f"    ({note or DISGUISES[body]})")
        return Tally(admitted, refused, held)

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


@dataclass(frozen=True)
class Tally:
    """What a wave's accounts got: admitted, refused, held for review."""

    admitted: int = 0
    refused: int = 0
    held: int = 0

    def __add__(self, other):
        return Tally(self.admitted + other.admitted, self.refused + other.refused, self.held + other.held)


def _queued():
    """How many replies wait in the review queue."""
    return Held.objects.filter(action="reply", status=HeldStatus.PENDING).count()
