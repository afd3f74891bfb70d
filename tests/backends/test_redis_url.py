"""THROTTLING_REDIS_URL: every scheme read as documented; a bad URL is a system-check error, never a 500."""

import pytest
from django.test.utils import override_settings
from redis.connection import SSLConnection, UnixDomainSocketConnection

import throttling
import throttling.backends.redis_urls
import throttling.engine.decision
from throttling.checks import check_cache_alias, check_redis_url
from throttling.exceptions import ImproperlyConfiguredBackend


def test_standalone_schemes():
    plain = throttling.backends.redis_urls.parse("redis://:s3cret@10.0.0.5:6380/2")
    assert plain.kind == "standalone"
    assert (plain.kwargs["host"], plain.kwargs["port"], plain.kwargs["db"], plain.kwargs["password"]) == (
        "10.0.0.5",
        6380,
        2,
        "s3cret",
    )
    tls = throttling.backends.redis_urls.parse("rediss://cache.example.com:6380/0")
    assert tls.connection_class is SSLConnection
    sock = throttling.backends.redis_urls.parse("unix:///run/redis/redis.sock?db=3")
    assert sock.connection_class is UnixDomainSocketConnection
    assert (sock.kwargs["path"], sock.kwargs["db"]) == ("/run/redis/redis.sock", 3)


def test_sentinel_url_names_every_sentinel_the_service_and_the_database():
    topo = throttling.backends.redis_urls.parse("redis+sentinel://:pw@10.0.0.1:26379,10.0.0.2,[::1]:26380/mymaster/4")
    assert topo.kind == "sentinel"
    assert topo.sentinels == [("10.0.0.1", 26379), ("10.0.0.2", 26379), ("::1", 26380)]
    assert topo.service == "mymaster"
    assert topo.node_kwargs == {"password": "pw", "db": 4}
    assert topo.sentinel_auth == {"password": "pw"}


def test_cluster_url_takes_any_subset_of_nodes():
    topo = throttling.backends.redis_urls.parse("redis+cluster://app:pw@10.0.0.1:7000,10.0.0.2:7001")
    assert topo.kind == "cluster"
    assert topo.seeds == [("10.0.0.1", 7000), ("10.0.0.2", 7001)]
    assert topo.node_kwargs == {"username": "app", "password": "pw"}


@pytest.mark.parametrize(
    "url, words",
    [
        ("http://127.0.0.1:6379", "unsupported scheme http://"),
        ("127.0.0.1:6379", "unsupported scheme (none)"),
        ("", "must be a URL"),
        ("redis://127.0.0.1:port/0", "cannot be read"),
        ("redis+sentinel://127.0.0.1:26379", "names no service"),
        ("redis+sentinel://127.0.0.1:26379/mymaster/zero", "only a database number"),
        ("redis+sentinel://127.0.0.1:99999/mymaster", "no valid port"),
        ("redis+cluster://127.0.0.1:7000/3", "only database 0"),
        ("redis+cluster://:pw@/", "names no host"),
    ],
)
def test_a_bad_url_is_a_system_check_error_with_words(url, words):
    with override_settings(THROTTLING_REDIS_URL=url):
        errors = check_redis_url()
    assert [e.id for e in errors] == ["throttling.E005"]
    assert words in errors[0].msg
    assert "redis+cluster://" in errors[0].hint


def test_the_password_never_appears_in_the_message():
    with override_settings(THROTTLING_REDIS_URL="redis+sentinel://:hunter2@127.0.0.1:26379"):
        (error,) = check_redis_url()
    assert "hunter2" not in error.msg and "***" in error.msg


def test_with_a_url_the_cache_alias_need_not_be_django_redis():
    caches = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    with override_settings(CACHES=caches):
        assert [e.id for e in check_cache_alias()] == ["throttling.E002"]
        with override_settings(THROTTLING_REDIS_URL="redis://127.0.0.1:6379/0"):
            assert check_cache_alias() == [] and check_redis_url() == []


@pytest.mark.django_db
def test_a_bad_url_on_a_request_fails_open_or_closed_never_raises(policy):
    policy("reply", 60, 5)
    with override_settings(THROTTLING_REDIS_URL="redis+cluster://127.0.0.1:7000/9"):
        decision = throttling.check("someone", "reply")
    assert decision.reason == throttling.engine.decision.BACKEND_FAILURE and decision.allowed


@pytest.mark.django_db
def test_a_locmem_cache_with_a_url_decides_on_the_urls_server(redis_server, policy):
    caches = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    with override_settings(CACHES=caches, THROTTLING_REDIS_URL=redis_server.url):
        policy("reply", 60, 2)
        assert [throttling.check("lee", "reply").allowed for _ in range(3)] == [True, True, False]


