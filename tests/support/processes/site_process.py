"""A web server serving one of the suite's small sites: its own SQLite file, made and filled before the
server starts, and a process group of its own, stopped whole."""

import os
import signal
import subprocess
import sys
import tempfile
import time

from tests.support.helpers import ROOT, free_port

# Run in the site's settings before the server starts: its tables, then the test's rows.
MIGRATE = (
    "import django; django.setup();"
    "from django.core.management import call_command; call_command('migrate', verbosity=0);"
)


class SiteProcess:
    """A subclass names the site's settings module and the variables it reads its SQLite file and its
    Redis from, starts its server with serve(), and says in answers() what shows the server is up."""

    settings = ""
    database_variable = ""
    redis_variable = ""
    prefix = "throttling-site-"

    def __init__(self, redis_url, setup, env=None):
        """The site's tables made and `setup` (Python statements, run after the migrations) done; `env`
        adds to the site's environment."""
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix=self.prefix)
        self.env = dict(
            os.environ,
            DJANGO_SETTINGS_MODULE=self.settings,
            **{self.database_variable: os.path.join(self.dir, "db.sqlite3"), self.redis_variable: redis_url},
            DATABASE_URL="",
            **(env or {}),
        )
        subprocess.run([sys.executable, "-c", MIGRATE + setup], cwd=ROOT, env=self.env, check=True, timeout=120)

    def answers(self):
        """True once a request shows the server is up (an OSError while it is not listening yet)."""
        raise NotImplementedError

    def serve(self, command, name):
        """Start the server (`command`, run from the project's root) and return once it answers; `name`
        is what the error says when it does not within 30 s."""
        self.proc = subprocess.Popen(command, cwd=ROOT, env=self.env, start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if self.answers():
                    return
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{name} did not answer within 30 s")

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)
