"""The repeated-content benchmark: what "the same" catches, what a decision with content costs inside Redis, and
what it keeps there.

    python -m bench.content [--quick] [--seeds N] [--rounds N]

1. The corpus (bench/content_corpus.py): a 64-bit SimHash at Hamming distance ≤ 3, MinHash with
   LSH bands at a similarity threshold near 0.8, and the shipped method (throttling.engine.content.fingerprints:
   one-permutation MinHash, BANDS bands of ROWS rows over word pairs), each asked whether every
   variant is the same as its base and whether other posts on the topic are different. Hash
   functions are drawn from seeds: the table gives the share of --seeds seeds under which each pair
   is caught, and for the shipped method what its fixed hashes say. Also the Python CPU per text.
2. Inside Redis: the command `throttling.check(member, action, content=text)` sends (captured with
   MONITOR), replayed pipelined at synthetic members with a fresh post each time, beside the same
   decision without content, in interleaved rounds; µs per call from `INFO commandstats`.
3. Memory: the content indexes' `MEMORY USAGE` per remembered post and per member of a wave.

Starts its own redis-server (never the machine's) and a throwaway SQLite database; the page goes to
docs/benchmarks/content.md (bench.run.publish), raw numbers to bench/results-content.json.
"""

import argparse
import datetime
import hashlib
import itertools
import json
import os
import platform
import random
import re
import statistics
import sys
import time
from pathlib import Path

from .content_corpus import (
    BASES,
    DISGUISES,
    EMOJI_ONLY,
    LINK_POST,
    LINK_SPELLINGS,
    ORDINARY,
    REQUIRED_SAME,
    SHORT,
    TWO_WORDS_CHANGED,
    different_pairs,
    same_pairs,
)
from .content_redis import PERIOD, inside_redis, memory, render_redis
from .run import bench_site, publish

HERE = Path(__file__).resolve().parent
RESULTS_MD = HERE.parent / "docs" / "benchmarks" / "content.md"
RESULTS_JSON = HERE / "results-content.json"

KINDS = (*REQUIRED_SAME, TWO_WORDS_CHANGED)


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bench.content", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smaller run (does not rewrite the page)")
    parser.add_argument("--seeds", type=int, help="hash seeds per method (default 200, quick 20)")
    parser.add_argument("--rounds", type=int, help="interleaved rounds inside Redis (default 9, quick 3)")
    parser.add_argument("--no-cluster", action="store_true", help="skip the run on a local 3-master cluster")
    parser.add_argument(
        "--render", action="store_true", help="rewrite the page from bench/results-content.json, measuring nothing"
    )
    options = parser.parse_args(argv)
    options.seeds = options.seeds or (20 if options.quick else 200)
    options.rounds = options.rounds or (3 if options.quick else 9)
    return options


# -- 1. the corpus -----------------------------------------------------------


def _pairs(text):
    from throttling.engine.content import fingerprints as content

    tokens = content.words(text)
    return {" ".join(p) for p in zip(tokens, tokens[1:])}


def _h64(data, seed):
    data = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    return int.from_bytes(hashlib.blake2b(data, digest_size=8, salt=seed.to_bytes(16, "little")).digest(), "little")


def simhash(text, seed):
    """64-bit SimHash of a text's word pairs: "the same" at Hamming distance ≤ 3."""
    weights = [0] * 64
    for pair in _pairs(text):
        value = _h64(pair, seed)
        for bit in range(64):
            weights[bit] += 1 if value >> bit & 1 else -1
    return sum(1 << bit for bit in range(64) if weights[bit] > 0)


def minhash_lsh(text, seed, bands=16, rows=8):
    """Classic MinHash (bands × rows independent hash functions) with LSH band keys: "the same" when a band meets."""
    mask = (1 << 64) - 1
    rng = random.Random(seed)
    params = [(rng.getrandbits(64) | 1, rng.getrandbits(64)) for _ in range(bands * rows)]
    values = [_h64(pair, seed) for pair in _pairs(text)]
    mins = [min((a * v + c) & mask for v in values) for a, c in params]
    return {(j, tuple(mins[j * rows : (j + 1) * rows])) for j in range(bands)}