def test_parse_raises_the_backend_error_the_request_path_catches():
    with pytest.raises(ImproperlyConfiguredBackend):
        throttling.backends.redis_urls.parse("memcached://127.0.0.1")


@pytest.mark.django_db
@pytest.mark.parametrize("scheme", ["redis+cluster", "redis+sentinel"])
def test_a_topology_nobody_answers_for_is_a_backend_failure(policy, scheme):
    from demo_site.redis_server import free_port

    policy("reply", 60, 5, on_backend_failure="closed")
    url = f"{scheme}://127.0.0.1:{free_port()}" + ("/mymaster" if scheme == "redis+sentinel" else "")
    with override_settings(THROTTLING_REDIS_URL=url):
        first = throttling.check("someone", "reply")
        second = throttling.check("someone", "reply")
    assert [first.reason, second.reason] == [throttling.engine.decision.BACKEND_FAILURE] * 2
    assert not first.allowed and first.retry_after > 0  # closed, as the policy says


def test_a_backend_built_from_the_settings_before_a_change_is_not_kept_after_it(monkeypatch):
    """Another thread (the background thread, a request) building the backend while the settings change
    has read the old settings: the change forgets what it builds, so the next decision cannot go to the
    Redis the settings no longer name."""
    import threading

    import throttling.backends.redis as backend_module

    building, built = threading.Event(), threading.Event()
    topology = backend_module._topology

    def slow_topology():
        topo = topology()  # the settings as they are now
        building.set()
        built.wait(5)  # preempted here, as a loaded machine may do
        return topo

    with override_settings(THROTTLING_REDIS_URL="redis://127.0.0.1:1/0"):  # no backend built yet
        monkeypatch.setattr(backend_module, "_topology", slow_topology)
        builder = threading.Thread(target=backend_module.get_backend)
        builder.start()
        assert building.wait(5)
        threading.Timer(0.3, built.set).start()  # the build ends a moment after the change began
        with override_settings(THROTTLING_REDIS_URL="redis://127.0.0.1:2/0"):
            builder.join(5)
            monkeypatch.setattr(backend_module, "_topology", topology)
            assert backend_module.get_backend().topology.kwargs["port"] == 2


def test_a_change_of_caches_is_followed_before_djangos_own_cache_handler_is_renewed(redis_server):
    """Django renews django.core.cache.caches in its own receiver of a settings change, which runs after
    the one that forgets our backend: a thread (the background thread) building the backend between
    the two must take the server the settings now name, not the one the handler still holds."""
    from django.core.signals import setting_changed
    from django.test.signals import clear_cache_handlers

    import throttling.backends.redis as backend_module
    from tests.support.helpers import redis_caches

    # Django's handler left as it was, as it is in that gap.
    assert setting_changed.disconnect(clear_cache_handlers)
    try:
        with override_settings(CACHES=redis_caches("redis://127.0.0.1:2/0")):
            assert backend_module.get_backend().topology.kwargs["port"] == 2
    finally:
        setting_changed.connect(clear_cache_handlers)
    assert backend_module.get_backend().topology.kwargs["port"] == redis_server.port


def test_a_setting_read_while_a_change_is_reported_is_not_remembered(monkeypatch):
    """A thread that read a setting just before a change and stores it just after would leave every
    thread on the old value (an old Redis URL) until the next change: what it read is returned but not kept."""
    import threading

    import throttling.conf

    reading, change_done = threading.Event(), threading.Event()
    real = throttling.conf.django_settings

    class SlowSettings:
        """Django's settings, read the moment before a change and returned the moment after it."""

        def __getattr__(self, name):
            value = getattr(real, name)
            if name == "THROTTLING_KEY_PREFIX":
                reading.set()
                change_done.wait(5)
            return value

    monkeypatch.setattr(throttling.conf, "django_settings", SlowSettings())
    settings = throttling.conf.settings
    settings.reload()
    seen = []
    reader = threading.Thread(target=lambda: seen.append(settings.KEY_PREFIX))
    with override_settings(THROTTLING_KEY_PREFIX="before"):
        reader.start()
        assert reading.wait(5)
        # The change is reported while the reader holds the old value.
        with override_settings(THROTTLING_KEY_PREFIX="after"):
            change_done.set()
            reader.join(5)
            assert seen == ["before"]  # returned to the caller that asked before the change
            monkeypatch.setattr(throttling.conf, "django_settings", real)
            assert settings.KEY_PREFIX == "after"  # but not remembered in place of the new value
    settings.reload()
