"""What a spammer varies that a reader does not see: each disguise is the same post, decided against real Redis."""

import random

import pytest
from django.test.utils import override_settings

import throttling
from tests.support.helpers import Monitor, deciding_connections
from throttling.engine.content import fingerprints as content
from throttling.engine.content import normalise
from throttling.engine.decision import DUPLICATE, REPEATED, WAVE

pytestmark = pytest.mark.django_db

LINK_POST = "Cheap pills at https://pharma.example/buy"
LONG_POST = (
    "Cheap meds without a prescription, shipped in discreet packages to any country within five days. "
    "We accept every card and crypto, and the first order comes with a free sample for you."
)
INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff\u00ad\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
# Latin letters and a Cyrillic lookalike of each.
CYRILLIC = str.maketrans("aceopxyACEHKMOPTX", "асеорхуАСЕНКМОРТХ")


def invisible_inside_words(text, rng):
    """Every word of `text` with an invisible character of the set inside it."""
    return " ".join(w[:1] + rng.choice(INVISIBLE) + w[1:] if len(w) > 1 else w for w in text.split(" "))


def one_lookalike(text):
    return text.replace("e", "е", 1)  # one Cyrillic е


@pytest.mark.parametrize("text", [LINK_POST, LONG_POST])
def test_each_invisible_character_inside_words_is_the_same_post(text):
    for char in INVISIBLE:
        disguised = " ".join(w[:1] + char + w[1:] for w in text.split(" "))
        assert content.same(text, disguised), hex(ord(char))
    assert content.same(text, invisible_inside_words(text, random.Random(1)))


