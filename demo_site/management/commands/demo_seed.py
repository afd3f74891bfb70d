"""Create the demo's accounts and first posts; safe to run on every start."""

from decimal import Decimal

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand
from django.db import transaction

from demo_site import DEMO_ADMIN, DEMO_MEMBERS, DEMO_PASSWORD
from demo_site.models import Post, Reply
from throttling.models import ActionPolicy, PolicyTier

TRUSTED_GROUP = "Trusted members"
# The community controls the demo shows; created once, never changed afterwards
# (a moderator may edit them in the admin).
POLICIES = [
    dict(
        action="thread-reply",
        period=600,
        max_count=10,
        verb="replied in this thread",
        description="Replies per member in one thread (counted per thread), beside the per-minute reply limit.",
    ),
    dict(
        action="post-sitewide",
        period=60,
        max_count=3,
        scope="site",
        mode="shadow",
        description="Tried in shadow mode: at most 3 new posts a minute across the whole site. Nothing is "
        "refused; the report shows what it would have refused.",
    ),
]

POSTS = [
    # Oldest first, so the welcome post tops the newest-first lists.
    (
        DEMO_MEMBERS[0],
        "How fast is too fast?",
        "Six replies a minute sounds generous until someone pastes the same link into every thread. "
        "What limits would you pick for a forum like this one?",
        [(DEMO_MEMBERS[1], "Whatever the number, the wait should be shown in words, not as a bare 429.")],
    ),
    (
        DEMO_ADMIN,
        "Welcome to the demo community",
        "Replies, posts and likes here are limited by action policies that staff edit in the admin.\n"
        "Reply to this post a few times in a row and watch the counter under the thread.",
        [],
    ),
]


class Command(BaseCommand):
    help = "Create the demo accounts (admin, alice, bob) and two posts; a rerun resets the passwords and adds nothing twice."
    # The system checks would run before the seeding and warn about the policies it is about to
    # create (throttling.W001 for thread-reply, on a first start); runserver runs them next, on the
    # seeded database.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--password", default=DEMO_PASSWORD, help="password of every demo account")

    @transaction.atomic
    def handle(self, *args, password, **options):
        User = get_user_model()
        users = {}
        for name in (DEMO_ADMIN, *DEMO_MEMBERS):
            user, _ = User.objects.get_or_create(username=name)
            is_admin = name == DEMO_ADMIN
            user.is_staff = user.is_superuser = is_admin
            user.is_active = True
            # Reset on every run so the password printed at start-up always works.
            user.set_password(password)
            user.save()
            users[name] = user

        for fields in POLICIES:
            ActionPolicy.objects.get_or_create(action=fields["action"], defaults=fields)
        trusted, _ = Group.objects.get_or_create(name=TRUSTED_GROUP)
        users[DEMO_MEMBERS[1]].groups.add(trusted)
        like = ActionPolicy.objects.filter(action="like").first()
        if like is not None and not like.tiers.exists():
            # Trusted members may like three times as often.
            PolicyTier.objects.create(policy=like, group=trusted, multiplier=Decimal("3"), position=1)

        created = 0
        for author, title, body, replies in POSTS:
            post, new = Post.objects.get_or_create(author=users[author], title=title, defaults={"body": body})
            if new:
                created += 1
                for replier, text in replies:
                    Reply.objects.create(post=post, author=users[replier], body=text)
        self.stdout.write(
            f"Demo accounts: {', '.join(users)} (password {password!r}); "
            f"{created} post{'s' if created != 1 else ''} seeded."
        )
