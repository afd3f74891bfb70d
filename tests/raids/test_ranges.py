"""The range index: every range holding an address, narrowest first, for IPv4 and IPv6 apart."""

import ipaddress
import random

import pytest

from throttling.engine.countermeasures.address_ranges import RangeIndex, bounds

pytestmark = pytest.mark.django_independent  # the index alone: no Django in it


def index_of(pairs):
    """A RangeIndex of (ip_network, item) pairs."""
    return RangeIndex([(n.version, int(n.network_address), int(n.broadcast_address), item) for n, item in pairs])


def brute_force(networks, address):
    """What the index must answer: the items of every network holding `address`, narrowest first."""
    holding = [(n, item) for n, item in networks if n.version == address.version and address in n]
    holding.sort(key=lambda pair: -pair[0].prefixlen)  # stable: items of one network keep their order
    return tuple(item for _n, item in holding)


def random_networks(rng, version, count):
    """`count` random ranges inside 10.0.0.0/12 or 2001:db8::/80: close enough to nest often."""
    bits, base, room = (32, 10 << 24, 20) if version == 4 else (128, 0x20010DB8 << 96, 48)
    prefixes = [12, 14, 16, 20, 24, 28, 30, 32] if version == 4 else [80, 88, 96, 104, 112, 120, 128]
    networks = []
    for i in range(count):
        prefix = rng.choice(prefixes)
        host_bits = bits - prefix
        value = (base | rng.getrandbits(room)) >> host_bits << host_bits
        networks.append((ipaddress.ip_network((value, prefix)), f"{version}-{i}"))
    return networks


@pytest.mark.parametrize("version", [4, 6])
def test_the_index_finds_what_a_search_through_every_range_finds(version):
    rng = random.Random(version)
    networks = random_networks(rng, version, 600)
    # Some ranges twice, under another item: both are found, in the order given.
    networks += [(n, f"{item}-again") for n, item in networks[:40]]
    index = index_of(networks)
    probes = [n.network_address for n, _ in networks] + [n.broadcast_address for n, _ in networks]
    probes += [n.network_address - 1 for n, _ in networks if int(n.network_address)]
    probes += [ipaddress.ip_address(rng.getrandbits(32 if version == 4 else 128)) for _ in range(500)]
    nested = sum(1 for p in probes if len(brute_force(networks, p)) > 1)
    assert nested > 50  # the sample does test nesting
    for address in probes:
        assert index.lookup(version, int(address)) == brute_force(networks, address), address


def test_nested_ranges_give_the_narrowest_first_and_the_outer_one_around_it():
    outer, inner, single = (ipaddress.ip_network(t) for t in ("203.0.113.0/24", "203.0.113.128/25", "203.0.113.7/32"))
    index = index_of([(outer, "outer"), (inner, "inner"), (single, "single")])
    at = lambda text: index.lookup(4, int(ipaddress.ip_address(text)))  # noqa: E731
    assert at("203.0.113.7") == ("single", "outer")
    assert at("203.0.113.8") == ("outer",)
    assert at("203.0.113.200") == ("inner", "outer")
    assert at("203.0.112.255") == () and at("203.0.114.0") == ()


def test_ipv4_and_ipv6_are_kept_apart():
    # ::cb00:7100 is the same integer as 203.0.113.0: an IPv6 client must not match the IPv4 range.
    index = index_of([(ipaddress.ip_network("203.0.113.0/24"), "v4"), (ipaddress.ip_network("2001:db8::/32"), "v6")])
    assert index.lookup(4, int(ipaddress.ip_address("203.0.113.9"))) == ("v4",)
    assert index.lookup(6, int(ipaddress.ip_address("::cb00:7109"))) == ()
    assert index.lookup(6, int(ipaddress.ip_address("2001:db8:ffff::1"))) == ("v6",)
    assert len(index) == 2


def test_an_empty_index_finds_nothing():
    assert RangeIndex([]).lookup(4, 1) == () and RangeIndex([]).lookup(6, 1) == ()


@pytest.mark.parametrize(
    "text",
    [
        "203.0.113.0/24",
        "203.0.113.9/24",
        "198.51.100.7",
        "0.0.0.0/0",
        "2001:db8::/32",
        "2001:db8::7",
        "::/0",
        "::1/128",
    ],
)
def test_bounds_read_a_range_as_ipaddress_does(text):
    network = ipaddress.ip_network(text, strict=False)
    assert bounds(text) == (
        network.version,
        int(network.network_address),
        int(network.broadcast_address),
        network.prefixlen,
    )


@pytest.mark.parametrize("text", ["203.0.113.0/33", "spam.example.org", "203.0.113/24", "2001:db8::/129", "1.2.3.4/x"])
def test_bounds_refuse_what_is_not_a_range(text):
    with pytest.raises(ValueError):
        bounds(text)