@pytest.mark.parametrize("padding", [20_000, 25_000])
@pytest.mark.parametrize("filler", ["\u200b", " ", "\u200b \u2060", "."])
def test_padding_never_switches_the_limit_off(redis_server, policy, padding, filler):
    policy("reply", 60, 10, same_content_max=1, same_content_period=600)
    padded = filler * (padding // len(filler)) + LINK_POST
    assert content.fingerprint(padded) == content.fingerprint(LINK_POST)
    assert throttling.check("alice", "reply", content=LINK_POST).allowed
    refused = throttling.check("alice", "reply", content=padded)
    assert refused.reason == DUPLICATE and refused.duplicate == REPEATED


@pytest.mark.parametrize("filler", ["\u200b", " \n", ".\u200b", ".\u202e", "🎉🎈", "-=", ".\U000e0020"])
def test_a_padding_of_a_million_characters_of_any_filler_is_removed_before_the_cap(filler):
    padded = filler * (1_000_000 // len(filler)) + LINK_POST
    assert content.fingerprint(padded) == content.fingerprint(LINK_POST)
    # Filler that is not invisible is still seen when it is all there is: a wall of dots is a post.
    assert content.fingerprint("." * 30_000) == content.fingerprint(".")


@pytest.mark.parametrize(
    "disguised",
    [
        "Chea&#8203;p pills at https://pharma.example/buy",  # an entity of an invisible character
        "Ch&#1077;ap pills at https://pharma.example/buy",  # of a Cyrillic е
        "&#8203;" * 20_000 + LINK_POST,  # a padding of entities
        "<b></b>" * 10_000 + LINK_POST,  # of empty tags
        "<p>Che<b>ap</b> pills at <a href='https://pharma.example/buy'></a></p>",
    ],
)
def test_markup_is_unwrapped_before_letters_are_folded_and_before_the_cap(disguised):
    assert content.same(disguised, LINK_POST)


@pytest.mark.parametrize(
    "disguise",
    [
        pytest.param(lambda t: t.translate(CYRILLIC), id="all-cyrillic"),
        pytest.param(one_lookalike, id="one-lookalike"),
        pytest.param(lambda t: "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in t), id="fullwidth"),
        pytest.param(lambda t: "".join(c + "\u0301" if c in "aeiou" else c for c in t), id="accents"),
        pytest.param(lambda t: "".join(c + "\u0336" if c.isalpha() else c for c in t), id="strike-through"),
        pytest.param(lambda t: t.upper(), id="capitals"),
    ],
)
@pytest.mark.parametrize("text", [LINK_POST, LONG_POST])
def test_lookalikes_accents_and_forms_are_the_same_post(redis_server, policy, disguise, text):
    policy("reply", 60, 10, same_content_max=1, same_content_period=600)
    disguised = disguise(text)
    assert disguised != text
    assert throttling.check("alice", "reply", content=text).allowed
    assert throttling.check("alice", "reply", content=disguised).reason == DUPLICATE


EIGHT_SPELLINGS = [
    "Cheap pills at https://pharma.example/buy",
    "Cheap pills at http://pharma.example/buy",
    "Cheap pills at https://www.pharma.example/buy/",
    "Cheap pills at HTTPS://PHARMA.EXAMPLE/buy",
    "Cheap pills at https://pharma.example:443/buy#order",
    "Cheap pills at https://pharma.example/buy?utm_source=forum&fbclid=x1&gclid=9",
    "Cheap pills at https://pharma.example/%62%75%79",
    "[Cheap pills at](https://pharma.example/buy)",
]


def test_eight_spellings_of_one_link_are_one_link():
    assert len({normalise.canonical_link(s.split(" ")[-1].strip("[]()")) for s in EIGHT_SPELLINGS[:7]}) == 1
    keys = {content.fingerprint(s) for s in EIGHT_SPELLINGS}
    assert len(keys) == 1
    # Another link, or another path, is another post.
    assert not content.same(LINK_POST, "Cheap pills at https://pharma.example/sell")
    assert not content.same(LINK_POST, "Cheap pills at https://other.example/buy")
    # Internationalised hosts: the IDNA spelling is the host.
    assert content.same("Visit https://bücher.example/x now", "Visit https://xn--bcher-kva.example/x now")


def test_emoji_only_posts_are_compared_and_a_smile_is_not_a_frown(redis_server, policy):
    policy("reply", 60, 10, same_content_max=1, same_content_period=600)
    assert throttling.check("alice", "reply", content="🎉🎉🎉").allowed
    assert throttling.check("alice", "reply", content="🎉").reason == DUPLICATE
    assert throttling.check("alice", "reply", content=":)").allowed
    assert throttling.check("alice", "reply", content=":(").allowed
    assert throttling.check("alice", "reply", content=":)").reason == DUPLICATE
    assert not content.same(":)", ":(")


def test_a_wave_varied_with_invisible_characters_and_lookalikes_is_refused_from_the_fourth(redis_server, policy):
    policy("reply", 60, 10, same_content_members=3, same_content_period=600)
    rng = random.Random(7)
    for text in (LONG_POST, LINK_POST):
        decisions = []
        for i in range(8):
            varied = invisible_inside_words(text, rng)
            if i % 2:
                varied = one_lookalike(varied).replace("a", "а", 1 + i)  # Cyrillic а
            decisions.append(throttling.check(f"{text[:5]}-{i}", "reply", content=varied))
        assert [d.allowed for d in decisions] == [True] * 3 + [False] * 5
        assert {d.duplicate for d in decisions[3:]} == {WAVE}


def test_a_short_post_with_a_link_from_six_accounts_in_six_spellings_is_a_wave(redis_server, policy):
    policy("reply", 60, 10, same_content_members=3, same_content_period=600)
    decisions = [throttling.check(f"account-{i}", "reply", content=s) for i, s in enumerate(EIGHT_SPELLINGS[:6])]
    assert [d.allowed for d in decisions] == [True, True, True, False, False, False]
    assert decisions[3].reason == DUPLICATE and decisions[3].duplicate == WAVE


ORDINARY = [
    "Happy birthday! Wishing you all the best this year",
    "The quick brown fox jumps over the lazy dog",
    "Thanks for sharing, this was really helpful!",
    "谢谢大家的帮助，非常感谢！",
    "祝你生日快乐，愿你今年一切顺利",
    "Alles Gute zum Geburtstag und viel Glück im neuen Jahr!",
    "Joyeux anniversaire, je te souhaite le meilleur",
    "С днём рождения! Всего самого лучшего!",
    "お誕生日おめでとうございます",
]


def test_ordinary_phrases_from_eight_members_are_never_a_wave(redis_server, policy):
    policy("reply", 60, 10, same_content_members=3, same_content_period=600)
    for phrase in ORDINARY:
        decisions = [throttling.check(f"well-wisher-{i}", "reply", content=phrase) for i in range(8)]
        assert all(d.allowed for d in decisions), phrase


def test_a_long_enough_phrase_without_a_link_is_a_wave_and_the_setting_moves_the_bar(redis_server, policy):
    policy("reply", 60, 10, same_content_members=3, same_content_period=600)
    twelve = "please everyone vote for my cousin in the talent show finals tonight"
    assert content.fingerprint(twelve).length == 12
    decisions = [throttling.check(f"voter-{i}", "reply", content=twelve) for i in range(5)]
    assert [d.allowed for d in decisions] == [True, True, True, False, False]
    with override_settings(THROTTLING_CONTENT_WAVE_WORDS=13):
        other = "please everyone vote for my sister in the talent show finals tonight"
        assert all(throttling.check(f"sister-{i}", "reply", content=other).allowed for i in range(5))
    with override_settings(THROTTLING_CONTENT_WAVE_WORDS=5):
        assert [throttling.check(f"bday-{i}", "reply", content=ORDINARY[0]).allowed for i in range(4)] == [
            True,
            True,
            True,
            False,
        ]


def test_chinese_is_measured_as_its_translation():
    chinese = content.fingerprint("祝你生日快乐，愿你今年一切顺利")  # 13 characters
    english = content.fingerprint("Happy birthday, wishing you all the best this year")  # 9 words
    assert abs(chinese.length - english.length) < 1.5
    assert not chinese.makes_wave() and not english.makes_wave()


def test_a_surge_multiplies_the_content_limits_too(redis_server, policy, member):
    policy("reply", 60, 100, same_content_max=2, same_content_members=4, same_content_period=600)
    throttling.start_surge(0.5, 30, "spam wave")
    decisions = [throttling.check(f"surge-{i}", "reply", content=LONG_POST) for i in range(4)]
    assert [d.allowed for d in decisions] == [True, True, False, False]  # a wave of 4 is 2
    assert decisions[2].duplicate == WAVE
    # A member's repeats: 2 become 1.
    assert throttling.check(member, "reply", content=LINK_POST).allowed
    assert throttling.check(member, "reply", content=LINK_POST).duplicate == REPEATED
    throttling.end_surge()
    assert throttling.check("surge-2", "reply", content=LONG_POST).allowed  # the wave's 3rd of 4 again


def test_a_surge_never_takes_a_content_limit_below_one(redis_server, policy):
    policy("reply", 60, 100, same_content_max=1, same_content_members=1, same_content_period=600)
    throttling.start_surge(0.1, 30, "spam wave")
    assert throttling.check("first", "reply", content=LONG_POST).allowed
    assert throttling.check("first", "reply", content=LONG_POST).duplicate == REPEATED
    assert throttling.check("second", "reply", content=LONG_POST).duplicate == WAVE


@override_settings(THROTTLING_POLICY_REFRESH=3600)
def test_disguised_posts_are_still_one_command_each(redis_server, policy):
    policy("reply", 60, 100, same_content_max=1, same_content_members=3, same_content_period=600)
    throttling.check("warm-up", "reply", content="warm up text")
    rng = random.Random(3)
    texts = [invisible_inside_words(LONG_POST, rng), LINK_POST.translate(CYRILLIC), *EIGHT_SPELLINGS, "🎉", ":)"]
    with Monitor(redis_server.url) as monitor:
        decisions = [throttling.check(f"m{i % 5}", "reply", content=t) for i, t in enumerate(texts)]
    assert {d.reason for d in decisions} >= {DUPLICATE}
    assert monitor.sent_by(deciding_connections()) == ["EVALSHA"] * len(decisions)
