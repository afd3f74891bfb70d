"""The repeated-content benchmark's part inside Redis: what a decision with content costs there beside the same
decision without (`INFO commandstats`, interleaved rounds), at synthetic members, with a fresh post per call, and
what the content indexes keep.

A content index is two hashes, one per generation of two periods, and a decision reads the other
generation's hash only in the first period of a generation (throttling/backends/lua/_index.lua).
So that a run measures the same thing whatever the clock says, the policies' periods are chosen for
the time the run starts: past the first period of their generation for the main rows, and in it for a
row where the other generation's hash is as full as a busy site leaves it.
"""

import hashlib
import random
import secrets
import statistics

from .capture import capture
from .content_corpus import BASES
from .content_latency import join_spec, split_spec
from .resp import RawConnection, encode

TARGET_REDIS_RATIO = 1.5
MEMBERS = 2000
# The period of the memory rows' policies, in seconds.
PERIOD = 600
# Seconds a run of inside_redis() takes at most, and the least a period is chosen before its edge.
RUN_SECONDS = 300
MARGIN = 5

WITHOUT = "without content"
BOTH = "with content, both limits"
FIRST = "with content, both limits, in a generation's first period, the other generation's hash full"
OWN = "with content, per member only"
REFERENCE = "reference, one read and one write of the post's keys alone"


class Replay:
    """The command a decision sends, retargeted at synthetic members, with a fresh token (and post) per call."""

    def __init__(self, url, call_a, call_b, member_tag):
        call_a()  # connections, policies and scripts warm: nothing else in the captures
        first = self._script(capture(url, call_a))
        second = self._script(capture(url, call_b))
        if len(first) != len(second):
            raise RuntimeError(f"two captures of one decision differ in length: {first} / {second}")
        self.args = first
        self.per_call = [i for i, (a, b) in enumerate(zip(first, second)) if a != b and not split_spec(a)]
        self.spec = len(first) - 1 if split_spec(first[-1]) else None
        self.tag = member_tag
        self.prefix = secrets.token_hex(3).encode()
        self.counter = 0

    @staticmethod
    def _script(commands):
        scripts = [c for c in commands if c[0].upper() == b"EVALSHA"]
        if len(scripts) != 1:
            raise RuntimeError(f"expected one script call per decision, saw {commands}")
        return scripts[0]

    def command(self, member, post=None):
        """The decision for synthetic `member`; with content, `post` names its keys (None: a fresh post)."""
        new_tag = self.tag[:-1] + b"~%d}" % member
        args = [arg.replace(self.tag, new_tag) for arg in self.args]
        for i in self.per_call:
            self.counter += 1
            args[i] = self.prefix + b"%x" % self.counter
        if self.spec is not None:
            head, who, keys = split_spec(args[self.spec])
            if post is None:
                post = secrets.token_bytes(8)
            fresh = hashlib.blake2b(post, digest_size=len(keys)).digest()
            args[self.spec] = join_spec(head, who.replace(self.tag[1:-1], new_tag[1:-1]), fresh)
        return encode(args)


def _commandstats(conn):
    raw = conn.call(encode(["INFO", "commandstats"])).decode()
    for line in raw.splitlines():
        if line.startswith("cmdstat_evalsha:"):
            return dict(part.split("=") for part in line.split(":", 1)[1].split(","))
    return {"calls": "0", "usec_per_call": "0"}


def period_for(now, first, base=600):
    """A period in seconds, from `base` up, whose generation (two periods) is for the next RUN_SECONDS in
    its first period (`first`) or past it, at Redis time `now` (seconds)."""
    for period in range(base, 4 * base):
        into = now % (2 * period)
        start = 0 if first else period
        if start + MARGIN <= into and into + RUN_SECONDS < start + period:
            return period
    raise RuntimeError("no period fits the run")  # pragma: no cover - a window of 2 × base holds one