def shipped(text, seed=None):
    """The shipped fingerprint's keys; with a seed, the same method under another hash of words (CRC-32
    started from the seed), as content.fingerprint() chooses between bands and the exact digest."""
    from throttling.engine.content import fingerprints as content

    if seed is None:
        return set(content.fingerprint(text).keys)
    tokens = content._tokens(content.reader.seen(text).text)
    packed = content.bands(tokens, seed) if len(tokens) >= content.SHORT_WORDS else b""
    packed = packed or content.digest(content.normalise(text).encode("utf-8", "surrogatepass"))
    return {packed[i : i + content.KEY_BYTES] for i in range(0, len(packed), content.KEY_BYTES)}


METHODS = {
    "simhash": ("SimHash, 64 bits, distance ≤ 3", simhash, lambda a, b: bin(a ^ b).count("1") <= 3),
    "minhash": ("MinHash, 16 bands × 8 rows (threshold ≈ 0.71)", minhash_lsh, lambda a, b: bool(a & b)),
    "shipped": (
        "shipped: one-permutation MinHash, 4 bands × 3 rows",
        shipped,
        lambda a, b: bool(a & b),
    ),
}


def jaccard(a, b):
    pa, pb = _pairs(a), _pairs(b)
    return len(pa & pb) / len(pa | pb)


def corpus(seeds):
    """Per method: the share of seeds that catch each kind of variant and that keep other posts apart."""
    from throttling.engine.content import fingerprints as content

    texts = {t for _n, _k, a, b in same_pairs(KINDS) for t in (a, b)} | {
        t for _n, a, b in different_pairs() for t in (a, b)
    }
    firsts = [base["text"] for base in BASES.values()] + [o for b in BASES.values() for o in b["different"]]
    cross = [(a, b) for a, b in itertools.combinations(firsts, 2) if not any(a in p and b in p for p in _topics())]
    out = {"kinds": {}, "methods": {}, "similarity": {}}
    for kind in KINDS:
        out["similarity"][kind] = statistics.mean(jaccard(a, b) for _n, _k, a, b in same_pairs([kind]))
    out["similarity"]["different"] = statistics.mean(jaccard(a, b) for _n, a, b in different_pairs())
    for name, (label, sign, same) in METHODS.items():
        caught = {kind: 0 for kind in KINDS}
        totals = {kind: 0 for kind in KINDS}
        topic, across = [0, 0], [0, 0]
        for seed in range(seeds):
            signed = {t: sign(t, seed) for t in texts | set(firsts)}
            for _n, kind, a, b in same_pairs(KINDS):
                caught[kind] += same(signed[a], signed[b])
                totals[kind] += 1
            for _n, a, b in different_pairs():
                topic[0] += same(signed[a], signed[b])
                topic[1] += 1
            for a, b in cross:
                across[0] += same(signed[a], signed[b])
                across[1] += 1
        out["methods"][name] = {
            "label": label,
            "caught": {kind: caught[kind] / totals[kind] for kind in KINDS},
            "same_topic_false": topic[0] / topic[1],
            "across_topics_false": across[0] / across[1],
            "cpu_us": _cpu_per_text(lambda t, s=sign: s(t, 1)),
        }
    fixed = {kind: [content.same(a, b) for _n, _k, a, b in same_pairs([kind])] for kind in KINDS}
    out["fixed"] = {
        "caught": {kind: [sum(v), len(v)] for kind, v in fixed.items()},
        "same_topic_false": sum(content.same(a, b) for _n, a, b in different_pairs()),
        "same_topic_pairs": len(different_pairs()),
        "short_as_exact": all(content.fingerprint(t).short for t in SHORT),
        "cpu_fresh_us": _cpu_per_text(content.fingerprint),
    }
    out["pairs"] = {kind: len(same_pairs([kind])) for kind in KINDS}
    out["cross_pairs"] = len(cross)
    return out


def _topics():
    return [{base["text"], *base["different"]} for base in BASES.values()]


def _cpu_per_text(sign, repeat=3):
    """Thread CPU µs per text, over every base text of the corpus (the best of `repeat` passes)."""
    texts = [base["text"] for base in BASES.values()]
    best = None
    for _ in range(repeat):
        started = time.thread_time_ns()
        for text in texts:
            sign(text)
        spent = (time.thread_time_ns() - started) / len(texts) / 1000
        best = spent if best is None else min(best, spent)
    return best


# -- 1b. disguises, lengths and what folding costs ----------------------------------


