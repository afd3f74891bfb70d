"""The physical floor: hand-written RESP on one held socket, no client library at all.

A command is encoded by hand, written with one `sendall`, and its reply is read
with just enough parsing to know where it ends (and whether it is an error).
Nothing here is what an application should use; it is what no application can
beat on the same machine: one round trip plus the work Redis does.
"""

import socket


def encode(args):
    """One command as RESP bytes (an array of bulk strings)."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, str):
            arg = arg.encode()
        elif isinstance(arg, int):
            arg = b"%d" % arg
        out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(out)


class RespError(Exception):
    pass


class RawConnection:
    """One TCP connection held open; `call` sends one command and returns its reply."""

    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.pos = 0

    @classmethod
    def from_url(cls, url):
        # bench servers are redis://127.0.0.1:PORT[/0]
        hostport = url.split("://", 1)[1].split("/", 1)[0]
        host, port = hostport.rsplit(":", 1)
        return cls(host, int(port))

    def close(self):
        self.sock.close()

    def call(self, packed):
        """Send pre-encoded RESP bytes, return the parsed reply (raises RespError on -ERR)."""
        self.sock.sendall(packed)
        return self._reply()

    def pipeline(self, packed_commands, window=500):
        """Send commands in windows of `window` without waiting in between; count error replies."""
        errors = 0
        for start in range(0, len(packed_commands), window):
            chunk = packed_commands[start : start + window]
            self.sock.sendall(b"".join(chunk))
            for _ in chunk:
                try:
                    self._reply()
                except RespError:
                    errors += 1
        return errors

    # -- a minimal reader --------------------------------------------------

    def _line(self):
        while True:
            end = self.buf.find(b"\r\n", self.pos)
            if end >= 0:
                line = self.buf[self.pos : end]
                self.pos = end + 2
                return line
            self._fill()

    def _exact(self, n):
        while len(self.buf) - self.pos < n + 2:
            self._fill()
        data = self.buf[self.pos : self.pos + n]
        self.pos += n + 2
        return data

    def _fill(self):
        if self.pos:
            self.buf = self.buf[self.pos :]
            self.pos = 0
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("Redis closed the connection")
        self.buf += chunk

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind in (b"*", b"~", b">"):
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        if kind == b"%":
            return {self._reply(): self._reply() for _ in range(int(rest))}
        if kind in (b"+", b","):
            return rest
        if kind == b"_":
            return None
        if kind == b"#":
            return rest == b"t"
        if kind == b"-":
            raise RespError(rest.decode(errors="replace"))
        raise ValueError(f"unexpected RESP type {kind!r}")
