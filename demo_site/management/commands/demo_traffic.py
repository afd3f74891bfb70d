"""Play a spammer against the demo until the penalty ladder answers: a warning, then a block."""

import random
import time
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.db.models import Q
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

import throttling
from demo_site import DEMO_PASSWORD
from demo_site.management.playing import add_addr_argument, detail_of, played_member, reach, sandbox_thread
from demo_site.management.samples import ended_penalty, sample_member
from demo_site.models import Post
from throttling.common.words import local_time, penalty_message, wait_in_words
from throttling.conf import MAX_LOG_ENTRIES
from throttling.conf import settings as throttling_settings
from throttling.engine.deciding.penalty_codec import PenaltyInfo
from throttling.engine.identity import member_identity
from throttling.models import ActionPolicy, OffenceRecord, Penalty
from throttling.penalties import current_ladder, standing

SAMPLE_PREFIX = "sample-"
SAMPLE_MEMBERS = ("sample-ana", "sample-ben", "sample-chen")
# Documentation address ranges (RFC 5737): clearly not real visitors.
SAMPLE_VISITORS = ("ip:192.0.2.10", "ip:198.51.100.7")
SAMPLE_REASON = "Sample data (demo_traffic --history), not a real penalty."
SAMPLE_DAYS = 30
# A refused attempt is re-sent this often while waiting for the worker, in case
# one was counted in an offence run the worker was just closing.
NUDGE_EVERY = 2.0


class Spam:
    """What one action's burst sends: the path, the method and the form of request n."""

    def __init__(self, action, post, member):
        self.action = action
        self.post = post
        self.liked = action == "like" and post.likes.filter(user=member).exists()

    def request(self, n):
        if self.action == "reply":
            return "POST", reverse("api-replies", args=[self.post.pk]), {"body": f"Buy cheap watches! (spam #{n})"}
        if self.action == "post":
            return "POST", reverse("api-posts"), {"title": f"Spam thread #{n}", "body": "Buy cheap watches!"}
        # Like, unlike, like…: both directions count as the "like" action.
        return ("DELETE" if self.liked else "POST"), reverse("api-like", args=[self.post.pk]), None

    def admitted(self, method):
        if self.action == "like":
            self.liked = method == "POST"


