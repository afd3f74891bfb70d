"""A mail server for the tests: just enough SMTP (RFC 5321) on a loopback port to take messages, kept in a list.

Started after the fact, it is the mail server coming back: the alert tests point a worker's SMTP
backend at a port where nothing listens first (the server is down), then start this on it.
"""

import socketserver
import threading


class _Session(socketserver.StreamRequestHandler):
    def reply(self, line):
        self.wfile.write(line.encode() + b"\r\n")

    def handle(self):
        self.reply("220 throttling-test ESMTP")
        data = None
        while True:
            line = self.rfile.readline()
            if not line:
                return
            if data is not None:
                if line in (b".\r\n", b".\n"):
                    self.server.messages.append(b"".join(data))
                    data = None
                    self.reply("250 2.0.0 queued")
                else:
                    data.append(line[1:] if line.startswith(b"..") else line)
                continue
            verb = line.split(b" ", 1)[0].strip().upper()
            if verb in (b"EHLO", b"HELO"):
                self.reply("250 throttling-test")
            elif verb == b"DATA":
                data = []
                self.reply("354 end with <CRLF>.<CRLF>")
            elif verb == b"QUIT":
                self.reply("221 2.0.0 bye")
                return
            else:  # MAIL, RCPT, RSET, NOOP
                self.reply("250 2.0.0 ok")


class SmtpSink(socketserver.ThreadingTCPServer):
    """Takes every message sent to 127.0.0.1:`port` into `messages` (raw bytes), until stop()."""

    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, port):
        super().__init__(("127.0.0.1", port), _Session)
        self.messages = []
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self.shutdown()
        self.server_close()
