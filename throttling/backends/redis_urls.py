"""THROTTLING_REDIS_URL and django-redis cache aliases, read into a topology."""

from urllib.parse import parse_qs, unquote

from django.conf import settings as django_settings
from django.utils.module_loading import import_string
from redis.connection import Connection, parse_url

from ..exceptions import ImproperlyConfiguredBackend
from .topology import ADDRESS_KWARGS, REDIS_PORT, SENTINEL_PORT, SHARED, ClusterTopology, SentinelTopology, Standalone


def parse(url):
    """The topology a THROTTLING_REDIS_URL names; ImproperlyConfiguredBackend with words when it cannot."""
    if not isinstance(url, str) or not url.strip():
        raise ImproperlyConfiguredBackend(
            f"THROTTLING_REDIS_URL must be a URL such as redis://127.0.0.1:6379/0, not {url!r}."
        )
    url = url.strip()
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme in ("redis", "rediss", "unix"):
        try:
            kwargs = parse_url(url)
        except ValueError as exc:
            raise ImproperlyConfiguredBackend(f"THROTTLING_REDIS_URL {_shown(url)} cannot be read: {exc}") from exc
        cls = kwargs.pop("connection_class", Connection)
        if cls is Connection and not kwargs.get("host"):
            raise ImproperlyConfiguredBackend(f"THROTTLING_REDIS_URL {_shown(url)} names no host.")
        return Standalone(cls, kwargs)
    if scheme == "redis+sentinel":
        auth, hosts, path, query = _split(url, SENTINEL_PORT)
        parts = [p for p in path.split("/") if p]
        if not parts:
            raise ImproperlyConfiguredBackend(
                f"THROTTLING_REDIS_URL {_shown(url)} names no service: write "
                "redis+sentinel://host:26379/<service name>[/<db>]."
            )
        if len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
            raise ImproperlyConfiguredBackend(
                f"THROTTLING_REDIS_URL {_shown(url)}: after the service name only a database number may follow."
            )
        node = dict(auth)
        node["db"] = int(parts[1]) if len(parts) == 2 else int(query.get("db", ["0"])[0])
        return SentinelTopology(hosts, unquote(parts[0]), node, sentinel_auth=auth)
    if scheme == "redis+cluster":
        auth, hosts, path, query = _split(url, REDIS_PORT)
        if path.strip("/") not in ("", "0"):
            raise ImproperlyConfiguredBackend(
                f"THROTTLING_REDIS_URL {_shown(url)}: a Redis Cluster has only database 0; remove the path."
            )
        return ClusterTopology(hosts, dict(auth))
    raise ImproperlyConfiguredBackend(
        f"THROTTLING_REDIS_URL {_shown(url)} has an unsupported scheme {scheme + '://' if scheme else '(none)'}; "
        "use redis://, rediss://, unix://, redis+sentinel:// or redis+cluster://."
    )


def _shown(url):
    """The URL without its password, for messages."""
    head, sep, rest = url.partition("://")
    if "@" in rest.split("/", 1)[0]:
        userinfo, _, tail = rest.partition("@")
        user = userinfo.split(":", 1)[0]
        return f"{head}{sep}{user}:***@{tail}" if ":" in userinfo else f"{head}{sep}{user}@{tail}"
    return url


def _split(url, default_port):
    """(auth kwargs, [(host, port)...], path, query) of a URL with a comma-separated host list."""
    rest = url.partition("://")[2]
    rest, _, query = rest.partition("?")
    netloc, slash, path = rest.partition("/")
    auth = {}
    if "@" in netloc:
        userinfo, _, netloc = netloc.rpartition("@")
        user, colon, password = userinfo.partition(":")
        if user:
            auth["username"] = unquote(user)
        if colon and password:
            auth["password"] = unquote(password)
    hosts = []
    for item in netloc.split(","):
        item = item.strip()
        if not item:
            continue
        if item.startswith("["):  # [::1]:6379
            host, _, port = item[1:].partition("]")
            port = port.lstrip(":")
        else:
            host, _, port = item.rpartition(":") if ":" in item else (item, "", "")
        if not host:
            raise ImproperlyConfiguredBackend(f"THROTTLING_REDIS_URL {_shown(url)}: {item!r} names no host.")
        if port and not (port.isdigit() and 0 < int(port) < 65536):
            raise ImproperlyConfiguredBackend(f"THROTTLING_REDIS_URL {_shown(url)}: {item!r} has no valid port.")
        hosts.append((host, int(port) if port else default_port))
    if not hosts:
        raise ImproperlyConfiguredBackend(f"THROTTLING_REDIS_URL {_shown(url)} names no host.")
    return auth, hosts, slash + path, parse_qs(query)


def from_alias_pool(pool):
    """The topology of a redis-py pool that django-redis built for the cache alias."""
    kwargs = dict(pool.connection_kwargs)
    if hasattr(pool, "service_name"):  # a Sentinel pool
        node = {k: kwargs[k] for k in SHARED if kwargs.get(k) is not None}
        hosts, sentinel_auth = [], {}
        for client in pool.sentinel_manager.sentinels:
            ckw = client.connection_pool.connection_kwargs
            hosts.append((ckw.get("host", "localhost"), ckw.get("port", SENTINEL_PORT)))
            sentinel_auth = {k: ckw[k] for k in ("username", "password") if ckw.get(k)}
        return SentinelTopology(hosts, pool.service_name, node, sentinel_auth=sentinel_auth)
    # Only what says where and who: the pool's parser, retry and notification
    # handlers belong to redis-py's synchronous client, not to our connections.
    kwargs = {k: v for k, v in kwargs.items() if k in ADDRESS_KWARGS or k.startswith("ssl_")}
    return Standalone(pool.connection_class, kwargs)


def _alias_cache(alias):
    """The django-redis cache `alias` as settings.CACHES names it now.

    Built from the settings rather than taken from django.core.cache.caches: on a settings change
    Django renews that handler in its own receiver, which runs after the one that forgets our backend,
    so a background thread building the backend in between would take the previous server's cache
    and keep it. django-redis shares its pools by URL, so this opens no connection of its own."""
    try:
        params = dict(django_settings.CACHES[alias])
        backend = import_string(params.pop("BACKEND"))
        return backend(params.pop("LOCATION", ""), params)
    except Exception as exc:  # a missing alias, an import error, a backend refusing its options
        raise ImproperlyConfiguredBackend(f"THROTTLING_CACHE_ALIAS={alias!r} is not a configured cache: {exc}") from exc


def alias_pool(alias):
    """The connection pool of the django-redis cache `alias`; ImproperlyConfiguredBackend with words when it has none."""
    cache = _alias_cache(alias)
    get_client = getattr(getattr(cache, "client", None), "get_client", None)
    if get_client is None:
        raise ImproperlyConfiguredBackend(
            f"THROTTLING_CACHE_ALIAS={alias!r} is not a django-redis cache "
            f"({type(cache).__module__}.{type(cache).__name__}); set THROTTLING_REDIS_URL "
            "to give the throttle a Redis of its own."
        )
    pool = getattr(get_client(True), "connection_pool", None)
    if pool is None:
        raise ImproperlyConfiguredBackend(
            f"THROTTLING_CACHE_ALIAS={alias!r} uses a client without a connection pool "
            "(a cluster client?); set THROTTLING_REDIS_URL, e.g. redis+cluster://host:port."
        )
    return pool