def _fill_other_generation(conn, wave_keys, period, now, posts):
    """Writes `posts` synthetic posts (4 keys each) in the generation before the current one, as a busy
    site leaves it: the hash a decision reads beside its own in the first period of a generation."""
    period_us = period * 1_000_000
    gen = int(now * 1_000_000) // (2 * period_us)
    other = wave_keys[(gen - 1) % 2]
    stamp = b"%d" % (gen * 2 * period_us - 1)  # the last moment of that generation
    conn.call(encode(["HSET", other, "#", b"%d/%d" % (gen - 1, period_us)]))
    commands = []
    for n in range(posts):
        entry = b"u:%d@%s,%s;" % (n, stamp, secrets.token_hex(6).encode())
        commands.append(encode(["HSET", other, *[x for _ in range(4) for x in (secrets.token_bytes(12), entry)]]))
    conn.pipeline(commands)
    conn.call(encode(["PEXPIREAT", other, (2 * gen + 1) * period_us // 1000]))
    return other


def inside_redis(url, user, rounds, quick):
    """µs per decision (commandstats), with and without content, fresh members' posts, interleaved rounds."""
    import throttling
    from throttling.engine.identity import member_identity
    from throttling.engine.keys import wave_keys
    from throttling.engine.policies.cache import policies
    from throttling.models import ActionPolicy

    texts = [base["text"] for base in BASES.values()]
    tag = b"{" + member_identity(user.pk).encode() + b"}"
    conn = RawConnection.from_url(url)
    seconds, micros = conn.call(encode(["TIME"]))
    now = int(seconds) + int(micros) / 1e6
    past, first = period_for(now, first=False), period_for(now, first=True)
    calls = 2000 if quick else 6000

    def content_policy(action, period, **fields):
        ActionPolicy.objects.create(action=action, period=3600, max_count=1000, same_content_period=period, **fields)
        policies.clear()

    def replay(action, content=True):
        a, b = (texts[0], texts[1]) if content else (None, None)
        call = throttling.check
        return Replay(url, lambda: call(user, action, content=a), lambda: call(user, action, content=b), tag)

    scenarios = {}
    for algorithm in ("sliding_log", "token_bucket"):
        short = "log" if algorithm == "sliding_log" else "bucket"
        action = f"bench-content-{short}"
        content_policy(action, past, algorithm=algorithm, same_content_max=1, same_content_members=5)
        scenarios[f"{short}: {WITHOUT}"] = replay(action, content=False)
        scenarios[f"{short}: {BOTH}"] = replay(action)
    content_policy("bench-content-first", first, same_content_max=1, same_content_members=5)
    scenarios[f"log: {FIRST}"] = replay("bench-content-first")
    content_policy("bench-content-own", past, same_content_max=1)
    scenarios[f"log: {OWN}"] = replay("bench-content-own")
    # Held for review: the same policies answering a match with "hold" (admitted, recorded, held), measured
    # as the refusal is, by the same post again (see Guide › Held for review).
    holding = {}
    for algorithm in ("sliding_log", "token_bucket"):
        short = "log" if algorithm == "sliding_log" else "bucket"
        action = f"bench-content-held-{short}"
        content_policy(
            action, past, algorithm=algorithm, same_content_max=1, same_content_members=5, same_content_answer="hold"
        )
        holding[short] = replay(action)
    # What any design that indexes a post's 4 keys in the same call pays at least: the same call and
    # arguments, the plain script with one read and one write of the keys added (nothing judged).
    bare = Replay.__new__(Replay)
    bare.__dict__.update(scenarios[f"log: {BOTH}"].__dict__)
    bare.args = list(bare.args)
    bare.args[1] = conn.call(encode(["SCRIPT", "LOAD", _bare_script()]))
    scenarios[f"log: {REFERENCE}"] = bare
    prefill = 2
    try:
        # Every member has a few posts (and log entries) already: a busy site's index.
        for replay_ in scenarios.values():
            conn.pipeline([replay_.command(m) for m in range(MEMBERS) for _ in range(prefill)])
        _fill_other_generation(conn, wave_keys("bench-content-first"), first, now, rounds * calls)
        runs = {name: [] for name in scenarios}
        order = list(scenarios)
        rng = random.Random(7)
        for _ in range(rounds):
            rng.shuffle(order)
            for name in order:
                replay_ = scenarios[name]
                commands = [replay_.command(i % MEMBERS) for i in range(calls)]
                conn.call(encode(["CONFIG", "RESETSTAT"]))
                errors = conn.pipeline(commands)
                stats = _commandstats(conn)
                if errors:
                    raise RuntimeError(f"{name}: {errors} errors")
                runs[name].append(float(stats["usec_per_call"]))
        refused = {short: _refused(conn, scenarios[f"{short}: {BOTH}"], quick) for short in ("log", "bucket")}
        held = {short: _refused(conn, holding[short], quick, held=True) for short in ("log", "bucket")}
    finally:
        conn.close()
    out = {name: {"usec_per_call": statistics.median(v), "runs": v} for name, v in runs.items()}
    out["refused"] = refused
    out["held"] = held
    out["periods"] = {"past the first": past, "first": first}
    return out


def _refused(conn, replay, quick, held=False):
    """Median µs of the same post again by its member (a refusal for the member's own repeat; with `held`,
    under the answer "hold": admitted, recorded and held)."""
    runs = []
    for repeat in range(3 if quick else 5):
        base = MEMBERS * (2 + repeat)  # members who never posted
        posts = [secrets.token_bytes(8) for _ in range(MEMBERS)]
        conn.pipeline([replay.command(base + m, posts[m]) for m in range(MEMBERS)])
        conn.call(encode(["CONFIG", "RESETSTAT"]))
        errors = conn.pipeline([replay.command(base + m, posts[m]) for m in range(MEMBERS)])
        stats = _commandstats(conn)
        probe = conn.call(replay.command(base, posts[0]))
        if held and (errors or probe[0] != 1 or len(probe) != 10):
            raise RuntimeError(f"the same post again was not held for its content ({errors} errors)")
        if not held and (errors or probe[0] != 0 or len(probe) != 9):
            raise RuntimeError(f"the same post again was not refused for its content ({errors} errors)")
        runs.append(float(stats["usec_per_call"]))
    return statistics.median(runs)


def _bare_script():
    """The sliding log's script with only one read and one write of the post's keys added (the reference row)."""
    from throttling.backends.scripts import _content_parts, _script_source

    text = _script_source("sliding_log")
    # The content variant's layout (its keys and argument last, the post's keys read), then one read.
    read = """
redis.call('HMGET', KEYS[#KEYS - 1], '#', unpack(c_fields))
"""
    write = """
    local v = c_who .. '@' .. int(now) .. ',' .. ARGV[2] .. ';'
    redis.call('HSET', KEYS[#KEYS - 1], c_fields[1], v, c_fields[2], v, c_fields[3], v, c_fields[4], v)
"""
    if "-- @content-layout" not in text or "    -- @content-record" not in text:
        raise RuntimeError("the sliding log's script has no place for the content index's commands")
    text = text.replace("-- @content-layout", _content_parts()["layout"] + read, 1)
    return text.replace("    -- @content-record", write, 1)


def render_redis(r, rounds):
    """The page's lines of the part inside Redis (results["redis"])."""
    lines = [
        f"The command `throttling.check(member, action, content=text)` sends, captured with MONITOR and "
        f"replayed pipelined at {MEMBERS:,} synthetic members with a fresh post each call (every member "
        f"already has 2 posts in the period), beside the same decision without content, in "
        f"{rounds} interleaved rounds; `INFO commandstats`, median of the rounds. One server: the "
        "wave's index also holds each member's own posts, so both limits are one index and one command. "
        "A decision reads the other generation's hash only in the first period of a generation (a "
        "generation is two periods); the periods are chosen for the time of the run, past that first "
        "period for every row but the one that says it, where the other generation's hash holds "
        "as many posts as the run writes.",
        "",
        "| Decision | µs per call | vs without content |",
        "|---|--:|--:|",
    ]
    for short in ("log", "bucket"):
        base = r[f"{short}: {WITHOUT}"]["usec_per_call"]
        names = [n for n in r if isinstance(r[n], dict) and "usec_per_call" in r[n] and n.startswith(short + ":")]
        for name in names:
            us = r[name]["usec_per_call"]
            lines.append(f"| {name} | {us:.2f} | {us / base:.2f}× |")
        if short in r["refused"]:
            lines.append(
                f"| {short}: the same post again, refused (median of streams after the rounds) | "
                f"{r['refused'][short]:.2f} | {r['refused'][short] / base:.2f}× |"
            )
        if short in r.get("held", {}):
            lines.append(
                f"| {short}: the same post again, held for review (answer “hold”; median of streams after the rounds) | "
                f"{r['held'][short]:.2f} | {r['held'][short] / base:.2f}× |"
            )
    without = r[f"log: {WITHOUT}"]["usec_per_call"]
    past = r[f"log: {BOTH}"]["usec_per_call"] / without
    first = r[f"log: {FIRST}"]["usec_per_call"] / without
    bare = r[f"log: {REFERENCE}"]["usec_per_call"] / without
    mean = (past + first) / 2
    lines += [
        "",
        "The reference row is the sliding log's script with nothing added but one read and one write of a "
        f"post's 4 keys in one hash (nothing judged): the least any design pays that indexes each post under "
        f"its band keys in the same call, **{bare:.2f}×** here. The commands, not the script's logic, make "
        "the cost; fewer bands would cost less and catch fewer near-duplicates (see the corpus above).",
        "",
        f"Target: a decision with content ≤ {TARGET_REDIS_RATIO}× the same decision without (sliding log): "
        f"**{past:.2f}×** past a generation's first period, **{first:.2f}×** in it, **{mean:.2f}×** over a "
        f"generation ({'met' if mean <= TARGET_REDIS_RATIO else '**not met**'}).",
    ]
    return lines


def memory(url, user):
    """Bytes each remembered post keeps in the content indexes, and each member of a wave."""
    import redis

    import throttling
    from throttling.engine.identity import member_identity
    from throttling.engine.keys import seen_keys, wave_keys
    from throttling.engine.policies.cache import policies
    from throttling.models import ActionPolicy

    client = redis.Redis.from_url(url)
    identity = member_identity(user.pk)
    out = {}
    for label, action, fields, posts in (
        (
            "the wave's index (long posts; on one server it holds members' own posts too)",
            "bench-mem-wave",
            {"same_content_max": 1, "same_content_members": 5},
            1000,
        ),
        ("a member's own index (per member only, or short posts)", "bench-mem-own", {"same_content_max": 1}, 20),
    ):
        ActionPolicy.objects.create(action=action, period=3600, max_count=1000, same_content_period=PERIOD, **fields)
        policies.clear()
        replay = Replay(
            url,
            lambda a=action: throttling.check(user, a, content=BASES["cash"]["text"]),
            lambda a=action: throttling.check(user, a, content=BASES["pills"]["text"]),
            b"{" + identity.encode() + b"}",
        )
        wave = "same_content_members" in fields
        # The wave's index: posts of as many members; a member's own: one member's posts.
        keys = list(wave_keys(action)) if wave else list(seen_keys(f"{identity}~1", action))
        conn = RawConnection.from_url(url)
        before = _used(client, keys)
        conn.pipeline([replay.command(i + 1 if wave else 1) for i in range(posts)])
        row = {"posts": posts, "bytes_per_post": (_used(client, keys) - before) / posts}
        if wave:
            # One content posted by a wave of 5 members: what each member after the first adds.
            post, start = secrets.token_bytes(8), _used(client, keys)
            conn.pipeline([replay.command(10_000 + m, post) for m in range(5)])
            row["bytes_per_wave_member"] = (_used(client, keys) - start - row["bytes_per_post"]) / 4
        conn.close()
        row["ttl_s"] = [round(client.pttl(k) / 1000) for k in keys if client.exists(k)]
        out[label] = row
    return out


def _used(client, keys):
    return sum(client.memory_usage(k, samples=0) or 0 for k in keys)
