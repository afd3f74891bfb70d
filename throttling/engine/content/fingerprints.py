"""What a post says, made comparable: its normalised text, exact digest and near-duplicate band keys (pure functions).

Nothing here keeps a text: a decision sends Redis only the keys computed from it (see Guide ›
Repeated content).
"""

import hashlib
import re
import struct
import unicodedata
import zlib
from bisect import bisect_left
from itertools import repeat
from typing import NamedTuple

# Only the first characters of a post are compared: a post of a megabyte costs no more than this.
MAX_CHARS = 20_000
# Posts of fewer words ("Thanks!", "+1", "Same here.") only ever count as one member's exact
# repeat: members say them to each other all the time, so they are never a wave.
SHORT_WORDS = 8
# Near-duplicates: MinHash over word pairs, one hash ordering cut into BANDS ranges (one
# permutation hashing); a band key is the ROWS smallest hashes of its range. Two posts with a
# similarity of 0.8 share a band with probability about 1 - (1 - 0.8**ROWS)**BANDS. The
# benchmark's corpus chose these (bench/content.py, Guide › Repeated content).
BANDS = 4
ROWS = 3
# A content key, as Redis stores it: a band's ROWS hashes of 32 bits, or a short post's digest.
KEY_BYTES = 4 * ROWS
# Where each range of the 32-bit hash space ends.
_BOUNDS = tuple((1 << 32) * j // BANDS for j in range(1, BANDS + 1))
# The band keys' hashes packed big-endian, so a key's first bytes name its range: by their number.
_PACK = [struct.Struct(f">{n}I").pack for n in range(BANDS * ROWS + 1)]

# Tracking parameters of links: the same link with a campaign's parameters is the same link.
_TRACKING = re.compile(
    r"(?:utm_[a-z0-9_]*|fbclid|gclid|dclid|gbraid|wbraid|msclkid|mc_cid|mc_eid|igshid|yclid|twclid|ttclid"
    r"|_ga|_gl|_hsenc|_hsmi|mkt_tok|s_cid|si|spm|vero_id|oly_anon_id|oly_enc_id)\Z",
    re.IGNORECASE,
)
# A link's query: it ends where the link does (white space), before punctuation that closes a sentence.
_QUERY = re.compile(r"(https?://[^\s?#]+)\?([^\s#]*?)(?=[)\].,!?;:'\"]*(?:[\s#]|\Z))", re.IGNORECASE)
# Emoji, pictographs, dingbats, keycaps, flags' tags and variation selectors: decoration, not words.
_SYMBOLS = re.compile(
    "[\U0001f000-\U0001faff\u2190-\u21ff\u2300-\u23ff\u2460-\u27bf\u2900-\u297f\u2b00-\u2bff"
    "\u3030\u303d\u3297\u3299\ufe00-\ufe0f\u200b-\u200d\u2060\u20e3\U000e0000-\U000e007f\u00a9\u00ae\u2122]+"
)
_QUOTES = re.compile("[\u2018\u2019\u201a\u201b\u2032\u00b4]")
_DOUBLE_QUOTES = re.compile("[\u201c\u201d\u201e\u201f\u2033\u00ab\u00bb]")
_PUNCTUATION_RUN = re.compile(r"([^\w\s])[^\w\s]+")
# Words; in Chinese and Japanese, which write no spaces, each character is a word.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_WORDS = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+")
# ASCII text (most posts) takes a faster road to the same words: one pass over its bytes lowers its
# letters and makes a space of everything that is not a letter, a digit or "_", then it is split.
_ASCII_WORDS = bytes(
    c + 32 if 65 <= c <= 90 else c if 48 <= c <= 57 or 97 <= c <= 122 or c == 95 else 32 for c in range(256)
)


def _without_tracking(match):
    kept = [part for part in match.group(2).split("&") if part and not _TRACKING.match(part.partition("=")[0])]
    return match.group(1) + ("?" + "&".join(kept) if kept else "")


def _folded(text):
    """The text with its case folded, its links' tracking parameters, emoji and symbols dropped."""
    text = text[:MAX_CHARS]
    if text.isascii():
        return _untracked(text.lower())  # NFKC and casefold() change nothing else in ASCII
    folded = _SYMBOLS.sub(" ", unicodedata.normalize("NFKC", text).casefold())
    return _untracked(_DOUBLE_QUOTES.sub('"', _QUOTES.sub("'", folded)))


def _untracked(text):
    """The text with its links' tracking parameters dropped (only links have them)."""
    if "?" in text and "://" in text:
        return _QUERY.sub(_without_tracking, text)
    return text


def _collapsed(folded):
    return " ".join(_PUNCTUATION_RUN.sub(r"\1", folded).split())


def normalise(text):
    """The text as compared: Unicode NFKC, case folded, links without tracking parameters, emoji and
    symbols dropped, typographic quotes made plain, each run of punctuation one mark, white space collapsed."""
    return _collapsed(_folded(text))


def _tokens(folded):
    """The words of a folded text as bytes (in Chinese and Japanese, its characters)."""
    if folded.isascii():
        return folded.encode().translate(_ASCII_WORDS).split()
    # Words hold no white space, so joined and split again they are encoded in one call, not one each.
    return " ".join(_WORDS.findall(folded)).encode("utf-8", "surrogatepass").split()


def _text_tokens(text):
    """(_tokens(_folded(text)), _folded(text) or None): an ASCII text's words come straight from its
    bytes (the table lowers them as they are cut), and it is folded only when it is compared exactly."""
    text = text[:MAX_CHARS]
    if text.isascii():
        return _untracked(text).encode().translate(_ASCII_WORDS).split(), None
    folded = _folded(text)
    return _tokens(folded), folded


def words(text):
    """The words of a text as compared (in Chinese and Japanese, its characters)."""
    return [word.decode() for word in _tokens(_folded(text))]


def digest(normalised):
    """The exact key of a normalised text (KEY_BYTES bytes)."""
    data = normalised.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=KEY_BYTES, person=b"throttling-text").digest()


