"""The running demo as the commands that play against it reach it (over HTTP when it answers, else its
views in this process), and the members and the thread they play with."""

import http.cookiejar
import json
import logging
import os
import urllib.error
import urllib.parse
import urllib.request

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from demo_site import DEMO_PASSWORD
from demo_site.models import Post
from throttling.backends.redis import get_backend
from throttling.engine.policies.cache import version_key
from throttling.exceptions import BackendError

DEFAULT_ADDR = "127.0.0.1:8000"
SANDBOX_TITLE = "Sandbox thread for demo_traffic"


class HttpDemo:
    """The running demo server, as a browser would use it: one login, then a session cookie.

    One login rather than Basic auth on every call: each Basic request hashes
    the password again (about a third of a second), which would make a burst
    of 35 likes take longer than the point it makes.
    """

    def __init__(self, base):
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self.description = f"the demo server at {base}/ (over HTTP)"

    @classmethod
    def answering(cls, base):
        """A demo at `base` when its API answers, else None (nothing listens, or something else does)."""
        demo = cls(base)
        try:
            status, payload = demo._open("GET", reverse("api-posts"), timeout=1.5)
        except OSError:
            return None
        return demo if status == 200 and isinstance(payload, list) else None

    def _cookie(self, name):
        return next((c.value for c in self.jar if c.name == name), "")

    def _open(self, method, path, data=None, headers=None, timeout=10):
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        request = urllib.request.Request(self.base + path, data=body, method=method, headers=headers or {})
        request.add_header("Accept", "application/json")
        try:
            with self.opener.open(request, timeout=timeout) as response:
                return response.status, payload_of(response.read(), response.headers.get_content_type())
        except urllib.error.HTTPError as exc:
            return exc.code, payload_of(exc.read(), exc.headers.get_content_type())

    def login(self, user):
        login = reverse("login")
        self._open("GET", login)
        fields = {
            "username": user.get_username(),
            "password": DEMO_PASSWORD,
            "csrfmiddlewaretoken": self._cookie(settings.CSRF_COOKIE_NAME),
        }
        self._open("POST", login, fields)
        if not self._cookie(settings.SESSION_COOKIE_NAME):
            raise CommandError(
                f"The server at {self.base}/ did not accept {user.get_username()}’s login. Is it the demo "
                f"started with the same DEMO_DIR ({getattr(settings, 'DEMO_DIR', '?')})?"
            )

    def send(self, method, path, data=None):
        try:
            return self._open(method, path, data, {"X-CSRFToken": self._cookie(settings.CSRF_COOKIE_NAME)})
        except OSError as exc:
            raise CommandError(f"The demo server at {self.base}/ stopped answering: {exc}") from exc


class InProcessDemo:
    """The demo's views called in this process (Django's test client): same database, Redis and broker."""

    def __init__(self):
        self.client = Client(HTTP_HOST="localhost")
        self.description = "the demo’s views in this process (no server answered)"

    def login(self, user):
        self.client.force_login(user)

    def send(self, method, path, data=None):
        # Django logs every 4xx as a warning; here each 429 is already printed, with more to say.
        request_log = logging.getLogger("django.request")
        level = request_log.level
        request_log.setLevel(logging.ERROR)
        try:
            response = self.client.generic(
                method,
                path,
                urllib.parse.urlencode(data or {}),
                content_type="application/x-www-form-urlencoded",
                HTTP_ACCEPT="application/json",
            )
        finally:
            request_log.setLevel(level)
        return response.status_code, payload_of(response.content, response.get("Content-Type", ""))


def payload_of(raw, content_type):
    """An answer's body: JSON decoded when it says it is JSON, else its text."""
    if "json" in (content_type or ""):
        try:
            return json.loads(raw or b"null")
        except ValueError:
            pass
    return raw.decode("utf-8", "replace")


def detail_of(payload):
    """What an answer says, to print: DRF's "detail", or the start of its body."""
    if isinstance(payload, dict) and "detail" in payload:
        return str(payload["detail"])
    return str(payload)[:200]


def add_addr_argument(parser):
    """--addr: where the running demo answers."""
    parser.add_argument(
        "--addr",
        default=os.environ.get("DEMO_ADDR") or DEFAULT_ADDR,
        help=f"address of the running demo (default DEMO_ADDR or {DEFAULT_ADDR})",
    )


def reach(base):
    """The demo at `base` when it answers, else its views in this process when its Redis answers;
    CommandError saying how to start it otherwise."""
    demo = HttpDemo.answering(base)
    if demo is not None:
        return demo
    if getattr(settings, "DEMO_REDIS_URL", "") is None:
        raise CommandError(
            f"No demo answers at {base}/. Start it with `make demo` (then run this command again "
            "in another terminal), or set DEMO_REDIS_URL to the Redis the demo uses to play in this process."
        )
    try:
        get_backend().get(version_key())
    except BackendError as exc:
        raise CommandError(f"No demo answers at {base}/, and its Redis cannot be reached ({exc}).") from exc
    return InProcessDemo()


def played_member(username):
    """The member `username` (created if missing), active and signing in with the demo's password;
    CommandError for staff, whom the demo's limits exempt."""
    user, created = get_user_model().objects.get_or_create(username=username)
    if user.is_staff or user.is_superuser:
        raise CommandError(f"{username} is staff, and staff are exempt from the demo’s limits: pick a member.")
    if created or not user.check_password(DEMO_PASSWORD) or not user.is_active:
        user.set_password(DEMO_PASSWORD)
        user.is_active = True
        user.save()
    return user


def sandbox_thread(author):
    """The thread the commands reply and like in (started by `author` when missing), so the real threads
    stay readable."""
    post, _ = Post.objects.get_or_create(
        title=SANDBOX_TITLE,
        defaults={"author": author, "body": "demo_traffic replies and likes here so the real threads stay readable."},
    )
    return post