def disguises():
    """Per disguise: the share of the corpus's posts it leaves the same (caught) and the posts it makes
    the same as another post (false positives); the link's spellings, emoji-only posts and ordinary
    phrases beside them."""
    from throttling.engine.content import fingerprints as content

    bases = [base["text"] for base in BASES.values()] + [LINK_POST]
    others = [(base["text"], other) for base in BASES.values() for other in base["different"]]
    others += [(a, b) for a, b in itertools.permutations(bases, 2)]
    rows = {}
    for name, disguise in DISGUISES.items():
        caught = [content.same(text, disguise(text)) for text in bases]
        false = [content.same(a, disguise(b)) for a, b in others]
        rows[name] = {"caught": [sum(caught), len(caught)], "false": [sum(false), len(false)]}
    other_links = [LINK_POST.replace("/buy", "/sell"), LINK_POST.replace("pharma", "farm"), "Cheap pills at"]
    rows["eight spellings of one link (short post)"] = {
        "caught": [sum(content.same(LINK_POST, s) for s in LINK_SPELLINGS), len(LINK_SPELLINGS)],
        "false": [sum(content.same(LINK_POST, o) for o in other_links), len(other_links)],
    }
    rows["emoji-only posts repeated (another emoji, “:)” and “:(”: false)"] = {
        "caught": [sum(content.same(a, b) for a, b, _ in EMOJI_ONLY), len(EMOJI_ONLY)],
        "false": [sum(content.same(a, d) for a, _, d in EMOJI_ONLY), len(EMOJI_ONLY)],
    }
    ordinary = [content.fingerprint(p).makes_wave() for p in ORDINARY]
    rows["ordinary phrases in seven languages, from many members (counted towards a wave: false)"] = {
        "caught": None,
        "false": [sum(ordinary), len(ordinary)],
    }
    return rows


LENGTHS = (8, 10, 12, 15, 20, 30)


def by_length():
    """Recall of a one-word change by text length (windows of the corpus's texts, every second word), and
    false positives among windows of the same length from different texts."""
    from throttling.engine.content import fingerprints as content

    texts = [b["text"] for b in BASES.values()] + [o for b in BASES.values() for o in b["different"]]
    vocab = sorted({w for t in texts for w in re.findall(r"[A-Za-z]+", t)})
    rng = random.Random(5)
    out = {}
    for n in LENGTHS:
        windows = [
            (i, words[start : start + n])
            for i, t in enumerate(texts)
            for words in [t.split()]
            for start in range(0, len(words) - n + 1, 2)
        ]
        caught = 0
        for _, w in windows:
            i = rng.randrange(n)
            changed = list(w)
            changed[i] = rng.choice([x for x in vocab if x.lower() != w[i].lower()])
            caught += content.same(" ".join(w), " ".join(changed))
        keys = {i: set(content.fingerprint(" ".join(w)).keys) for i, (_, w) in enumerate(windows)}
        pairs = false = 0
        for (i, (ta, _)), (j, (tb, _)) in itertools.combinations(enumerate(windows), 2):
            if ta != tb:
                pairs += 1
                false += bool(keys[i] & keys[j])
        out[n] = {"caught": [caught, len(windows)], "false": [false, pairs]}
    return out


def kilobyte_texts(rng, n, non_ascii):
    """`n` fresh texts of about 1 KB (1,000 characters) of the corpus's words; with `non_ascii`, one
    word of each has a letter outside ASCII."""
    words = sorted({w for base in BASES.values() for w in re.findall(r"[a-z]+", base["text"].lower())})
    out = []
    for _ in range(n):
        chosen = rng.choices(words, k=200)
        if non_ascii:
            chosen[rng.randrange(len(chosen))] = rng.choice(("café", "naïve", "Zürich", "señor", "smörgås"))
        out.append((" ".join(chosen)[:990] + " " + os.urandom(4).hex()).capitalize())
    return out


