"""The engine benchmark's rows of decisions with content: ActionThrottle with a post's text beside the floor of its own
script (the content variant's EVALSHA on a raw socket, a fresh post each call), in bench.run's interleaved rounds."""

import itertools
import random
import re
import secrets
import struct

from .capture import capture
from .content_corpus import BASES
from .resp import encode

ACTION = "bench-content"
FLOOR = "content_floor"
FRESH = "content_action_throttle"
SEEN = "content_seen_action_throttle"
KILOBYTE = "content_kb_action_throttle"
ORDER = [FLOOR, FRESH, SEEN, KILOBYTE]
LABELS = {
    KILOBYTE: "`ActionThrottle` with `throttle_content`, a new 1 KB text each decision (half with a letter outside ASCII)",
    FLOOR: "floor, with content: the content variant's `EVALSHA` `check` sends, raw socket, a new post each call",
    FRESH: "`ActionThrottle` with `throttle_content`, a new 40-word text each decision",
    SEEN: "`ActionThrottle` with `throttle_content`, a new text whose fingerprint the process already has (a wave's)",
}
TARGET_VS_FLOOR = 1.2
# A decision with a fresh 1 KB text against the same ActionThrottle decision without content.
TARGET_KB_VS_PLAIN = 1.6
PLAIN = "action_throttle"  # bench.run's row of ActionThrottle without content
# Limits no decision of the run reaches, so every timed decision is admitted, as the plain rows are:
# a member may repeat a text 20 times, 100 members may post it.
LIMITS = {"same_content_max": 20, "same_content_members": 100, "same_content_period": 600}
# The start of a content variant's last argument (throttling/backends/lua/_content.lua): what is
# judged, then who posts and the post's keys of 12 bytes.
_HEAD = struct.Struct("<BHHIdB")
KEY_BYTES = 12
_WORDS = sorted({w for base in BASES.values() for w in re.findall(r"[a-z]+", base["text"].lower())})


def split_spec(arg):
    """(its start without who's length, who, keys) of a content variant's last argument, or None for another."""
    if len(arg) <= _HEAD.size:
        return None
    wave, *_, length = _HEAD.unpack_from(arg)
    keys = len(arg) - _HEAD.size - length
    if wave % 16 > 3 or keys <= 0 or keys % KEY_BYTES:  # 16 added: the answer "hold" (engine.duplicates)
        return None
    return arg[: _HEAD.size - 1], arg[_HEAD.size : _HEAD.size + length], arg[_HEAD.size + length :]


def join_spec(head, who, keys):
    """split_spec() undone, for another member (`who`) and post (`keys`)."""
    return head + bytes([len(who)]) + who + keys


def kilobyte_texts(rng, n):
    """`n` different posts of about 1 KB, every second one with a letter outside ASCII."""
    out = []
    for i in range(n):
        words = rng.choices(_WORDS, k=200)
        if i % 2:
            words[rng.randrange(len(words))] = rng.choice(("café", "naïve", "Zürich", "señor"))
        out.append(f"{' '.join(words)[:990].capitalize()} {secrets.token_hex(4)}")
    return out


def texts(rng, n):
    """`n` different posts of about 40 words, as members write them (never seen by the process)."""
    out = []
    for _ in range(n):
        words = rng.sample(_WORDS, 36)
        out.append(f"{' '.join(words[:18]).capitalize()}. {' '.join(words[18:]).capitalize()}? {secrets.token_hex(4)}")
    return out


class ContentRows:
    """The content contenders of one bench.run.Bench: set up before timing, called per round."""

    def __init__(self, bench):
        import throttling
        from throttling.engine.identity import member_identity
        from throttling.engine.policies.cache import policies
        from throttling.models import ActionPolicy

        self.bench = bench
        self.rng = random.Random(bench.options.seed)
        ActionPolicy.objects.create(action=ACTION, period=60, max_count=1000, **LIMITS)
        policies.clear()
        self.policy = policies.get(ACTION)
        first = bench.users[0]
        sample = texts(self.rng, 2)
        throttling.check(first, ACTION, content=sample[0])  # warm: the script loaded, the policy cached
        sent = capture(bench.server.url, lambda: throttling.check(first, ACTION, content=sample[1]))
        [self.args] = [args for args in sent if args[0].upper() == b"EVALSHA"]
        self.identity = member_identity(first.pk).encode()
        # EVALSHA, its SHA, the KEYS count, the KEYS, the mode ("c1"), then the per-call token (decide.plan).
        self.token = 3 + int(self.args[2]) + 1
        self.counter = itertools.count(1)
        self.prefix = secrets.token_hex(3).encode()

    def floor_command(self, user):
        """The content EVALSHA for `user`, a fresh token and a fresh post's keys: what check() would send."""
        from throttling.engine.identity import member_identity

        identity = member_identity(user.pk).encode()
        args = [a.replace(b"{" + self.identity + b"}", b"{" + identity + b"}") for a in self.args]
        args[self.token] = self.prefix + b"%x" % next(self.counter)
        head, _who, keys = split_spec(args[-1])
        args[-1] = join_spec(head, identity, secrets.token_bytes(len(keys)))
        return encode(args)

    def contender(self, name):
        from rest_framework.exceptions import Throttled
        from rest_framework.parsers import JSONParser
        from rest_framework.request import Request
        from rest_framework.test import APIRequestFactory
        from rest_framework.views import APIView

        from throttling.engine.content import decisions as duplicates
        from throttling.throttles import ActionThrottle

        if name == FLOOR:
            conn = self.bench.raw_conn
            return conn.call, lambda users: [(self.floor_command(user),) for user in users], lambda r: r[0] == 1

        view_class = type("BenchContentView", (APIView,), {"throttle_action": ACTION, "throttle_content": "text"})
        factory = APIRequestFactory()

        def allow(request, view):
            try:
                return ActionThrottle().allow_request(request, view)
            except Throttled:
                return False

        def prepare(users):
            posts = kilobyte_texts(self.rng, len(users)) if name == KILOBYTE else texts(self.rng, len(users))
            if name == SEEN:
                # Fingerprinted before timing, as a wave's text is after its first post in a process;
                # never posted, so Redis does the same work as for a new text.
                for text in posts:
                    duplicates.fingerprint_for(self.policy, text)
            batch = []
            for user, text in zip(users, posts):
                request = Request(factory.post("/bench/", {"text": text}, format="json"), parsers=[JSONParser()])
                request.user = user
                request.data  # noqa: B018 - parsed before timing: the view reads it anyway
                batch.append((request, view_class()))
            return batch

        return allow, prepare, lambda ok: ok is True


def render_rows(lat):
    """The target line of the engine page for the content rows (the rows themselves are in its table)."""
    if FLOOR not in lat or FRESH not in lat:
        return []
    floor = lat[FLOOR]["median_us"]
    lines = []
    for name in (FRESH, SEEN):
        ratio = lat[name]["median_us"] / floor
        met = "met" if ratio <= TARGET_VS_FLOOR else "**not met**"
        lines.append(f"- {LABELS[name]}: median ≤ {TARGET_VS_FLOOR}× its own script's floor: **{ratio:.2f}×** ({met})")
    if KILOBYTE in lat and PLAIN in lat:
        ratio = lat[KILOBYTE]["median_us"] / lat[PLAIN]["median_us"]
        met = "met" if ratio <= TARGET_KB_VS_PLAIN else "**not met**"
        lines.append(
            f"- {LABELS[KILOBYTE]}: median ≤ {TARGET_KB_VS_PLAIN}× the same `ActionThrottle` decision without "
            f"content, in the same run: **{ratio:.2f}×** ({met})"
        )
    return lines
