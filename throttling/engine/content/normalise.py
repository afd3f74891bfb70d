"""What a reader sees of a post: its markup unwrapped, its links canonical, its letters folded to Unicode's skeleton.

Pure functions over Unicode's own data (see Guide › Repeated content › What counts as the same): the
Default_Ignorable_Code_Point property, NFKD, and the confusables of UTS #39 as the
`confusable_homoglyphs` package ships them. The folding tables are built on the first text outside
ASCII, so a process that only ever sees ASCII never loads them.
"""

import html
import re
import unicodedata
from importlib import resources
from json import loads
from typing import NamedTuple
from urllib.parse import unquote

# What is compared of a post once its filler is gone: a post of a megabyte costs no more than this.
MAX_CHARS = 20_000
# Runs of filler other than white space and the usual invisible characters (which go however many
# they are) removed from a long post, at most.
MAX_RUNS = 20_000

# -- markup and links -----------------------------------------------------------

# Links with a scheme or a "www.", and links written without either that a reader still follows
# (a host and a path: "pharma.example/buy").
_LINK = re.compile(
    r"(?:\b(?:https?|ftp)://|\bwww\.)[^\s<>\"'`\[\]{}|\\^]+"
    r"|\b(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,}(?::\d+)?/[^\s<>\"'`\[\]{}|\\^]*",
    re.IGNORECASE,
)
_SCHEME = re.compile(r"(?:https?|ftp)://", re.IGNORECASE)
# A link ends before the punctuation that closes a sentence or a bracket around it.
_LINK_TAIL = ".,!?;:'\")]*_~"
# Addresses and mentions are a payload too: the post is about reaching someone.
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_MENTION = re.compile(r"(?<![\w@.])@\w{2,}")
# Tracking parameters of links: the same link with a campaign's parameters is the same link.
_TRACKING = re.compile(
    r"(?:utm_[a-z0-9_]*|fbclid|gclid|dclid|gbraid|wbraid|msclkid|mc_cid|mc_eid|igshid|yclid|twclid|ttclid"
    r"|_ga|_gl|_hsenc|_hsmi|mkt_tok|s_cid|si|spm|vero_id|oly_anon_id|oly_enc_id)\Z",
    re.IGNORECASE,
)
_DEFAULT_PORTS = {"http": ":80", "https": ":443", "ftp": ":21"}
# Percent-escapes of unreserved characters (RFC 3986: letters, digits, "-", ".", "_", "~") mean the character.
_UNRESERVED_ESCAPE = re.compile(r"%(?:[46][1-9a-f]|[57][0-9a]|3[0-9]|2d|2e|5f|7e)", re.IGNORECASE)

# HTML: a link's target counts beside its label; inline elements join what they wrap, others part it.
_HTML_LINK = re.compile(r"<a\s[^<>]*?\bhref\s*=\s*[\"']?([^\"'\s<>]+)[^<>]*>", re.IGNORECASE)
_HTML_INLINE = re.compile(
    r"</?(?:a|abbr|b|bdi|bdo|cite|code|del|dfn|em|font|i|ins|kbd|mark|q|s|samp|small|span|strike|strong|sub|sup"
    r"|tt|u|var|wbr)\b[^<>]*>",
    re.IGNORECASE,
)
_HTML_TAG = re.compile(r"</?[a-z][a-z0-9]*\b[^<>]*>|<!--.*?-->", re.IGNORECASE | re.DOTALL)
_HTML_ENTITY = re.compile(r"&(?:#\d+|#x[0-9a-f]+|[a-z][a-z0-9]*);?", re.IGNORECASE)
# Markdown: [label](target "title"), ![alt](target), <target>; emphasis is folded away with the letters.
_MD_LINK = re.compile(r"!?\[([^\[\]]*)\]\(\s*<?([^()\s<>]+)>?(?:\s+[\"'][^\"']*[\"'])?\s*\)")
_AUTOLINK = re.compile(r"<((?:https?|ftp)://[^<>\s]+|[\w.+-]+@[\w-]+(?:\.[\w-]+)+)>", re.IGNORECASE)

# Filler a padding is made of, with invisible characters: runs of what is not a letter or a digit
# (white space, punctuation, emoji), longer than a link's "://".
_FILLER = re.compile(r"([\W_])[\W_]{3,}")
# The invisible characters paddings are mostly made of (zero-width space, joiners, word joiner, BOM,
# soft hyphen, the bidi controls).
_PADDING = "\u200b\u200c\u200d\u2060\ufeff\u00ad\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