def bands(tokens, seed=0):
    """The near-duplicate band keys of a text's words (bytes), packed: KEY_BYTES bytes each, b"" when
    too few word pairs fill a band.

    Each word is hashed once (CRC-32), and each pair of neighbouring words by carrying on the first
    one's CRC over the second, so every hash is a C call over data already there. The sorted pair
    hashes are cut into BANDS equal ranges of the hash space, and a band's key is its range's ROWS
    smallest (distinct) hashes, side by side: the range is in their top bits, so keys of different
    bands never meet. Changing a word changes two pairs, so most bands of a long text keep their key.
    `seed`: another hash of words (the CRC started from it), for the benchmark's robustness figures.
    """
    if len(tokens) <= ROWS:
        return b""
    words = map(zlib.crc32, tokens, repeat(seed)) if seed else map(zlib.crc32, tokens)
    pairs = sorted(map(zlib.crc32, tokens[1:], words))
    rows = []
    start = 0
    for bound in _BOUNDS:
        end = bisect_left(pairs, bound, start)
        if end - start >= ROWS:
            a, b, c = chosen = pairs[start : start + ROWS]  # ROWS is 3
            if a == b or b == c:
                # A pair of words the text repeats: its hash is there twice.
                chosen = sorted(set(pairs[start:end]))[:ROWS]
            if len(chosen) == ROWS:
                rows += chosen
        start = end
    return _PACK[len(rows)](*rows)


class Fingerprint(NamedTuple):
    """What a decision compares of a post: its keys, packed (band keys, or its exact digest; KEY_BYTES
    bytes each, as the scripts take them), and whether it is short."""

    packed: bytes
    short: bool

    @property
    def keys(self):
        """The keys one by one (the content indexes' fields)."""
        packed = self.packed
        return tuple(packed[i : i + KEY_BYTES] for i in range(0, len(packed), KEY_BYTES))


def fingerprint(text):
    """The Fingerprint of a post's text, or None when nothing is left of it once normalised."""
    tokens, folded = _text_tokens(text)
    short = len(tokens) < SHORT_WORDS
    # Identical long texts share every band; a text too short to fill one is compared exactly.
    packed = b"" if short else bands(tokens)
    if not packed:
        normalised = _collapsed(_folded(text) if folded is None else folded)
        if not normalised:
            return None
        packed = digest(normalised)
    return Fingerprint(packed, short)


def same(a, b):
    """True when two texts count as the same post (their keys meet, and short ones only exactly)."""
    fa, fb = fingerprint(a), fingerprint(b)
    if fa is None or fb is None:
        return False
    return bool(set(fa.keys) & set(fb.keys))