class Command(BaseCommand):
    help = (
        "Play a spammer against the demo: bursts of API requests until a Celery worker applies "
        "the penalty ladder (a warning, then a 15-minute block). Talks to the running demo "
        "(DEMO_ADDR) when it answers, else calls the views in this process."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--rounds",
            type=int,
            default=2,
            help="offence runs to play, one ladder rung each (default 2: a warning, then a block; "
            "0 with --history: only the sample history)",
        )
        parser.add_argument(
            "--action", choices=["reply", "post", "like"], default="reply", help="what to spam (default reply)"
        )
        parser.add_argument("--user", default="spammer", help="member to play (created if missing; default spammer)")
        add_addr_argument(parser)
        parser.add_argument(
            "--wait",
            type=float,
            default=20.0,
            help="seconds to wait for the worker to apply a penalty (default 20)",
        )
        parser.add_argument(
            "--history",
            action="store_true",
            help=f"first add {SAMPLE_DAYS} days of sample offence history for fake members named "
            f"{SAMPLE_PREFIX}… (replacing earlier sample data), so the report has something to show",
        )

    def say(self, text="", style=None):
        self.stdout.write(style(text) if style else text)

    def handle(self, *args, rounds, action, user, addr, wait, history, **options):
        if rounds < 0 or (rounds == 0 and not history):
            raise CommandError("--rounds must be at least 1 (or 0 with --history: only the sample history).")
        started = time.monotonic()
        base = f"http://{addr}"
        if history:
            self.say(add_sample_history())
            if not rounds:
                return

        policy, threshold = self.check_policy(action)
        member = played_member(user)
        demo = reach(base)
        demo.login(member)
        spam = Spam(action, self.sandbox(member, action), member)

        strikes, rung = standing(member)
        self.say(f"Playing member “{member}” (password {DEMO_PASSWORD}) against {demo.description}.")
        self.say(
            f"The “{action}” policy allows {policy.windows_display()}; {threshold} refused attempts within "
            f"{wait_in_words(policy.offence_window or throttling_settings.OFFENCE_WINDOW)} make a repeat offender."
        )
        plural = "s" if strikes != 1 else ""
        self.say(f"{member} has {strikes} strike{plural}; the next rung is {rung.level}. {rung.name}.")

        self.sent = 0
        last = Penalty.objects.filter(user=member).order_by("-pk").values_list("pk", flat=True).first() or 0
        blocked = self.penalty_in_force(member, action)
        if blocked:
            self.say()
            self.say(f"{member} is already restricted from “{action}” (penalty #{blocked.pk}, level {blocked.level}):")
            self.show_penalised(demo, spam, member, blocked)
            self.say(
                f"Nothing more to play on “{action}”: try --action with another action, --user with "
                f"another member, or lift penalty #{blocked.pk} in the admin."
            )
            self.finish(base, blocked, started)
            return

        penalty = None
        for number in range(1, rounds + 1):
            self.say()
            self.say(f"Round {number}: “{action}” as fast as possible", self.style.MIGRATE_HEADING)
            if action == "reply":
                # The sandbox thread's per-thread limit would refuse before the per-minute one;
                # starting it afresh keeps the ladder on "reply", the limit this plays.
                throttling.reset(member, "thread-reply", target=spam.post.pk)
            self.burst(demo, spam, threshold)
            self.say(f"  offence run reached the threshold ({threshold}): escalation queued")
            self.say("  waiting for the Celery worker to apply the next rung…")
            penalty = self.wait_for_penalty(demo, spam, member, last, wait)
            last = penalty.pk
            self.describe(penalty)
            if not penalty.is_warning and (penalty.action in ("", action)):
                self.show_penalised(demo, spam, member, penalty)
                if number < rounds:
                    self.say(
                        f"  {member} cannot “{action}” until the penalty ends, so the remaining "
                        f"round{'s' if rounds - number > 1 else ''} would only be refused; stopping here."
                    )
                break
        self.finish(base, penalty, started)

    # --- set-up ----------------------------------------------------------------------

    def check_policy(self, action):
        policy = ActionPolicy.objects.filter(action=action).first()
        if policy is None:
            raise CommandError(f"No action policy for “{action}”: add one in the admin (Action policies).")
        if not policy.enabled:
            raise CommandError(f"The “{action}” policy is disabled: tick “enabled” in the admin to play.")
        threshold = policy.offence_threshold
        if threshold is None:
            threshold = throttling_settings.OFFENCE_THRESHOLD
        if not throttling_settings.PENALTIES or not threshold:
            raise CommandError(
                f"Penalties are off for “{action}” (THROTTLING_PENALTIES or the policy’s "
                "“refused attempts before a penalty” is 0): a spammer is only throttled."
            )
        if not current_ladder():
            raise CommandError("The penalty ladder is empty: add rungs in the admin (Penalty ladder).")
        return policy, threshold

    def sandbox(self, member, action):
        if action == "post":
            return Post(author=member)  # posts make their own threads
        return sandbox_thread(member)

    # --- playing ---------------------------------------------------------------------

    def attempt(self, demo, spam):
        self.sent += 1
        method, path, data = spam.request(self.sent)
        status, payload = demo.send(method, path, data)
        if status in (401, 403):
            raise CommandError(f"The demo refused the member ({status}: {detail_of(payload)}).")
        if status != 429 and status >= 400:
            raise CommandError(f"Unexpected answer {status} to {method} {path}: {detail_of(payload)}")
        if status < 400:
            spam.admitted(method)
        return status, payload

    def burst(self, demo, spam, threshold):
        """Send until `threshold` attempts were refused; admitted runs are printed as one line."""
        admitted, refused, previous = [], 0, None
        cap = self.sent + MAX_LOG_ENTRIES + threshold
        while refused < threshold:
            if self.sent > cap:
                raise CommandError("Nothing was refused: is the policy limiting this member at all?")
            status, payload = self.attempt(demo, spam)
            if status < 400:
                admitted.append((self.sent, status))
                continue
            self.flush_admitted(admitted)
            refused += 1
            detail = detail_of(payload)
            # The message once per burst (it repeats), the count every time.
            shown = f": {detail}" if detail != previous else ""
            previous = detail
            self.say(f"  #{self.sent:<4} refused  {status}  offence {refused} of {threshold}{shown}")
        self.flush_admitted(admitted)

    def flush_admitted(self, admitted):
        if not admitted:
            return
        first, last = admitted[0][0], admitted[-1][0]
        numbers = f"#{first}" if first == last else f"#{first}–#{last}"
        statuses = "/".join(sorted({str(s) for _, s in admitted}))
        self.say(f"  {numbers:<5} admitted {statuses}")
        admitted.clear()

    def wait_for_penalty(self, demo, spam, member, after, wait):
        began = time.monotonic()
        nudged = began
        while time.monotonic() - began < wait:
            penalty = Penalty.objects.filter(user=member, pk__gt=after).order_by("pk").first()
            if penalty is not None:
                self.say(f"  the worker applied it {time.monotonic() - began:.2f} s later", self.style.SUCCESS)
                return penalty
            if time.monotonic() - nudged >= NUDGE_EVERY:
                nudged = time.monotonic()
                status, _ = self.attempt(demo, spam)
                outcome = "refused " if status == 429 else "admitted"
                self.say(f"  #{self.sent:<4} {outcome} {status}  (one more, while waiting)")
            time.sleep(0.1)
        raise CommandError(
            f"No penalty within {wait:g} s: the Celery worker does not seem to be running.\n"
            "`make demo` starts one next to the web server. With your own setup, start it in another "
            "terminal with the same settings:\n"
            "    python -m celery -A demo_site worker --loglevel=INFO --pool=solo\n"
            "The escalation waits in the queue meanwhile and is applied once the worker runs."
        )

    def describe(self, penalty):
        names = {r.level: r.name for r in current_ladder()}
        scope = f"“{penalty.action}”" if penalty.action else "all actions"
        head = f"  penalty #{penalty.pk}: level {penalty.level} ({names.get(penalty.level, '?')}) on {scope}"
        if penalty.is_warning:
            self.say(f"{head}: a warning, nothing more is blocked", self.style.WARNING)
        else:
            self.say(f"{head}, until {local_time(penalty.ends_at)}", self.style.WARNING)
        self.say(f"  reason: {penalty.reason_text}")

    def penalty_in_force(self, member, action):
        return (
            Penalty.objects.active()
            .filter(user=member)
            .filter(Q(action=action) | Q(action=""))
            .order_by("-ends_at")
            .first()
        )

    def show_penalised(self, demo, spam, member, penalty):
        """One more attempt, refused by the penalty (the worker mirrors it to Redis just after the row)."""
        info = PenaltyInfo.of(penalty)
        expected = penalty_message(info, spam.action)
        deadline = time.monotonic() + 5
        while True:
            status, payload = self.attempt(demo, spam)
            detail = detail_of(payload)
            if (status == 429 and detail == expected) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.say(f"  #{self.sent:<4} refused  {status}  by the penalty: {detail}")

    def finish(self, base, penalty, started):
        self.say()
        self.say("See it in the admin (log in as admin, password the same):")
        changelist = _url("admin:throttling_penalty_changelist", "/admin/throttling/penalty/")
        self.say(f"  penalties        {base}{changelist}")
        if penalty is not None:
            change = _url("admin:throttling_penalty_change", f"{changelist}{penalty.pk}/change/", penalty.pk)
            self.say(f"  this penalty     {base}{change}")
        self.say(f"  report           {base}{_url('admin:throttling_report', f'{changelist}report/')}")
        self.say(
            f"The report counts refused attempts once the web process hands them to the worker "
            f"(every {throttling_settings.OFFENCE_FLUSH_INTERVAL:g} s here). Log in as the member on "
            f"{base}/ to see the notice members get."
        )
        self.say(f"Done in {time.monotonic() - started:.1f} s.")