class Seen(NamedTuple):
    """A post as a reader sees it, before its letters are folded: `text` with markup unwrapped, links
    canonical, filler and invisible characters gone, at most MAX_CHARS; `payload`: it has a link, an
    address or a mention (what a spammer's post is for)."""

    text: str
    payload: bool


def canonical_link(link):
    """A link as its target, however it is spelled: no scheme, no "www.", the host in lower case and
    Unicode (IDNA), no default port, no fragment, no tracking parameter, unreserved escapes decoded,
    no trailing slash. "HTTPS://WWW.Shop.example:443/a/?utm_source=x#top" is "shop.example/a"."""
    scheme = _SCHEME.match(link)
    rest = link[scheme.end() :] if scheme else link
    rest = rest.partition("#")[0]
    where, _, query = rest.partition("?")
    host, slash, path = where.partition("/")
    host = host.rpartition("@")[2].lower().rstrip(".")  # never a user's name
    if scheme:
        port = _DEFAULT_PORTS.get(scheme.group()[:-3].lower())
        if port and host.endswith(port):
            host = host[: -len(port)]
    if host.startswith("www."):
        host = host[4:]
    if "xn--" in host:
        try:
            host = fold(host.encode("ascii").decode("idna"))  # as a reader sees it, like the text around it
        except UnicodeError:
            pass
    path = (slash + path).rstrip("/")
    if "%" in path:
        path = _UNRESERVED_ESCAPE.sub(lambda m: unquote(m.group()), path)
    if query:
        kept = sorted(part for part in query.split("&") if part and not _TRACKING.match(part.partition("=")[0]))
        query = "&".join(kept)
    return f"{host}{path}?{query}" if query else host + path


def _link(match):
    link = match.group()
    trimmed = link.rstrip(_LINK_TAIL)
    if link.endswith(")") and link.count("(") > link.count(")") - 1:
        trimmed = link  # a bracket of the link's own ("…/Foo_(bar)")
    return f" {canonical_link(trimmed)} {link[len(trimmed) :]}"


def _markup(text, most=0):
    """HTML and markdown unwrapped: tags and entities gone, a link's target beside its label (`most`:
    at most this many of each kind, 0: all)."""
    if "&" in text and ";" in text:
        text = _HTML_ENTITY.sub(lambda m: html.unescape(m.group()), text, most)
    if "<" in text:
        text = _AUTOLINK.sub(r" \1 ", text, most)
        text = _HTML_LINK.sub(r" \1 ", text, most)
        text = _HTML_INLINE.sub("", text, most)
        text = _HTML_TAG.sub(" ", text, most)
    if "](" in text:
        text = _MD_LINK.sub(r"\1 \2 ", text, most)
    return text


def seen(text):
    """The Seen of a post's text (see Seen)."""
    # One character is looked for faster than two: "](" only in a text with a "]".
    marked = "<" in text or "&" in text or ("]" in text and "](" in text)
    if len(text) > MAX_CHARS:
        # Filler first, the cap after: a padding never fills what is compared. Markup is unwrapped
        # before it too ("&#8203;", "<b></b>" a thousand times are a padding).
        if marked:
            text = _markup(text, MAX_RUNS)
            marked = False
        if not text.isascii():
            for c in _PADDING:  # a padding's usual characters, however many, go in one C pass each
                if c in text:
                    text = text.replace(c, "")
        if len(text) > MAX_CHARS:
            text = " ".join(text.split())  # white space, however much, in C
            # Other filler is found by regular expressions, whose cost grows with what they replace:
            # at most MAX_RUNS runs each (a run of a million dots is one).
            if not text.isascii():
                text = _built().invisible.sub("", text, MAX_RUNS)
            text = _FILLER.sub(r" \1 ", text, MAX_RUNS)[:MAX_CHARS]  # one of it is kept: a wall of dots is seen
    if marked:
        # Before letters are folded: an entity may be any character ("Chea&#8203;p").
        text = _markup(text)
    if not text.isascii():
        # Before links are found: "httрs://рharma.example" (Cyrillic р) is the link a reader follows.
        text = fold(text)
    payload = False
    if "/" in text or "ww." in text or "WW." in text:
        text, links = _LINK.subn(_link, text)
        payload = links > 0
    if "@" in text:
        payload = payload or bool(_EMAIL.search(text) or _MENTION.search(text))
    return Seen(text, payload)


# -- folding: what a reader cannot tell apart -------------------------------------------

# Characters a reader cannot see in a word, and Markdown's emphasis around it: deleted, so they join
# the word rather than split it ("Chea\u200bp", "**Che**ap").
_EMPHASIS = "*_~`"

