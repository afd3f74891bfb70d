"""The change channel's subscriber: one connection SUBSCRIBEd to one channel, read by the background thread.

What redis-py's PubSub does, without its machinery (no pool, no handlers, no retries): redis-py connects
the connection (AUTH, TLS, timeouts), then SUBSCRIBE is sent on it and RESP2 arrays come back
("subscribe", channel, count), ("message", channel, data) and, to a PING, ("pong", ""). A PING is
sent after HEARTBEAT seconds of silence, so a connection a network device dropped without a word is
found and replaced rather than waited on forever.
"""

import socket
import time

from redis.exceptions import ConnectionError

from .connection import NotSent, getpid
from .resp import pack

# Seconds of silence on the subscriber after which it sends a PING.
HEARTBEAT = 30.0
# Seconds within which a PING must be answered, or the connection is given up.
PONG_WITHIN = 5.0


class Subscriber:
    """One connection to `address` (None: the standalone server) SUBSCRIBEd to `channel`.

    `read(timeout)` waits up to `timeout` seconds for messages and returns the data of those that
    arrived ([] when none did); it raises ConnectionError when the connection is lost. `wake()`,
    from another thread, ends a wait at once (the connection is then lost).
    """

    def __init__(self, connection_args, channel, address=None):
        connection_class, kwargs = connection_args
        self.address = address
        self.channel = channel.encode() if isinstance(channel, str) else channel
        self.conn = connection_class(**kwargs)
        self.pid = getpid()
        try:
            self.conn.connect()
        except Exception as exc:
            raise NotSent(str(exc)) from exc
        try:
            self.conn.send_packed_command([pack("SUBSCRIBE", self.channel)], check_health=False)
            reply = self.conn.read_response()
            if not (isinstance(reply, list) and reply[:2] == [b"subscribe", self.channel]):
                raise ConnectionError(f"unexpected reply to SUBSCRIBE: {reply!r}")
        except BaseException:
            self.close()
            raise
        self.since = self.heard_at = time.monotonic()
        self.pinged_at = None

    def read(self, timeout):
        conn = self.conn
        now = time.monotonic()
        if self.pinged_at is None:
            if now - self.heard_at >= HEARTBEAT:
                conn.send_packed_command([pack("PING")], check_health=False)
                self.pinged_at = now
        elif now - self.pinged_at >= PONG_WITHIN:
            raise ConnectionError(f"no answer to PING in {PONG_WITHIN:g} s")
        if not conn.can_read(timeout=max(0.0, timeout)):
            return []
        messages = []
        while True:
            reply = conn.read_response(disconnect_on_error=False)
            if isinstance(reply, list) and len(reply) == 3 and reply[0] == b"message" and reply[1] == self.channel:
                messages.append(reply[2])
            if not conn.can_read(timeout=0):
                break
        self.heard_at = time.monotonic()
        self.pinged_at = None
        return messages

    def wake(self):
        """End a wait in read() from another thread (stop): the socket reads EOF from now on."""
        sock = self.conn._sock
        if sock is not None and self.pid == getpid():
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        # Never shut a parent's socket down from a forked child: just let it go.
        if self.pid == getpid():
            self.conn.disconnect()