def _url(name, fallback, *args):
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return fallback


# --- Sample history ----------------------------------------------------------------------


@transaction.atomic
def add_sample_history(now=None, seed=20240601):
    """Thirty days of made-up offences and ended penalties for fake members; returns a summary line.

    Earlier sample data is replaced, never added to, so a rerun keeps the same totals.
    """
    now = now or timezone.now()
    rng = random.Random(seed)
    members = [sample_member(name) for name in SAMPLE_MEMBERS]
    identities = {member_identity(u.pk): u for u in members}
    identities.update({ip: None for ip in SAMPLE_VISITORS})
    OffenceRecord.objects.filter(identity__in=identities).delete()
    Penalty.objects.filter(user__in=members).delete()  # their events go with them

    hour_now = now.replace(minute=0, second=0, microsecond=0)
    rows = {}
    # A few busy identities, each with a favourite action and bad days.
    habits = {identity: rng.choice(["reply", "like", "post"]) for identity in identities}
    for day in range(SAMPLE_DAYS):
        for identity in identities:
            if rng.random() < 0.55:
                continue
            for _ in range(rng.randint(1, 3)):
                hour = hour_now - timedelta(days=day, hours=rng.randint(0, 23))
                action = habits[identity] if rng.random() < 0.7 else rng.choice(["reply", "like", "post"])
                key = (identity, action, hour)
                rows[key] = rows.get(key, 0) + rng.randint(1, 12)
    OffenceRecord.objects.bulk_create(
        OffenceRecord(identity=i, user=identities[i], action=a, hour=h, count=n) for (i, a, h), n in rows.items()
    )

    ladder = current_ladder()[:3]  # warning, 15 minutes, 1 hour by default: all long over
    penalties = 0
    for user in members:
        start = now - timedelta(days=rng.randint(15, SAMPLE_DAYS - 1), hours=rng.randint(0, 23))
        for rung in ladder[: rng.randint(1, len(ladder))]:
            ended_penalty(user, habits[member_identity(user.pk)], rung, start, SAMPLE_REASON)
            penalties += 1
            start += timedelta(days=rng.randint(1, 4), hours=rng.randint(0, 23))
    offences = sum(rows.values())
    return (
        f"Sample history: {offences} refused attempts in {len(rows)} hourly rows over {SAMPLE_DAYS} days and "
        f"{penalties} ended penalties, for {', '.join(SAMPLE_MEMBERS)} and {', '.join(SAMPLE_VISITORS)} "
        "(made up; rerun with --history to replace it)."
    )
