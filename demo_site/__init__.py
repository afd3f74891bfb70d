"""A small community (posts, replies, likes) that shows `throttling` at work; `make demo` runs it."""

# A fixed, public password: the demo's accounts guard nothing and the password is
# printed at start-up and shown on the home page. Never reuse it anywhere real.
DEMO_PASSWORD = "demo-password"
DEMO_ADMIN = "admin"
DEMO_MEMBERS = ("alice", "bob")

# Load the Celery app whenever Django starts, so tasks sent from a request
# (throttling's escalations) go to the demo's broker.
from .celery import app as celery_app  # noqa: E402

__all__ = ["celery_app", "DEMO_PASSWORD", "DEMO_ADMIN", "DEMO_MEMBERS"]
