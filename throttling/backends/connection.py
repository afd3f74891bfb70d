"""One thread's held connection to one Redis node: commands straight to its socket, replies through hiredis."""

import os
import socket
import struct
import time

from redis.exceptions import ConnectionError, NoScriptError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

try:  # hiredis comes with the package; without it redis-py reads the replies
    from hiredis import Reader as _HiredisReader
except ImportError:  # pragma: no cover - exercised in a venv without hiredis
    _HiredisReader = None

# Seconds a held connection may sit idle before it is checked for EOF before use.
IDLE_CHECK = 0.05
# This process's id, kept up to date by a fork hook: os.getpid() is a system call on every use
# (glibc does not cache it), and a held connection is checked against it on every command.
_pid = [os.getpid()]


def _forked():
    _pid[0] = os.getpid()


os.register_at_fork(after_in_child=_forked)


def getpid():
    """os.getpid(), without the system call: the value the fork hook last set."""
    return _pid[0]


def _kernel_timeouts(sock, seconds):
    """Move a socket's timeout into the kernel (SO_RCVTIMEO/SO_SNDTIMEO) and make it blocking.

    With a Python-level timeout every send and recv is preceded by a poll()
    syscall; with the kernel's, a recv that times out fails with EAGAIN instead,
    and the same bound holds for one syscall less each way. redis-py may put its
    own timeout back (its health checks do); the next call moves it again.
    """
    if seconds is None:
        return
    sec = int(seconds)
    usec = max(1, int(round((seconds - sec) * 1_000_000))) if seconds > sec else 0
    value = struct.pack("ll", sec, usec)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)
    sock.settimeout(None)


class NotSent(ConnectionError):
    """Connecting failed: nothing was sent, so trying another address cannot count twice."""


class Held:
    """One thread's connection: redis-py connects it (AUTH, SELECT, TLS, timeouts), then
    commands go straight to its socket and replies come back through hiredis."""

    __slots__ = ("conn", "reader", "pid", "used_at")

    def __init__(self, connection_class, kwargs):
        self.conn = connection_class(**kwargs)
        self.reader = _HiredisReader(replyError=ResponseError) if _HiredisReader else None
        self.pid = getpid()
        self.used_at = time.monotonic()

    def call(self, packed, replies=None):
        """Send `packed` and read `replies` replies: one reply (raising a reply error), or a
        list of them (reply errors in the list, as ResponseError objects)."""
        conn = self.conn
        sock = conn._sock
        if sock is None:
            try:
                conn.connect()
            except RedisError as exc:
                raise NotSent(str(exc)) from exc
            sock = conn._sock
        if sock.gettimeout() is not None:
            _kernel_timeouts(sock, conn.socket_timeout)
        reader = self.reader
        if reader is None:
            conn.send_packed_command(packed, check_health=False)
            if replies is None:
                return conn.read_response()
            out = []
            for _ in range(replies):
                try:
                    out.append(conn.read_response())
                except ResponseError as exc:
                    out.append(exc)
            return out
        try:
            sock.sendall(packed)
            out = []
            while True:
                reply = reader.gets()
                while reply is False:
                    data = sock.recv(65536)
                    if not data:
                        raise ConnectionError("Connection closed by server.")
                    reader.feed(data)
                    reply = reader.gets()
                if isinstance(reply, ResponseError) and str(reply).startswith("NOSCRIPT"):
                    reply = NoScriptError(str(reply))
                if replies is None:
                    if isinstance(reply, ResponseError):
                        raise reply
                    return reply
                out.append(reply)
                if len(out) == replies:
                    return out
        except (TimeoutError, BlockingIOError) as exc:  # the kernel's timeout: EAGAIN
            raise RedisTimeoutError(f"Timeout reading from socket: {exc}") from exc
        except OSError as exc:
            raise ConnectionError(f"Error talking to Redis: {exc}") from exc

    def stale(self):
        """True when the socket has something to read before a command was sent: EOF or junk."""
        if self.conn._sock is None:
            return False
        try:
            return self.conn.can_read(timeout=0)
        except (RedisError, OSError):
            return True

    def close(self):
        # Never close a parent's socket from a forked child: just let it go.
        if self.pid == getpid():
            self.conn.disconnect()
