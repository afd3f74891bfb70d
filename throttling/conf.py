"""Every THROTTLING_* setting and its default, read at call time."""

import threading

from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.dispatch import receiver

DEFAULTS = {
    # django-redis cache alias whose connection parameters the throttle uses
    # (when REDIS_URL is not set).
    "CACHE_ALIAS": "default",
    # The throttle's own Redis, as a URL: redis://, rediss://, unix://,
    # redis+sentinel://host:port[,host:port]/service[/db] or
    # redis+cluster://host:port[,host:port]. None: the CACHE_ALIAS server.
    "REDIS_URL": None,
    # Prefix of every Redis key the app writes.
    "KEY_PREFIX": "throttling",
    # Master switch: False admits everything without touching Redis.
    "ENABLED": True,
    # What a decision does when Redis cannot answer (a policy may override it).
    "FAIL_OPEN": True,
    # Retry-After sent when failing closed.
    "FAIL_CLOSED_RETRY_AFTER": 5,
    # Timeouts (seconds) of the throttle's own Redis connections; bounded so a
    # stalled server costs at most this much per decision (see Architecture › Backend failure is not a 500).
    "SOCKET_CONNECT_TIMEOUT": 0.1,
    "SOCKET_TIMEOUT": 0.1,
    # "allow" or "deny" for actions that have no policy row.
    "UNKNOWN_ACTION": "allow",
    # How many proxies sit in front of Django; DRF's NUM_PROXIES rule. 0 means
    # REMOTE_ADDR only: a raw X-Forwarded-For is never trusted by default.
    "NUM_PROXIES": 0,
    # Prefix length used to group IPv6 clients (a home or host gets a /64).
    "IPV6_PREFIX": 64,
    # Seconds between two looks of each process's background thread at Redis: the
    # change markers (policies, overrides, resets, penalties) in one MGET. Changes are
    # pushed on the change channel at once; this read catches a message that was missed.
    "POLICY_REFRESH": 1.0,
    # Seconds after which policies are re-read from the database anyway, in case
    # a change marker was lost with Redis.
    "POLICY_MAX_AGE": 60,
    # Offences (refused attempts) are counted per identity and action in a
    # window of this many seconds.
    "OFFENCE_WINDOW": 600,
    # Offences within OFFENCE_WINDOW that make a member a repeat offender and
    # start the penalty ladder (a policy may override both; 0 turns it off).
    "OFFENCE_THRESHOLD": 5,
    # False: members are only throttled, never penalised (and nothing is sent to Celery).
    "PENALTIES": True,
    # Strikes older than this many days are forgiven: they no longer raise the rung.
    "FORGIVENESS_DAYS": 180,
    # Seconds an escalation may stay pending (task queued, not yet applied)
    # before a new run of offences may start another one.
    "ESCALATION_TIMEOUT": 300,
    # Seconds an escalation the broker took may wait for a worker before resync
    # sends it again (the broker may have lost its queue); keep it well under
    # ESCALATION_TIMEOUT, so the resend comes while its run still blocks another.
    "ESCALATION_RESEND_AFTER": 60,
    # Celery queue of the app's tasks; None means Celery's default queue.
    "CELERY_QUEUE": None,
    # The template the built-in 429 page extends (it fills {% block title %} and
    # {% block content %}); the default is a neutral page that stands on its own.
    "BASE_TEMPLATE": "throttling/base.html",
    # Seconds between looks at Redis's evicted-keys count (by each process's
    # background thread); a rise makes one process queue a penalty resync.
    "EVICTION_CHECK": 5,
    # Offence history for the report is buffered in each process and handed
    # to Celery at most every OFFENCE_FLUSH_INTERVAL seconds, or sooner when
    # OFFENCE_FLUSH_SIZE distinct (identity, action, hour) rows are waiting.
    "OFFENCE_FLUSH_INTERVAL": 5,
    # Seconds a process remembers a member's groups for trust tiers (one query per member per period),
    # and how many of their held posts were approved while they are still held (see Guide › Held for review).
    "TRUST_CACHE": 60,
    # What rejecting a held post does with it: "hide" (it stays, hidden) or "delete".
    "HELD_REJECTED": "hide",
    # Moderators are alerted once the review queue holds more than this many pending posts; None: never.
    "HELD_ALERT_SIZE": 50,
    # IETF RateLimit-Policy and RateLimit headers on every response of a throttled action.
    "HEADERS": True,
    # Send the headers of a site-wide policy (the whole site's activity) to anonymous
    # visitors too; by default only signed-in members read them.
    "SITE_HEADERS": False,
    "OFFENCE_FLUSH_SIZE": 500,
    # Policies declared in code: {"flag": ["3/min", "20/day"], "reply": "5/10s"}, an
    # action's rate or rates (the first is the main window). After migrate, each
    # action without a row gets one; a row that exists is never changed.
    "DEFAULT_POLICIES": {},
    # Views of apps the site does not own, bound to actions by URL name (with namespaces, as
    # reverse() takes it) and limited by throttling.middleware.ActionThrottleMiddleware:
    # {"forum:comment:publish": {"action": "reply", "counts": "redirect"}, "forum:like": "like"}.
    "VIEWS": {},
    # Prometheus metrics of decisions, escalations and Redis failures (the `metrics`
    # extra: prometheus-client); off, the engine's hooks stay empty functions.
    "METRICS": False,
    # Who moderates: None (Django staff, with the model permissions in the admin), a permission
    # name ("forum.moderate", checked with user.has_perm), or a function of the user (or its
    # dotted path) that returns True for moderators. Used for policies that exempt staff and for
    # the penalty, override and report pages of the admin.
    "MODERATORS": None,
    # Answer a refusal Redis gave from the process's memory until its Retry-After ends
    # (same message, headers and wait, counted down), so a flood costs Redis nothing;
    # its offences still reach Redis within THROTTLING_POLICY_REFRESH seconds.
    "LOCAL_REFUSALS": True,
    # Who is mailed about alerts (surges, high rungs, a block's first refusal): a list of addresses,
    # [] for nobody, or None for the active staff who moderate and have an email address
    # (THROTTLING_MODERATORS when set, else the permission throttling.view_alert; superusers too).
    "ALERT_EMAILS": None,
    # Seconds between two mails of alerts: what happens meanwhile waits and goes in one digest.
    "ALERT_DIGEST": 300,
    # Moderators are told when an automatic penalty reaches this rung of the ladder or a higher one
    # (None: never). 4 is "1 day" on the default ladder.
    "ALERT_RUNG": 4,
    # The widest address range a block may name, as prefix lengths (IPv4, IPv6): by default
    # nothing wider than an IPv4 /8 or an IPv6 /16 (a /0 would refuse every visitor).
    "BLOCK_WIDEST": (8, 16),
    # Where each action's history lives, for replaying a draft policy over it and suggesting limits:
    # {"reply": {"model": "forum.Comment", "member": "user", "time": "created", "target": "topic",
    # "filter": {"is_removed": False}}}. A declared policy may carry its own "history" instead.
    "HISTORY": {},
    # Repeated content: a post without a link, an address or a mention counts towards a wave only
    # from this many words ("Happy birthday!" is what many members write); Chinese and Japanese are
    # measured 1.5 characters to a word. A post with a link makes a wave however short it is.
    "CONTENT_WAVE_WORDS": 12,
}


