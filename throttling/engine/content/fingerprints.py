"""What a post says, made comparable: its normalised text, exact digest and near-duplicate band keys (pure functions).

Nothing here keeps a text: a decision sends Redis only the keys computed from it (see Guide ›
Repeated content).
"""

import hashlib
import re
import struct
import zlib
from bisect import bisect_left
from itertools import repeat
from typing import NamedTuple

from . import normalise as reader
from .normalise import MAX_CHARS  # noqa: F401 - what is compared of a post, once its filler is gone

# Posts of fewer words ("Thanks!", "+1", "Same here.") are compared exactly, by their words: too few
# word pairs for near-duplicates.
SHORT_WORDS = 8
# A post without a link, an address or a mention counts towards a wave only from this many words
# (THROTTLING_CONTENT_WAVE_WORDS): "Happy birthday!" is what many members write, not a wave.
WAVE_WORDS = 12
# Chinese and Japanese write no spaces: their characters are compared one by one, and measured as
# words at this many characters a word, so a sentence and its English translation are about as long
# ("祝你生日快乐，愿你今年一切顺利" is 13 characters, "Happy birthday, all the best this year" 8 words).
CJK_PER_WORD = 1.5
# Near-duplicates: MinHash over word pairs, one hash ordering cut into BANDS ranges (one
# permutation hashing); a band key is the ROWS smallest hashes of its range. Two posts with a
# similarity of 0.8 share a band with probability about 1 - (1 - 0.8**ROWS)**BANDS. The
# benchmark's corpus chose these (bench/content.py, Guide › Repeated content).
BANDS = 4
ROWS = 3
# A content key, as Redis stores it: a band's ROWS hashes of 32 bits, or a short post's digest.
KEY_BYTES = 4 * ROWS
# A text of fewer words has too few pairs to fill BANDS ranges of ROWS: its keys are MEDIUM_BANDS
# ranges' MEDIUM_ROWS smallest (a one-word change of a 12-word text: 98 % of the corpus's windows the
# same post, against 71 % with BANDS of ROWS; bench/content.py). Within MEDIUM_MARGIN of the bar a
# text has both kinds of keys.
MEDIUM_WORDS = 30
MEDIUM_BANDS = 6
MEDIUM_ROWS = 2
MEDIUM_MARGIN = 6
# Where each range of the 32-bit hash space ends.
_BOUNDS = tuple((1 << 32) * j // BANDS for j in range(1, BANDS + 1))
_MEDIUM_BOUNDS = tuple((1 << 32) * j // MEDIUM_BANDS for j in range(1, MEDIUM_BANDS + 1))
# The band keys' hashes packed big-endian, so a key's first bytes name its range: by their number.
_PACK = [struct.Struct(f">{n}I").pack for n in range(BANDS * ROWS + MEDIUM_BANDS * 3 + 1)]

# Words; in Chinese and Japanese, which write no spaces, each character is a word.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_WORDS = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")
_CJK_CHARS = re.compile(rf"[{_CJK}]")
# ASCII text (most posts) takes a faster road to the same words: one pass over its bytes folds its
# letters as the skeleton does (lower case, "0" as "o", "1" as "l"; "m" as "rn" after it),
# deletes Markdown's emphasis and makes a space of everything that is not a letter or a digit.
_ASCII_SKELETON = {c: v for c, v in reader.ASCII_SKELETON.items() if len(v) == 1}
_ASCII_WORDS = bytes(
    ord(_ASCII_SKELETON.get(chr(c), chr(c).lower())) if c < 128 and chr(c).isalnum() else 32 for c in range(256)
)
_EMPHASIS = b"*_~`"


def _ascii_tokens(text):
    data = text.encode().translate(_ASCII_WORDS, _EMPHASIS)
    if b"m" in data:
        data = data.replace(b"m", b"rn")
    return data.split()


def _tokens(text):
    """The words of a text a reader sees (normalise.seen) as bytes, folded (in Chinese and Japanese, its characters)."""
    return _measured(text)[0]


def _measured(text):
    """(_tokens(text), how many words they are: Chinese and Japanese characters CJK_PER_WORD to a word)."""
    if text.isascii():
        tokens = _ascii_tokens(text)
        return tokens, len(tokens)
    # Its other characters are folded already (normalise.seen); each word is cut once per process.
    # Words hold no white space, so joined and split again they are encoded in one call, not one each.
    joined = " ".join(map(_word_tokens.__getitem__, text.split()))
    data = joined.encode("utf-8", "surrogatepass")
    tokens = data.split()
    if not data.translate(None, _NOT_CJK_LEAD):
        return tokens, len(tokens)
    cjk = len(_CJK_CHARS.findall(joined))
    return tokens, len(tokens) - cjk + cjk / CJK_PER_WORD


class _WordTokens(dict):
    """A word of a text outside ASCII (folded but for its ASCII letters) -> its words as compared, joined
    by a space (in Chinese and Japanese, its characters): cut once per process."""

    def __missing__(self, word):
        if len(self) >= reader.WORDS_MAX:
            self.clear()
        cut = self[word] = " ".join(_WORDS.findall(reader.ascii_road(word)))
        return cut


_word_tokens = _WordTokens()
# Every byte but the lead bytes of U+3000 to U+9FFF and U+F000 to U+FFFF in UTF-8: whether a text's
# UTF-8 has any says, in C, whether it may hold Chinese or Japanese.
_NOT_CJK_LEAD = bytes(b for b in range(256) if not 0xE3 <= b <= 0xE9 and b != 0xEF)


def normalise(text):
    """The text as compared: what a reader sees (markup unwrapped, links canonical, invisible
    characters, lookalike letters, accents and case folded), its words joined by a space; a text
    without words is its visible characters, each run of one character once."""
    seen = reader.seen(text).text
    tokens = _tokens(seen)
    if tokens:
        return b" ".join(tokens).decode("utf-8", "surrogatepass")
    return reader.visible(seen)


def words(text):
    """The words of a text as compared (in Chinese and Japanese, its characters)."""
    return [word.decode("utf-8", "surrogatepass") for word in _tokens(reader.seen(text).text)]


def digest(data):
    """The exact key of a text's words, or of its visible characters (bytes; KEY_BYTES bytes)."""
    return hashlib.blake2b(data, digest_size=KEY_BYTES, person=b"throttling-text").digest()


def bands(tokens, seed=0):
    """The near-duplicate band keys of a text's words (bytes), packed: KEY_BYTES bytes each, b"" when
    too few word pairs fill a band.

    Each word is hashed once (CRC-32), and each pair of neighbouring words by carrying on the first
    one's CRC over the second, so every hash is a C call over data already there. The sorted pair
    hashes are cut into BANDS equal ranges of the hash space, and a band's key is its range's ROWS
    smallest (distinct) hashes, side by side: the range is in their top bits, so keys of different
    bands never meet. Changing a word changes two pairs, so most bands of a long text keep their key.
    A text of fewer than MEDIUM_WORDS words has too few pairs for that: its keys are MEDIUM_BANDS
    ranges' MEDIUM_ROWS smallest (and a 0, so they never meet a long text's); a text near the bar has
    both, so a word added or taken across it changes nothing.
    `seed`: another hash of words (the CRC started from it), for the benchmark's robustness figures.
    """
    n = len(tokens)
    if n <= MEDIUM_ROWS:
        return b""
    words = map(zlib.crc32, tokens, repeat(seed)) if seed else map(zlib.crc32, tokens)
    pairs = sorted(map(zlib.crc32, tokens[1:], words))
    rows = _cut(pairs, _BOUNDS, ROWS) if n >= MEDIUM_WORDS - MEDIUM_MARGIN else []
    if n < MEDIUM_WORDS + MEDIUM_MARGIN:
        medium = _cut(pairs, _MEDIUM_BOUNDS, MEDIUM_ROWS)
        # Two hashes and a 0 (never a long text's key: its three hashes ascend).
        rows += [h for i in range(0, len(medium), MEDIUM_ROWS) for h in (*medium[i : i + MEDIUM_ROWS], 0)]
    return _PACK[len(rows)](*rows)


def _cut(pairs, bounds, count):
    """The `count` smallest distinct hashes of each range of `pairs` (sorted) that has that many, one after another."""
    rows = []
    start = 0
    for bound in bounds:
        end = bisect_left(pairs, bound, start)
        if end - start >= count:
            chosen = pairs[start : start + count]
            if len(set(chosen)) < count:
                # A pair of words the text repeats: its hash is there twice.
                chosen = sorted(set(pairs[start:end]))[:count]
            if len(chosen) == count:
                rows += chosen
        start = end
    return rows


class Fingerprint(NamedTuple):
    """What a decision compares of a post: its keys, packed (band keys, or its exact digest; KEY_BYTES
    bytes each, as the scripts take them), whether it is short (compared exactly), whether it has a
    payload (a link, an address, a mention) and how many words it is (Chinese and Japanese measured
    CJK_PER_WORD characters to a word)."""

    packed: bytes
    short: bool
    payload: bool = False
    length: float = 0

    @property
    def keys(self):
        """The keys one by one (the content indexes' fields)."""
        packed = self.packed
        return tuple(packed[i : i + KEY_BYTES] for i in range(0, len(packed), KEY_BYTES))

    def makes_wave(self, words=WAVE_WORDS):
        """Whether the post counts towards a wave: with a payload, or from `words` words."""
        return self.payload or self.length >= words


def fingerprint(text):
    """The Fingerprint of a post's text, or None when nothing is left of it once normalised.

    A text is what a reader sees of it (see normalise.seen and fold); a short text's key is the
    digest of its words (the link among them), a text without words that of its visible characters."""
    seen = reader.seen(text)
    tokens, length = _measured(seen.text)
    short = len(tokens) < SHORT_WORDS
    # Identical long texts share every band; a text too short to fill one is compared exactly.
    packed = b"" if short else bands(tokens)
    if not packed:
        if tokens:
            packed = digest(b" ".join(tokens))
        else:
            visible = reader.visible(seen.text)
            if not visible:
                return None
            packed = digest(b"\x00" + visible.encode("utf-8", "surrogatepass"))
    return Fingerprint(packed, short, seen.payload, length)


def same(a, b):
    """True when two texts count as the same post (their keys meet)."""
    fa, fb = fingerprint(a), fingerprint(b)
    if fa is None or fb is None:
        return False
    return bool(set(fa.keys) & set(fb.keys))
