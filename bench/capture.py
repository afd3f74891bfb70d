"""What an application really sends: MONITOR, parsed back into exact argument lists.

The benchmark's floor replays the very command `throttling.check` sends, so the
floor stays right whatever the script's KEYS and ARGV become; nothing here
imports the app's internals.
"""

import re
import secrets
import threading

from .resp import RawConnection, encode

# What a client sends when it opens a connection, not per decision.
HANDSHAKE = {b"HELLO", b"AUTH", b"SELECT", b"CLIENT", b"PING"}
_ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "a": b"\a", "b": b"\b", '"': b'"', "\\": b"\\"}
_HEADER = re.compile(rb"^\+?(\d+\.\d+) \[(\d+) (\S+)\] ")


def parse_monitor_line(line):
    """`+1700000000.1 [0 127.0.0.1:5000] "EVALSHA" "ab" "1" ...` -> (client, [b"EVALSHA", b"ab", ...])."""
    match = _HEADER.match(line)
    if not match:
        return None, None
    client = match.group(3).decode()
    text = line[match.end() :].decode("latin-1")
    args, i, n = [], 0, len(text)
    while i < n:
        if text[i] != '"':
            i += 1
            continue
        i += 1
        out = bytearray()
        while text[i] != '"':
            ch = text[i]
            if ch == "\\":
                nxt = text[i + 1]
                if nxt == "x":
                    out.append(int(text[i + 2 : i + 4], 16))
                    i += 4
                    continue
                out += _ESCAPES.get(nxt, nxt.encode("latin-1"))
                i += 2
                continue
            out += ch.encode("latin-1")
            i += 1
        args.append(bytes(out))
        i += 1
    return client, args


def capture(url, work):
    """Run work() while MONITOR watches; return the commands clients sent (scripts' own excluded)."""
    start, end = b"bench-start-" + secrets.token_hex(4).encode(), b"bench-end-" + secrets.token_hex(4).encode()
    watcher = RawConnection.from_url(url)
    watcher.call(encode(["MONITOR"]))
    seen, ready, done = [], threading.Event(), threading.Event()

    def watch():
        counting = False
        while True:
            line = watcher._line()
            client, args = parse_monitor_line(line)
            if not args:
                continue
            if start in args:
                counting = True
                ready.set()
            elif end in args:
                done.set()
                return
            elif counting and client != "lua" and args[0].upper() not in HANDSHAKE:
                seen.append(args)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    pinger = RawConnection.from_url(url)
    while not ready.is_set():
        pinger.call(encode(["ECHO", start]))
        ready.wait(0.05)
    work()
    pinger.call(encode(["ECHO", end]))
    done.wait(10)
    pinger.close()
    watcher.close()
    return seen


def per_call_positions(first, second):
    """Positions where two captures of the same decision differ: the per-call tokens."""
    if len(first) != len(second):
        raise ValueError(f"two captures of one decision differ in length: {first} / {second}")
    return [i for i, (a, b) in enumerate(zip(first, second)) if a != b]