def fingerprint_cost(count):
    """Thread CPU µs per fresh 1 KB text to fingerprint: ASCII, one letter outside ASCII, half and half."""
    from throttling.engine.content import fingerprints as content

    content.fingerprint("é")  # the Unicode tables, built once per process
    rng = random.Random(3)
    out = {}
    ascii_texts, other_texts = kilobyte_texts(rng, count, False), kilobyte_texts(rng, count, True)
    russian = ["Привет всем, я нашёл отличный сайт, где платят за тестирование приложений из дома"] * 1
    chinese = ["我的后刹车每次停车都会响，上周末已经用酒精清洁了轮圈并且换了新的刹车片，下雨的时候声音更大。"]
    suites = {
        "ascii": ascii_texts,
        "non_ascii": other_texts,
        "half": [t for pair in zip(ascii_texts, other_texts) for t in pair][:count],
        "russian": [(russian[0] + " " + os.urandom(3).hex() + " ") * 12 for _ in range(count // 4)],
        "chinese": [(chinese[0] + os.urandom(3).hex()) * 20 for _ in range(count // 4)],
    }
    for name, texts in suites.items():
        best = None
        for _ in range(3):
            fresh = [t + " " + os.urandom(2).hex() for t in texts]  # never seen by the process's caches
            started = time.thread_time_ns()
            for text in fresh:
                content.fingerprint(text)
            spent = (time.thread_time_ns() - started) / len(fresh) / 1000
            best = spent if best is None else min(best, spent)
        out[name] = {"us": best, "chars": statistics.mean(map(len, texts))}
    return out


# -- 4. one server against a cluster --------------------------------------------


def topologies(server_url, rounds, quick):
    """Median µs of one thread's decisions, without and with content, on one server and on a local
    3-master cluster (where a long post's wave has a slot of its own: two round trips)."""
    from django.test.utils import override_settings

    import throttling
    from tests.support.processes.topology import LocalCluster
    from throttling.engine.policies.cache import policies
    from throttling.models import ActionPolicy

    ActionPolicy.objects.create(
        action="bench-content-topology",
        period=3600,
        max_count=1000,
        same_content_max=1,
        same_content_members=5,
        same_content_period=PERIOD,
    )
    policies.clear()
    rng = random.Random(11)
    words = sorted({w for base in BASES.values() for w in re.findall(r"[a-z]+", base["text"].lower())})
    count = 300 if quick else 1000
    cluster = LocalCluster().start()
    try:
        runs = {}
        order = [(name, url) for url in (server_url, cluster.url) for name in ("without", "with")]
        order += [("with 1 KB", server_url)]
        for n in range(rounds):
            rng.shuffle(order)
            for name, url in order:
                topology = "cluster" if url == cluster.url else "server"
                if name == "with 1 KB":
                    posts = kilobyte_texts(rng, count, False)
                    posts[1::2] = kilobyte_texts(rng, count // 2, True)
                else:
                    posts = [" ".join(rng.sample(words, 40)) for _ in range(count)]
                members = [f"topology-{n}-{i}" for i in range(count)]
                with override_settings(THROTTLING_REDIS_URL=url):
                    for i in range(50):
                        throttling.check(f"warm-{n}-{i}", "bench-content-topology", content=posts[i])
                    times = []
                    for who, post in zip(members, posts):
                        text = post if name != "without" else None
                        started = time.perf_counter_ns()
                        throttling.check(who, "bench-content-topology", content=text)
                        times.append(time.perf_counter_ns() - started)
                runs.setdefault(f"{topology}: {name} content", []).append(statistics.median(times) / 1000)
    finally:
        cluster.stop()
    return {name: statistics.median(medians) for name, medians in runs.items()}


# -- the run -----------------------------------------------------------------


def main(argv=None):
    options = parse_args(argv)
    if options.render:
        results = json.loads(RESULTS_JSON.read_text(encoding="utf-8"))
        publish(render(results), results, False, RESULTS_MD, RESULTS_JSON)
        return 0
    started = time.monotonic()
    with bench_site("throttling-content-") as (server, _db_dir):
        import redis
        from django.contrib.auth import get_user_model

        user = get_user_model().objects.create_user("bench-content")
        results = {
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "python": platform.python_version(),
            "redis_server": redis.Redis.from_url(server.url).info("server")["redis_version"],
            "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
            "seeds": options.seeds,
            "rounds": options.rounds,
        }
        results["corpus"] = corpus(options.seeds)
        results["disguises"] = disguises()
        results["lengths"] = by_length()
        results["cost"] = fingerprint_cost(300 if options.quick else 2000)
        results["redis"] = inside_redis(server.url, user, options.rounds, options.quick)
        results["memory"] = memory(server.url, user)
        if not options.no_cluster:
            results["topologies"] = topologies(server.url, 3 if options.quick else 5, options.quick)
        results["elapsed_s"] = round(time.monotonic() - started, 1)
    publish(render(results), results, options.quick, RESULTS_MD, RESULTS_JSON)
    return 0


def _pct(x):
    if x == 0:
        return "0"
    return f"{x:.2%}" if x < 0.01 else f"{x:.0%}"


def _share(pair):
    n, total = pair
    return f"{n}/{total} ({n / total:.0%})" if total else "—"


def _render_disguises(results):
    lines = []
    if "disguises" in results:
        lines += [
            "## Disguises",
            "",
            "<!-- --8<-- [start:disguises] -->",
            "What a spammer varies that a reader does not see. *Caught*: each of the corpus's posts (and a "
            "short post with a link) against itself disguised, the same post as it must be. *False "
            "positives*: each post against every other post disguised (other posts on its topic, other "
            "topics), which must stay apart; for ordinary phrases, those that would count towards a wave.",
            "",
            "| Variant | Caught | False positives |",
            "|---|--:|--:|",
        ]
        for name, row in results["disguises"].items():
            caught = "—" if row["caught"] is None else _share(row["caught"])
            lines.append(f"| {name} | {caught} | {row['false'][0]}/{row['false'][1]} |")
        lines += ["<!-- --8<-- [end:disguises] -->", ""]
    if "lengths" in results:
        lines += [
            "## Recall by length",
            "",
            "<!-- --8<-- [start:lengths] -->",
            "Windows of every second word of the corpus's texts, each with one word replaced by another of "
            "the corpus: the share still the same post; false positives among windows of the same length "
            "from different texts. Texts under 30 words have 6 band keys of 2 hashes (a text near the bar "
            "both kinds), longer ones 4 of 3; under 8 words a text is compared exactly.",
            "",
            "| Words | One word changed: the same | False positives |",
            "|--:|--:|--:|",
        ]
        for n, row in results["lengths"].items():
            lines.append(f"| {n} | {_share(row['caught'])} | {row['false'][0]}/{row['false'][1]:,} |")
        lines += ["<!-- --8<-- [end:lengths] -->", ""]
    if "cost" in results:
        cost = results["cost"]
        labels = {
            "ascii": "1 KB, ASCII",
            "non_ascii": "1 KB, one letter outside ASCII",
            "half": "1 KB, half of them with a letter outside ASCII",
            "russian": "Russian (Cyrillic throughout)",
            "chinese": "Chinese",
        }
        half = cost["half"]["us"]
        met = "met" if half <= FINGERPRINT_TARGET_US else "**not met**"
        lines += [
            "## What folding costs",
            "",
            "<!-- --8<-- [start:cost] -->",
            "Thread CPU µs to fingerprint a fresh text (never seen by the process), the best of three passes; "
            "the Unicode tables are built before (once per process, at its first text outside ASCII).",
            "",
            "| Texts | Characters | µs per text |",
            "|---|--:|--:|",
        ]
        for name, row in cost.items():
            lines.append(f"| {labels[name]} | {row['chars']:,.0f} | {row['us']:.1f} |")
        lines += [
            "",
            f"Target: a fresh 1 KB text (half of them with a letter outside ASCII) ≤ {FINGERPRINT_TARGET_US} µs: "
            f"**{half:.1f} µs** ({met}).",
            "<!-- --8<-- [end:cost] -->",
            "",
        ]
    return lines


FINGERPRINT_TARGET_US = 20
DECISION_TARGET = 1.6


def render(results):
    c = results["corpus"]
    lines = [
        "# Repeated content benchmark",
        "",
        "*Written by `python -m bench.content`: this page is generated, never edited by hand.*",
        "",
        f"{results['date']} · Python {results['python']} · Redis {results['redis_server']} · {results['machine']} · "
        f"{results['elapsed_s']} s in all.",
        "",
        "## What counts as the same",
        "",
        "<!-- --8<-- [start:corpus] -->",
        f"The corpus: {len(BASES)} posts of 30 to 60 words (spam with a link, and ordinary posts), each with a "
        "variant of every kind below, and two other posts on its topic "
        "(`bench/content_corpus.py` in the repository). Each cell is the share of "
        f"{results['seeds']} hash seeds under which the method calls the pair the same; mean Jaccard similarity "
        "of the pairs' word pairs in brackets.",
        "",
    ]
    head = "| Variant (pairs) | " + " | ".join(m["label"] for m in c["methods"].values()) + " |"
    lines += [head, "|---|" + "--:|" * len(c["methods"])]
    for kind in KINDS:
        cells = [_pct(m["caught"][kind]) for m in c["methods"].values()]
        lines.append(f"| {kind} ({c['pairs'][kind]}; {c['similarity'][kind]:.2f}) | " + " | ".join(cells) + " |")
    lines.append(
        f"| *other post on the topic: wrongly the same* ({len(different_pairs())}; {c['similarity']['different']:.2f}) | "
        + " | ".join(_pct(m["same_topic_false"]) for m in c["methods"].values())
        + " |"
    )
    lines.append(
        f"| *posts of different topics: wrongly the same* ({c['cross_pairs']}) | "
        + " | ".join(_pct(m["across_topics_false"]) for m in c["methods"].values())
        + " |"
    )
    lines.append(
        "| Python CPU per text (µs) | " + " | ".join(f"{m['cpu_us']:.0f}" for m in c["methods"].values()) + " |"
    )
    f = c["fixed"]
    caught = ", ".join(f"{kind} {n}/{total}" for kind, (n, total) in f["caught"].items())
    lines += [
        "",
        f"The shipped hashes (no seed): {caught}; other posts on the topic the same: "
        f"{f['same_topic_false']}/{f['same_topic_pairs']}; posts under 8 words compared exactly only: "
        f"{'yes' if f['short_as_exact'] else 'no'}. A fresh text costs {f['cpu_fresh_us']:.0f} µs of Python CPU to "
        "fingerprint; a text seen lately by the process, a dictionary lookup.",
        "<!-- --8<-- [end:corpus] -->",
        "",
    ]
    lines += _render_disguises(results)
    lines += ["## Inside Redis", "", "<!-- --8<-- [start:redis] -->"]
    lines += render_redis(results["redis"], results["rounds"])
    lines += [
        "<!-- --8<-- [end:redis] -->",
        "",
        "## Memory",
        "",
        "<!-- --8<-- [start:memory] -->",
        "`MEMORY USAGE … SAMPLES 0` of the content indexes, after the posts below; no text is kept, only "
        "12-byte keys, times and members. Every index is two hashes, one per generation of two periods: "
        f"a post is forgotten one to three periods after it was made (TTLs below, for a period of {PERIOD} s).",
        "",
        "| Index | Posts | Bytes per remembered post | Bytes per member of a wave | TTLs (s) |",
        "|---|--:|--:|--:|---|",
    ]
    for label, row in results["memory"].items():
        wave = f"{row['bytes_per_wave_member']:.0f}" if "bytes_per_wave_member" in row else "—"
        lines.append(
            f"| {label} | {row['posts']:,} | {row['bytes_per_post']:.0f} | {wave} | "
            f"{', '.join(map(str, row['ttl_s']))} |"
        )
    lines += ["<!-- --8<-- [end:memory] -->", ""]
    t = results.get("topologies")
    if t:
        lines += [
            "## One server and a cluster",
            "",
            "<!-- --8<-- [start:topologies] -->",
            "One thread's decisions of new members (a new 40-word post each, or none), median µs of the "
            "medians of interleaved rounds, against the benchmark's server and a local 3-master Redis "
            "Cluster on the same machine. On the cluster the action's wave index has a slot of its own, "
            "so a decision with a long post takes two round trips: the wave's half, then the member's.",
            "",
            "| | without content | with content | with vs without |",
            "|---|--:|--:|--:|",
        ]
        for topology in ("server", "cluster"):
            without, with_ = t[f"{topology}: without content"], t[f"{topology}: with content"]
            lines.append(f"| {topology} | {without:.1f} | {with_:.1f} | {with_ / without:.2f}× |")
        kilobyte = t.get("server: with 1 KB content")
        if kilobyte:
            without = t["server: without content"]
            ratio = kilobyte / without
            lines.append(
                f"| server, 1 KB texts (half with a letter outside ASCII) | {without:.1f} | {kilobyte:.1f} | {ratio:.2f}× |"
            )
            met = "met" if ratio <= DECISION_TARGET else "**not met**"
            lines += [
                "",
                f"Target: a decision with a fresh 1 KB text ≤ {DECISION_TARGET}× the same decision without, in "
                f"the same run: **{ratio:.2f}×** ({met}).",
            ]
        lines += ["<!-- --8<-- [end:topologies] -->", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