# ASCII letters and digits, case folded, as their skeleton (UTS #39) writes them: what the tables
# below map them to too (checked where they are built). Only "m" becomes two letters. Case is folded
# first, so "I" is "i" (as a reader of "PILLS" and "pills" sees), not the skeleton's "l".
ASCII_SKELETON = {"0": "o", "1": "l", "m": "rn"}


class _Tables(NamedTuple):
    invisible: re.Pattern  # every default-ignorable code point
    fold: dict  # str.translate's table: ignorables, marks and emphasis deleted, confusables as their skeleton


_tables = None


def _built():
    global _tables
    if _tables is None:
        _tables = _build()
    return _tables


def _scan():
    """(Unicode's Default_Ignorable_Code_Point, the combining marks Mn and Me), as code points.

    The first is derived as DerivedCoreProperties.txt derives it, from Python's own Unicode data:
    format characters (Cf), variation selectors and what PropList.txt lists as
    Other_Default_Ignorable_Code_Point, less white space, the interlinear annotation characters,
    Egyptian hieroglyph format controls and prepended concatenation marks."""
    other = [(0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x2065, 0x2065), (0x3164, 0x3164)]
    other += [(0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0xE0000, 0xE0000), (0xE0002, 0xE001F), (0xE0080, 0xE00FF)]
    other += [(0xE01F0, 0xE0FFF)]
    selectors = [(0x180B, 0x180D), (0x180F, 0x180F), (0xFE00, 0xFE0F), (0xE0100, 0xE01EF)]
    prepended = {0x0600, 0x0601, 0x0602, 0x0603, 0x0604, 0x0605, 0x06DD, 0x070F, 0x0890, 0x0891, 0x08E2}
    prepended |= {0x110BD, 0x110CD}
    ignorable, marks = set(), set()
    for start, end in other + selectors:
        ignorable.update(range(start, end + 1))
    category = unicodedata.category
    for planes in (range(0x20000), range(0xE0000, 0xE1000)):
        for code in planes:
            kind = category(chr(code))
            if kind == "Cf":
                ignorable.add(code)
            elif kind == "Mn" or kind == "Me":
                marks.add(code)
    ignorable -= set(range(0xFFF9, 0xFFFC)) | set(range(0x13430, 0x13440)) | prepended
    ignorable = {c for c in ignorable if not chr(c).isspace()}
    return ignorable, marks - ignorable


def _char_class(codes):
    """A regular expression's character class of `codes`, as ranges."""
    ranges, codes = [], sorted(codes)
    start = prev = codes[0]
    for code in codes[1:]:
        if code != prev + 1:
            ranges.append((start, prev))
            start = code
        prev = code
    ranges.append((start, prev))
    return (
        "["
        + "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges)
        + "]+"
    )


def _confusables():
    """{source: prototype} of UTS #39's confusables, from the data the `confusable_homoglyphs` package ships.

    The package lists each line of Unicode's confusables.txt both ways (source to prototype, and
    back); a prototype is never a source, so each prototype with the sources that map to it is a
    star: its centre is the prototype. A star of two (one source) is told by the prototype's length
    (a source is one code point), then by ASCII; else the smaller code point stands for both,
    which compares the same.
    """
    data = loads(resources.files("confusable_homoglyphs").joinpath("confusables.json").read_text("utf-8"))
    marks = dict.fromkeys((0x200E, 0x200F))  # written around right-to-left characters in the data
    links = {}
    for key, entries in data.items():
        links.setdefault(key.translate(marks), set()).update(entry["c"].translate(marks) for entry in entries)
    out = {}
    for node, others in links.items():
        if len(node) != 1:
            continue
        if len(others) == 1:
            [other] = others
            if len(links.get(other, ())) > 1 or len(other) > 1:
                out[node] = other  # a source of a prototype with many, or of a sequence
            elif len(links.get(other, ())) == 1 and len(other) == 1 and other != node:
                # A star of two: the ASCII one, else the smaller, stands for both.
                if (other.isascii(), -ord(other)) > (node.isascii(), -ord(node)):
                    out[node] = other
    return out


