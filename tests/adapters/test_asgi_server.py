"""The refusal page under a real ASGI server (uvicorn): async views whose form has a ModelChoiceField,
racing visitors, never a 500 and never a row of the queryset on the page."""

import http.client
import sys
import threading
from urllib.parse import urlencode

import pytest

from tests.support.processes.site_process import SiteProcess

pytestmark = pytest.mark.slow

LIMIT = 3
VISITORS = 8
TRIES = 10
HIDDEN_ROOM = "Staff only: moderators"


class Uvicorn(SiteProcess):
    """uvicorn serving tests/support/sites/asgi/settings.py on the suite's Redis and a SQLite file of its own."""

    settings = "tests.support.sites.asgi.settings"
    database_variable = "ASGI_DB"
    redis_variable = "ASGI_REDIS_URL"
    prefix = "throttling-asgi-"

    def __init__(self, redis_server):
        setup = (
            "from django.contrib.auth.models import Group;"
            f"[Group.objects.create(name=n) for n in ('General', {HIDDEN_ROOM!r})];"
            "from throttling.models import ActionPolicy;"
            "ActionPolicy.objects.filter(action='reply').delete();"
            f"ActionPolicy.objects.create(action='reply', period=60, max_count={LIMIT})"
        )
        super().__init__(redis_server.url, setup)
        self.serve(
            [sys.executable, "-m", "uvicorn", "tests.support.sites.asgi.app:application", "--port", str(self.port)]
            + ["--host", "127.0.0.1", "--log-level", "warning"],
            "uvicorn",
        )

    def answers(self):
        self.post("/decorated/", "127.0.0.1", {})
        return True

    def post(self, path, visitor, data):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            headers = {"Content-Type": "application/x-www-form-urlencoded", "X-Forwarded-For": visitor}
            conn.request("POST", path, body=urlencode(data), headers=headers)
            response = conn.getresponse()
            return response.status, response.read().decode()
        finally:
            conn.close()


@pytest.fixture
def uvicorn(redis_server):
    server = Uvicorn(redis_server)
    yield server
    server.stop()


@pytest.mark.parametrize("path, admitted", [("/room/post/", 302), ("/decorated/", 201)])
def test_racing_visitors_get_the_refusal_page_never_a_500(uvicorn, path, admitted):
    answers, lock = [], threading.Lock()
    start = threading.Barrier(VISITORS)

    def visitor(n):
        start.wait(10)
        for attempt in range(TRIES):
            text = f"Visitor {n}, try {attempt}:\nmy words"
            status, body = uvicorn.post(path, f"198.51.100.{n + 1}", {"room": "1", "text": text})
            with lock:
                answers.append((n, status, body, text))

    threads = [threading.Thread(target=visitor, args=(n,)) for n in range(VISITORS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)

    statuses = [status for _n, status, _b, _t in answers]
    assert len(answers) == VISITORS * TRIES
    assert set(statuses) == {admitted, 429}, sorted(set(statuses))
    assert statuses.count(admitted) == VISITORS * LIMIT  # exactly the limit, per visitor's address
    for _n, status, body, text in answers:
        if status == 429:
            assert f'<textarea id="throttling-field-2" name="text" rows="6">{text}</textarea>' in body
            assert '<input type="hidden" name="room" value="1">' in body
            assert ">Your post</label>" in body
            assert HIDDEN_ROOM not in body and "General" not in body
