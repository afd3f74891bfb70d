"""Small assertions and settings shared by the test modules."""

import re

import throttling


def redis_caches(url):
    """CACHES pointing the default django-redis alias at `url`."""
    return {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": url,
            "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
        }
    }


def used(who, action):
    """Entries currently counted against `who`: the limit less what peek says is left."""
    d = throttling.peek(who, action)
    return d.limit - d.remaining


def retry_after(response):
    """The Retry-After header, which must be whole seconds and at least 1."""
    header = response["Retry-After"]
    assert re.fullmatch(r"[1-9][0-9]*", header), header
    return int(header)


def ensure_default_ladder():
    """Put back the migration's penalty ladder: a transactional test's flush empties every table."""
    from importlib import import_module

    from throttling.models import PenaltyStep

    if PenaltyStep.objects.exists():
        return
    ladder = import_module("throttling.migrations.0004_default_ladder").LADDER
    PenaltyStep.objects.bulk_create(
        PenaltyStep(level=level, name=name, duration=duration, all_actions=all_actions)
        for level, name, duration, all_actions in ladder
    )
