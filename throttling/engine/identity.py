"""Who is acting: the key-safe identity of a user, a request or a string (see Architecture › Spoofable identity)."""

import hashlib
import ipaddress
from functools import lru_cache
from urllib.parse import quote

from ..conf import settings

# Longest identity anywhere (OffenceRecord.identity is 128 characters): the
# longest prefix ("ip:") plus an escaped text of at most _MAX_ESCAPED.
MAX_IDENTITY = 128
_MAX_ESCAPED = MAX_IDENTITY - len("ip:")


def escape(text):
    """`text` made safe inside a key: escaped, or hashed when long."""
    if len(text) > _MAX_ESCAPED:
        # quote() never shortens, so this text is hashed. It is not cached: a cache keyed
        # by texts of any length holds them all (see Architecture › Bounded memory).
        return _hashed(quote(text, safe=""))
    return _escape_short(text)


@lru_cache(maxsize=8192)
def _escape_short(text):
    # quote() is injective and leaves only [A-Za-z0-9_.~-] and "%XX" escapes
    # (two upper-case hex digits), so ":", "{", "}", spaces and non-ASCII can
    # neither break the hash tag nor collide. A longer text is hashed into
    # "%h" + hex: quote() never writes "%h", so no escaped text can spell a
    # hashed one (and share its counters).
    safe = quote(text, safe="")
    if len(safe) > _MAX_ESCAPED:
        return _hashed(safe)
    return safe


def _hashed(safe):
    return "%h" + hashlib.sha256(safe.encode()).hexdigest()[:40]


# What every member's identity starts with (anonymous visitors: "ip:", strings: "s:").
MEMBER_PREFIX = "u:"


@lru_cache(maxsize=8192)
def member_identity(pk):
    """The identity of the member with primary key `pk` (what identify(user) returns)."""
    return MEMBER_PREFIX + escape(str(pk))


def identify(who):
    """Return (identity, user or None) for a user, an HttpRequest/DRF Request or a string."""
    if isinstance(who, str):
        if not who:
            raise ValueError("An identity string must not be empty.")
        return "s:" + escape(who), None
    if hasattr(who, "META"):  # django.http.HttpRequest or rest_framework.request.Request
        return request_identity(who, getattr(who, "user", None))
    if hasattr(who, "is_authenticated") and hasattr(who, "pk"):
        if not who.is_authenticated or who.pk is None:
            raise ValueError(
                "An anonymous user has no identity of its own; pass the request so the client's IP address is used."
            )
        return member_identity(who.pk), who
    raise TypeError(f"Cannot throttle {type(who).__name__!r}: pass a user, a request or a string identity.")


def request_identity(request, user):
    """(identity, user or None) of a request whose user (or None) was read already: the member, or the
    client's address for a visitor."""
    if user is not None and user.is_authenticated:
        return member_identity(user.pk), user
    return "ip:" + client_ip(request), None


def _candidate(meta):
    """(the address text DRF's NUM_PROXIES rule names, REMOTE_ADDR): X-Forwarded-For only when proxies are trusted."""
    remote = meta.get("REMOTE_ADDR", "")
    num_proxies = settings.NUM_PROXIES
    forwarded = meta.get("HTTP_X_FORWARDED_FOR")
    candidate = remote
    if num_proxies and forwarded:
        addrs = [a.strip() for a in forwarded.split(",")]
        candidate = addrs[-min(num_proxies, len(addrs))]
    return candidate, remote


def client_ip(request):
    """The client address under DRF's NUM_PROXIES rule; X-Forwarded-For only when proxies are trusted."""
    candidate, remote = _candidate(request.META)
    return _normalise_ip(candidate, settings.IPV6_PREFIX) or _normalise_ip(remote, settings.IPV6_PREFIX) or "unknown"


def client_number(request):
    """(IP version, the client's whole address as an integer) under the same rule as client_ip(), not
    grouped into a /64: what address-range blocks are matched against. None when there is no address."""
    candidate, remote = _candidate(request.META)
    return _number(candidate) or _number(remote)


def _number(text):
    if len(text) > _LONGEST_ADDRESS:
        return None
    return _short_number(text)


@lru_cache(maxsize=4096)
def _short_number(text):
    addr = _parse(text.strip())
    if addr is None:
        return None
    if addr.version == 6 and addr.ipv4_mapped:
        addr = addr.ipv4_mapped
    return addr.version, int(addr)


def _normalise_ip(text, v6_prefix):
    # The longest address a proxy writes ("[v6%zone]:port") is far shorter; anything
    # longer is not an address, and is not kept in the cache below.
    if len(text) > _LONGEST_ADDRESS:
        return ""
    return _normalise_short_ip(text, v6_prefix)


_LONGEST_ADDRESS = 100


@lru_cache(maxsize=4096)
def _normalise_short_ip(text, v6_prefix):
    addr = _parse(text.strip())
    if addr is None:
        return ""
    if addr.version == 6:
        if addr.ipv4_mapped:
            return str(addr.ipv4_mapped)
        # One household or host gets a whole /64; keying single addresses
        # would let a client rotate through 2**64 of them.
        net = ipaddress.ip_network(f"{addr}/{v6_prefix}", strict=False)
        return f"{net.network_address}/{v6_prefix}"
    return str(addr)


def _parse(text):
    """The ip_address of a proxy's or a server's text, or None."""
    if not text:
        return None
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        # Some proxies append a port: "1.2.3.4:5678" or "[2001:db8::1]:443".
        host = text.rsplit(":", 1)[0] if text.count(":") == 1 else text
        host = host.strip("[]").split("]")[0]
        try:
            return ipaddress.ip_address(host)
        except ValueError:
            return None
