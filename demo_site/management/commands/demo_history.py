"""A month of replies by sample members, so "What would this do?" on a policy page has a history to replay.

Calm members reply now and then, bursty regulars in quick conversations, and two spammers in runs of
dozens a few seconds apart, penalised for it at the time. Every start of the demo replaces it with a
month that ends now; the rows are marked as sample data (their members' last name, their threads'
titles, their penalties' reason) and nothing else is touched.
"""

import random
from datetime import timedelta

from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from demo_site.management.samples import ended_penalty, sample_member
from demo_site.models import Post, Reply
from throttling.models import Penalty
from throttling.penalties import current_ladder

DAYS = 30
CALM = ("sample-ada", "sample-bruno", "sample-chidi", "sample-dana", "sample-emil", "sample-farah", "sample-goran",
        "sample-hana", "sample-ivo", "sample-jun", "sample-kira", "sample-lars", "sample-mina", "sample-noor",
        "sample-otto", "sample-pia", "sample-quinn", "sample-rosa")  # fmt: skip
BURSTY = ("sample-sol", "sample-tove", "sample-umar", "sample-vera", "sample-wen")
SPAMMERS = ("sample-deals4u", "sample-linkdrop")
THREADS = (
    "Which keyboard shortcuts do you use every day?",
    "Show us your desk",
    "Weekly help thread",
    "What are you reading?",
    "Bug reports for the new editor",
)
REASON = "Sample data (demo_history), not a real penalty."
BODY = "Sample reply (demo_history)."
SECOND = timedelta(seconds=1)


def _calm(rng, start):
    """A reply or three on most days, at any hour."""
    times = []
    for day in range(DAYS):
        if rng.random() < 0.6:
            times += [start + timedelta(days=day, seconds=rng.randrange(86400)) for _ in range(rng.randint(1, 3))]
    return times


def _bursty(rng, start):
    """Calm days, and most days a conversation: 6 to 14 replies 3 to 30 seconds apart."""
    times = _calm(rng, start)
    for day in range(DAYS):
        if rng.random() < 0.7:
            at = start + timedelta(days=day, seconds=rng.randrange(80000))
            for _ in range(rng.randint(6, 14)):
                at += rng.randint(3, 30) * SECOND
                times.append(at)
    return times


def _spammer(rng, start):
    """Runs of 40 to 80 replies, one to six seconds apart, on a few days."""
    runs = []
    for day in sorted(rng.sample(range(DAYS - 1), 3)):
        at = start + timedelta(days=day, seconds=rng.randrange(80000))
        run = []
        for _ in range(rng.randint(40, 80)):
            at += rng.randint(1, 6) * SECOND
            run.append(at)
        runs.append(run)
    return runs


class Command(BaseCommand):
    help = "Replace the sample month of replies (calm members, bursty regulars, two spammers) with one ending now."

    def add_arguments(self, parser):
        parser.add_argument("--seed", type=int, default=26, help="the same seed makes the same month")

    @transaction.atomic
    def handle(self, *args, seed, **options):
        rng = random.Random(seed)
        now = timezone.now()
        start = now - timedelta(days=DAYS)
        members = {name: sample_member(name) for name in (*CALM, *BURSTY, *SPAMMERS)}
        Post.objects.filter(author__in=members.values()).delete()  # their replies go with them
        Reply.objects.filter(author__in=members.values()).delete()
        Penalty.objects.filter(user__in=members.values()).delete()  # their events go with them

        threads = []
        for i, title in enumerate(THREADS):
            post = Post.objects.create(author=members[CALM[i]], title=f"{title} (sample)", body=BODY)
            threads.append(post)
        Post.objects.filter(pk__in=[p.pk for p in threads]).update(created=start - timedelta(hours=1))

        replies = []
        for name in CALM:
            replies += [(members[name], rng.choice(threads), t) for t in _calm(rng, start)]
        for name in BURSTY:
            favourite = rng.choice(threads)
            replies += [(members[name], favourite if rng.random() < 0.8 else rng.choice(threads), t)
                        for t in _bursty(rng, start)]  # fmt: skip
        penalties = 0
        for name in SPAMMERS:
            for run in _spammer(rng, start):
                replies += [(members[name], rng.choice(threads), t) for t in run]
                penalties += self._penalise(members[name], run[len(run) // 4])
        rows = [Reply(post=post, author=user, body=BODY) for user, post, _ in replies]
        Reply.objects.bulk_create(rows, batch_size=1000)
        # auto_now_add stamped them all with now: each gets its own time back.
        for row, (_, _, when) in zip(rows, replies):
            row.created = when
        Reply.objects.bulk_update(rows, ["created"], batch_size=500)
        self.stdout.write(
            f"Sample history: {len(rows)} replies over {DAYS} days by {len(CALM)} calm members, "
            f"{len(BURSTY)} bursty regulars and {len(SPAMMERS)} spammers ({penalties} ended penalties)."
        )

    def _penalise(self, user, at):
        """The ladder's next rung for a spammer's run, as an escalation would have applied it; long over."""
        done = Penalty.objects.filter(user=user).count()
        ladder = current_ladder()
        if not ladder:
            return 0
        ended_penalty(user, "reply", ladder[min(done, len(ladder) - 1)], at, REASON)
        return 1