class Settings:
    """Attribute access to THROTTLING_* settings with defaults.

    Values are remembered as instance attributes until Django reports a
    settings change (as override_settings does): a decision reads several, and
    a remembered one is a plain attribute read, with no function call; overrides
    still apply at once.

    A value read while a change is reported is returned but not remembered: a
    background thread (the policy poller, the sender) that read a setting just
    before the change would otherwise store the old value after the change
    cleared it, and every thread would go on with it (an old Redis URL, say).
    """

    _lock = threading.Lock()
    _generation = 0

    def __getattr__(self, name):
        # Only called for a setting not remembered yet.
        if name not in DEFAULTS:
            raise AttributeError(f"Unknown throttling setting: {name}")
        generation = self._generation
        value = getattr(django_settings, f"THROTTLING_{name}", DEFAULTS[name])
        with self._lock:
            if generation == self._generation:
                self.__dict__[name] = value
        return value

    def reload(self):
        with self._lock:
            Settings._generation += 1
            self.__dict__.clear()


settings = Settings()


@receiver(setting_changed)
def _settings_changed(setting, **kwargs):
    if setting.startswith("THROTTLING_"):
        settings.reload()


# Cap on max_count of a sliding-log window. A sliding log keeps one sorted-set
# entry per admitted action for the length of its longest window (see Architecture › Bounded memory):
# 1,000 entries cost roughly 100 KB per member and action, the most we accept.
MAX_LOG_ENTRIES = 1000
# Cap on max_count of a token-bucket window: its state is a few numbers
# whatever the limit, so the cap only keeps the refill interval (P/N) sane.
MAX_BUCKET_SIZE = 1_000_000
# 366 days, the longest window a policy may have.
MAX_PERIOD = 366 * 24 * 3600