def _build():
    ignorable, marks = _scan()
    confusables = _confusables()
    # A capital's lookalike is its capital's letter: the skeleton writes "I" as "l", but "І" (Cyrillic)
    # is the "I" of "INFO", which is read as "info".
    capitals = {confusables.get(c, c): c.lower() for c in map(chr, range(65, 91))}
    for c in confusables.keys() & set(map(chr, range(128))):
        del confusables[c]  # ASCII keeps its shape ("|" is not "l", "I" is "i"), but for ASCII_SKELETON
    confusables.update(ASCII_SKELETON)
    deleted = ignorable | marks | set(map(ord, _EMPHASIS))

    def letter(c):
        if ord(c) in deleted:
            return ""
        prototype = confusables.get(c)
        if prototype is None:
            return c
        if c.casefold() != c and prototype in capitals:
            return capitals[prototype]
        return prototype

    def once(s):
        s = "".join(map(letter, unicodedata.normalize("NFKD", s)))
        s = unicodedata.normalize("NFKD", s.casefold())
        return "".join(map(letter, s))

    def final(c):
        s = c
        for _ in range(4):  # a prototype is never a source, but its folded case ("O" of "0") may be
            t = once(s)
            if t == s:
                break
            s = t
        return s

    if any(final(c) != v for c, v in ASCII_SKELETON.items()):
        raise RuntimeError("Unicode's skeleton of ASCII is not ASCII_SKELETON: the ASCII road would differ")
    # ASCII is left to the ASCII road (content's table), which does the same.
    table = dict.fromkeys(c for c in deleted if c >= 128)
    for source in confusables:
        if not source.isascii():
            table[ord(source)] = final(source)
    return _Tables(re.compile(_char_class(ignorable)), table)


_chars = {}
# All ASCII, as bytes.translate deletes them: what is left of a text's UTF-8 is its other characters.
_ASCII_BYTES = bytes(range(128))
# Past this many different characters outside ASCII a text is folded whole, in one pass.
_CHARS_APART = 16


def _fold_whole(text):
    table = _built().fold
    mapped = unicodedata.normalize("NFKD", text).translate(table)
    folded = mapped.casefold()
    if folded != mapped:  # a letter whose lower case is a lookalike ("Ж" of "ж"), or a compatibility form's
        folded = unicodedata.normalize("NFKD", folded).translate(table)
    return folded


class _Words(dict):
    """Words outside ASCII, folded: a dictionary that folds what it does not hold yet."""

    def __missing__(self, word):
        if len(self) >= WORDS_MAX:
            self.clear()
        folded = self[word] = _fold_whole(word)
        return folded


_words = _Words()
WORDS_MAX = 16384  # a few megabytes at most, like the other per-process caches


def fold(text):
    """A text's characters outside ASCII as a reader cannot tell them apart: every default-ignorable
    code point gone, compatibility forms as their plain letters (NFKD), case folded, every
    combining mark gone, each letter as its UTS #39 skeleton. ASCII is left to the ASCII road
    (content's table, or ascii_road() for a text still outside ASCII), which folds it the same way.

    Every step maps one character at a time, so a text with a few characters outside ASCII (most
    of them) has only those replaced: found in C, each folded once per process."""
    others = text.encode("utf-8", "surrogatepass").translate(None, _ASCII_BYTES).decode("utf-8", "surrogatepass")
    if len(others) > _CHARS_APART * 4 or len(others := set(others)) > _CHARS_APART:
        # A text in another script: word by word, each word folded once per process (a language has
        # far fewer words than its posts have).
        return " ".join(map(_words.__getitem__, text.split()))
    for c in others:
        folded = _chars.get(c)
        if folded is None:
            folded = _fold_whole(c)
            if len(_chars) >= 65536:
                _chars.clear()
            _chars[c] = folded
        if folded != c:
            text = text.replace(c, folded)
    return text


def ascii_road(text):
    """What content's ASCII table does to the ASCII letters of a folded text still outside ASCII:
    lower case, Markdown's emphasis deleted, ASCII_SKELETON."""
    text = text.lower()
    for c, folded in _ASCII_ROAD:
        if c in text:
            text = text.replace(c, folded)
    return text


# What the ASCII road does to a text's ASCII characters but lower case, in the order it does it.
_ASCII_ROAD = tuple((c, "") for c in _EMPHASIS) + tuple(ASCII_SKELETON.items())


def without_invisible(text):
    """`text` as a reader sees it, letter for letter: its default-ignorable characters removed (the
    moderators' queue shows this, where a padding of them would show nothing)."""
    return text if text.isascii() else _built().invisible.sub("", text)


def visible(text):
    """What is left to compare of a text without words (emoji, symbols): its characters but white
    space, case folded, each run of one character once (":)" is not ":(", "🎉🎉🎉" is "🎉")."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", _built().invisible.sub("", text))
    return _REPEATED.sub(r"\1", "".join(text.casefold().split()))


_REPEATED = re.compile(r"(.)\1+", re.DOTALL)
