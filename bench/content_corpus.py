"""A small corpus of realistic community posts and their variants, for measuring what "the same" catches.

Each base text is a post of 30 to 60 words as members write them (spam with a link, and ordinary
posts); each has variants a spammer or a copy-paster makes, which must count as the same post, and
other posts on the same topic, which must not. `python -m bench.content` measures the ways of
telling them apart against it; the tests hold the chosen one to it.
"""

# What makes a variant: the kinds a duplicate-content limit must see through.
WORD_CHANGED = "one word changed"
TWO_WORDS_CHANGED = "two words changed"
REORDERED = "a sentence moved"
EMOJI = "an emoji added"
TRACKING = "a tracking parameter added"
SPACING = "case, spacing and punctuation"

# The kinds the acceptance requires; TWO_WORDS_CHANGED is measured too, as the edge of the method.
REQUIRED_SAME = (WORD_CHANGED, REORDERED, EMOJI, TRACKING, SPACING)

BASES = {
    "cash": {
        "text": (
            "Hey everyone, I found this amazing site that pays you to test apps from home. I made 300 dollars "
            "last week in my spare time and no experience is needed. Sign up with my link and get a bonus "
            "today: https://quick-cash.example/join?ref=8812 Tell your friends about it!"
        ),
        "variants": {
            WORD_CHANGED: (
                "Hey everyone, I found this incredible site that pays you to test apps from home. I made 300 "
                "dollars last week in my spare time and no experience is needed. Sign up with my link and get a "
                "bonus today: https://quick-cash.example/join?ref=8812 Tell your friends about it!"
            ),
            TWO_WORDS_CHANGED: (
                "Hey everyone, I found this incredible site that pays you to test apps from home. I made 450 "
                "dollars last week in my spare time and no experience is needed. Sign up with my link and get a "
                "bonus today: https://quick-cash.example/join?ref=8812 Tell your friends about it!"
            ),
            REORDERED: (
                "I made 300 dollars last week in my spare time and no experience is needed. Hey everyone, I "
                "found this amazing site that pays you to test apps from home. Sign up with my link and get a "
                "bonus today: https://quick-cash.example/join?ref=8812 Tell your friends about it!"
            ),
            EMOJI: (
                "Hey everyone 👋 I found this amazing site that pays you to test apps from home. I made 300 "
                "dollars last week in my spare time and no experience is needed 💰💰 Sign up with my link and get "
                "a bonus today: https://quick-cash.example/join?ref=8812 Tell your friends about it!"
            ),
            TRACKING: (
                "Hey everyone, I found this amazing site that pays you to test apps from home. I made 300 dollars "
                "last week in my spare time and no experience is needed. Sign up with my link and get a bonus "
                "today: https://quick-cash.example/join?ref=8812&utm_source=forum&utm_campaign=wave3 Tell your "
                "friends about it!"
            ),
            SPACING: (
                "HEY EVERYONE,  i found this amazing site that pays you to test apps from home!!! I made 300 "
                "dollars last week in my spare time and no experience is needed...   Sign up with my link and get "
                "a bonus today: https://quick-cash.example/join?ref=8812 Tell your friends about it!!"
            ),
        },
        "different": (
            "Has anyone here tried those sites that pay you to test apps? I signed up for one last month and "
            "they still have not paid the 40 dollars they owe me. Support does not answer my emails either. "
            "I would stay away until someone can confirm they are legit.",
            "Be careful with posts promising easy money for testing apps from home. They ask for your bank "
            "details after a week, and the bonus never arrives. If an offer needs a referral link to join, it "
            "is almost always a pyramid of people recruiting each other.",
        ),
    },
    "pills": {
        "text": (
            "Cheap meds without a prescription, shipped in discreet packages to any country within five days. "
            "We accept every card and crypto. Best prices on the market, guaranteed, and a free sample with "
            "your first order. Visit https://pharma-deals.example/shop?item=42 before the sale ends on Friday."
        ),
        "variants": {
            WORD_CHANGED: (
                "Cheap meds without a prescription, shipped in discreet packages to any country within three days. "
                "We accept every card and crypto. Best prices on the market, guaranteed, and a free sample with "
                "your first order. Visit https://pharma-deals.example/shop?item=42 before the sale ends on Friday."
            ),
            TWO_WORDS_CHANGED: (
                "Cheap meds without a prescription, shipped in discreet boxes to any country within three days. "
                "We accept every card and crypto. Best prices on the market, guaranteed, and a free sample with "
                "your first order. Visit https://pharma-deals.example/shop?item=42 before the sale ends on Friday."
            ),
            REORDERED: (
                "We accept every card and crypto. Cheap meds without a prescription, shipped in discreet packages "
                "to any country within five days. Best prices on the market, guaranteed, and a free sample with "
                "your first order. Visit https://pharma-deals.example/shop?item=42 before the sale ends on Friday."
            ),
            EMOJI: (
                "💊 Cheap meds without a prescription, shipped in discreet packages to any country within five "
                "days. We accept every card and crypto. Best prices on the market, guaranteed, and a free sample "
                "with your first order 🎁 Visit https://pharma-deals.example/shop?item=42 before the sale ends on "
                "Friday."
            ),
            TRACKING: (
                "Cheap meds without a prescription, shipped in discreet packages to any country within five days. "
                "We accept every card and crypto. Best prices on the market, guaranteed, and a free sample with "
                "your first order. Visit https://pharma-deals.example/shop?item=42&fbclid=IwAR0x9Zq7 before the "
                "sale ends on Friday."
            ),
            SPACING: (
                "cheap meds without a prescription - shipped in discreet packages to any country within five days. "
                "We accept EVERY card and crypto.\n\nBest prices on the market, guaranteed, and a free sample with "
                "your first order. Visit https://pharma-deals.example/shop?item=42 before the sale ends on Friday"
            ),
        },
        "different": (
            "My doctor says the generic version of my prescription is exactly the same medicine, but the "
            "pharmacy charges almost the same price for it. Does anyone know whether ordering by mail is "
            "cheaper in this country, and how long shipping usually takes?",
            "Reminder from the moderators: links to online pharmacies are removed on sight. If you need advice "
            "about a prescription, ask your doctor or a pharmacist, and never buy meds from a site that does "
            "not ask for one.",
        ),
    },
    "crypto": {
        "text": (
            "Join our private crypto signals group and double your money in a month. Our analysts called every "
            "big move this year and members are already earning thousands. Only twenty places left, so message "
            "me now or click https://moon-signals.example/vip to secure your spot today."
        ),
        "variants": {
            WORD_CHANGED: (
                "Join our private crypto signals group and triple your money in a month. Our analysts called every "
                "big move this year and members are already earning thousands. Only twenty places left, so message "
                "me now or click https://moon-signals.example/vip to secure your spot today."
            ),
            TWO_WORDS_CHANGED: (
                "Join our private crypto signals group and triple your money in a month. Our analysts called every "
                "big move this year and members are already earning thousands. Only ten places left, so message "
                "me now or click https://moon-signals.example/vip to secure your spot today."
            ),
            REORDERED: (
                "Our analysts called every big move this year and members are already earning thousands. Join our "
                "private crypto signals group and double your money in a month. Only twenty places left, so message "
                "me now or click https://moon-signals.example/vip to secure your spot today."
            ),
            EMOJI: (
                "🚀🚀 Join our private crypto signals group and double your money in a month. Our analysts called "
                "every big move this year and members are already earning thousands 📈 Only twenty places left, so "
                "message me now or click https://moon-signals.example/vip to secure your spot today."
            ),
            TRACKING: (
                "Join our private crypto signals group and double your money in a month. Our analysts called every "
                "big move this year and members are already earning thousands. Only twenty places left, so message "
                "me now or click https://moon-signals.example/vip?utm_medium=social&gclid=Cj0KCQ to secure your "
                "spot today."
            ),
            SPACING: (
                "JOIN our private crypto signals group & double your money in a month!! Our analysts called every "
                "big move this year and members are already earning thousands. Only twenty places left; so message "
                "me now or click https://moon-signals.example/vip to secure your spot today!!!"
            ),
        },
        "different": (
            "I lost a lot of money following a crypto signals group last year. They post their winning calls "
            "afterwards and quietly delete the losing ones. If someone promises to double your money in a "
            "month, ask them why they are selling the secret instead of using it.",
            "What do people here use to keep track of taxes on small crypto trades? I sold a few coins this "
            "year and my accountant wants a list of every move with dates and prices, which my exchange does "
            "not export in a useful format.",
        ),
    },
    "bike": {
        "text": (
            "My rear brake squeals every time I stop, even after I cleaned the rim with alcohol and changed the "
            "pads last weekend (these ones: https://bike-parts.example/pads). The noise is worse when it rains. "
            "Is it worth adjusting the toe-in of the pads, or should I take the bike to a shop instead?"
        ),
        "variants": {
            WORD_CHANGED: (
                "My rear brake squeals every time I stop, even after I cleaned the rim with alcohol and replaced the "
                "pads last weekend (these ones: https://bike-parts.example/pads). The noise is worse when it rains. "
                "Is it worth adjusting the toe-in of the pads, or should I take the bike to a shop instead?"
            ),
            TWO_WORDS_CHANGED: (
                "My front brake squeals every time I stop, even after I cleaned the rim with alcohol and replaced "
                "the pads last weekend (these ones: https://bike-parts.example/pads). The noise is worse when it "
                "rains. Is it worth adjusting the toe-in of the pads, or should I take the bike to a shop instead?"
            ),
            REORDERED: (
                "The noise is worse when it rains. My rear brake squeals every time I stop, even after I cleaned "
                "the rim with alcohol and changed the pads last weekend (these ones: https://bike-parts.example/pads). "
                "Is it worth adjusting the toe-in of the pads, or should I take the bike to a shop instead?"
            ),
            EMOJI: (
                "My rear brake squeals every time I stop 😩 even after I cleaned the rim with alcohol and changed "
                "the pads last weekend (these ones: https://bike-parts.example/pads). The noise is worse when it "
                "rains. Is it worth adjusting the toe-in of the pads, or should I take the bike to a shop instead? 🚲"
            ),
            TRACKING: (
                "My rear brake squeals every time I stop, even after I cleaned the rim with alcohol and changed the "
                "pads last weekend (these ones: https://bike-parts.example/pads?utm_source=newsletter). The noise "
                "is worse when it rains. Is it worth adjusting the toe-in of the pads, or should I take the bike "
                "to a shop instead?"
            ),
            SPACING: (
                "My rear brake SQUEALS every time I stop... even after I cleaned the rim with alcohol and changed "
                "the pads last weekend (these ones:  https://bike-parts.example/pads).  The noise is worse when it "
                "rains!  Is it worth adjusting the toe-in of the pads -- or should I take the bike to a shop "
                "instead??"
            ),
        },
        "different": (
            "My front brake squeals when the rims are wet, but only with the new pads. I tried toeing them in "
            "with a business card behind the pad and it helped for a week. Did anyone find a fix that lasts "
            "longer than that?",
            "How often should I change the brake pads on a commuter bike? I ride about 20 kilometres a day, "
            "mostly in the rain, and the shop says mine are already worn after three months, which seems fast "
            "to me.",
        ),
    },
    "recipe": {
        "text": (
            "I baked the sourdough from last week's thread (https://bakers.example/t/991) and the crumb came out "
            "dense and gummy again. My starter doubles in about six hours, the dough rests overnight in the "
            "fridge, and I bake it at 240 degrees in a covered pot. What am I doing wrong?"
        ),
        "variants": {
            WORD_CHANGED: (
                "I baked the sourdough from last week's thread (https://bakers.example/t/991) and the crumb came "
                "out dense and gummy again. My starter doubles in about eight hours, the dough rests overnight in "
                "the fridge, and I bake it at 240 degrees in a covered pot. What am I doing wrong?"
            ),
            TWO_WORDS_CHANGED: (
                "I baked the sourdough from last week's thread (https://bakers.example/t/991) and the crumb came "
                "out dense and heavy again. My starter doubles in about eight hours, the dough rests overnight in "
                "the fridge, and I bake it at 240 degrees in a covered pot. What am I doing wrong?"
            ),
            REORDERED: (
                "My starter doubles in about six hours, the dough rests overnight in the fridge, and I bake it at "
                "240 degrees in a covered pot. I baked the sourdough from last week's thread "
                "(https://bakers.example/t/991) and the crumb came out dense and gummy again. What am I doing wrong?"
            ),
            EMOJI: (
                "I baked the sourdough from last week's thread (https://bakers.example/t/991) and the crumb came "
                "out dense and gummy again 😞 My starter doubles in about six hours, the dough rests overnight in "
                "the fridge, and I bake it at 240 degrees in a covered pot 🍞 What am I doing wrong?"
            ),
            TRACKING: (
                "I baked the sourdough from last week's thread (https://bakers.example/t/991?utm_source=email&"
                "utm_medium=digest) and the crumb came out dense and gummy again. My starter doubles in about six "
                "hours, the dough rests overnight in the fridge, and I bake it at 240 degrees in a covered pot. "
                "What am I doing wrong?"
            ),
            SPACING: (
                "i baked the sourdough from last week’s thread (https://bakers.example/t/991), and the crumb came "
                "out dense and gummy AGAIN. My starter doubles in about six hours; the dough rests overnight in the "
                "fridge, and I bake it at 240 degrees in a covered pot.\nWhat am I doing wrong???"
            ),
        },
        "different": (
            "My sourdough is always dense in winter because the kitchen is cold and the starter barely rises. "
            "Putting the dough in the oven with only the light on made a big difference for me; it bulk "
            "ferments in five hours instead of ten.",
            "Dense and gummy crumb usually means the loaf was cut too soon or underbaked. Let it cool for at "
            "least two hours, and check that the inside reaches 96 degrees; a covered pot needs the lid off "
            "for the last twenty minutes.",
        ),
    },
    "giveaway": {
        "text": (
            "Congratulations! You have been selected to receive a brand new phone as part of our anniversary "
            "giveaway. To claim your prize, confirm your shipping address and pay the small handling fee at "
            "https://prize-center.example/claim within 24 hours, or it goes to the next winner."
        ),
        "variants": {
            WORD_CHANGED: (
                "Congratulations! You have been chosen to receive a brand new phone as part of our anniversary "
                "giveaway. To claim your prize, confirm your shipping address and pay the small handling fee at "
                "https://prize-center.example/claim within 24 hours, or it goes to the next winner."
            ),
            TWO_WORDS_CHANGED: (
                "Congratulations! You have been chosen to receive a brand new laptop as part of our anniversary "
                "giveaway. To claim your prize, confirm your shipping address and pay the small handling fee at "
                "https://prize-center.example/claim within 24 hours, or it goes to the next winner."
            ),
            REORDERED: (
                "To claim your prize, confirm your shipping address and pay the small handling fee at "
                "https://prize-center.example/claim within 24 hours, or it goes to the next winner. "
                "Congratulations! You have been selected to receive a brand new phone as part of our anniversary "
                "giveaway."
            ),
            EMOJI: (
                "🎉 Congratulations! 🎉 You have been selected to receive a brand new phone 📱 as part of our "
                "anniversary giveaway. To claim your prize, confirm your shipping address and pay the small "
                "handling fee at https://prize-center.example/claim within 24 hours, or it goes to the next winner."
            ),
            TRACKING: (
                "Congratulations! You have been selected to receive a brand new phone as part of our anniversary "
                "giveaway. To claim your prize, confirm your shipping address and pay the small handling fee at "
                "https://prize-center.example/claim?mc_cid=5f2a&mc_eid=91bb within 24 hours, or it goes to the "
                "next winner."
            ),
            SPACING: (
                "CONGRATULATIONS!!! You have been selected to receive a brand new phone as part of our anniversary "
                "giveaway.   To claim your prize: confirm your shipping address and pay the small handling fee at "
                "https://prize-center.example/claim within 24 hours -- or it goes to the next winner."
            ),
        },
        "different": (
            "Did anyone else get a message saying they won a phone in an anniversary giveaway? It asks for a "
            "handling fee and my address. I never entered any contest, so I assume it is a scam, but I wanted "
            "to warn the others here.",
            "Our club's anniversary giveaway is open until Sunday: post a photo of your best ride this year and "
            "the moderators pick three winners for a new helmet. No fees, no links, just reply in this thread.",
        ),
    },
}

# Posts too short for near-duplicates: only a member's exact repeat of one counts.
SHORT = ("Thanks!", "+1", "Great post", "Same here.", "lol", "Thank you so much")


def same_pairs(kinds=REQUIRED_SAME):
    """(base name, kind, base text, variant text) for every variant of the given kinds."""
    return [
        (name, kind, base["text"], base["variants"][kind])
        for name, base in BASES.items()
        for kind in kinds
        if kind in base["variants"]
    ]


def different_pairs():
    """(base name, base text, other text) for every post on the same topic that is not the base."""
    return [(name, base["text"], other) for name, base in BASES.items() for other in base["different"]]


def all_texts():
    """Every long text of the corpus once: bases, variants and the posts on the same topics."""
    texts = []
    for base in BASES.values():
        texts += [base["text"], *base["variants"].values(), *base["different"]]
    return texts


# -- what a spammer varies that a reader does not see -----------------------------------------

# Invisible characters a renderer does not show (Default_Ignorable_Code_Point), put inside words.
INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff\u00ad\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
# Latin letters and a Cyrillic lookalike of each.
_CYRILLIC = str.maketrans("aceopxyACEHKMOPTX", "асеорхуАСЕНКМОРТХ")


def _invisible(text, seed=0):
    chars = INVISIBLE[seed % len(INVISIBLE) :] + INVISIBLE[: seed % len(INVISIBLE)]
    words = text.split(" ")
    return " ".join(w[:1] + chars[i % len(chars)] + w[1:] if len(w) > 1 else w for i, w in enumerate(words))


def _fullwidth(text):
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _link_spellings(text):
    """The text with each link spelled another way a reader follows to the same place."""
    import re

    def respell(match):
        link = match.group()
        rest = link.split("://", 1)[1]
        host, _, path = rest.partition("/")
        return f"HTTP://WWW.{host.upper()}:80/{path}{'&' if '?' in path else '?'}utm_source=wave#join"

    return re.sub(r"https://[^\s]+?(?=[.,!?]?(?:\s|$))", respell, text)


# Name -> a function of a text: the disguised text, which must be the same post.
DISGUISES = {
    "invisible characters inside words": _invisible,
    "padding: 20,000 zero-width spaces before it": lambda t: "\u200b" * 20_000 + t,
    "padding: 25,000 spaces and dots before it": lambda t: " ." * 12_500 + t,
    "all letters Cyrillic lookalikes": lambda t: t.translate(_CYRILLIC),
    "one Cyrillic lookalike": lambda t: t.replace("e", "е", 1),
    "fullwidth letters": _fullwidth,
    "an accent on every vowel": lambda t: "".join(c + "\u0301" if c in "aeiou" else c for c in t),
    "strike-through marks (U+0336)": lambda t: "".join(c + "\u0336" if c.isalpha() else c for c in t),
    "HTML and Markdown emphasis": lambda t: "<p>" + t.replace(" ", " **", 1).replace(" ", "** ", 2) + "</p>",
    "the link spelled another way": _link_spellings,
}

# Short posts with a link, as a spammer's wave sends them, and the link's spellings.
LINK_POST = "Cheap pills at https://pharma.example/buy"
LINK_SPELLINGS = (
    "Cheap pills at http://pharma.example/buy",
    "Cheap pills at https://www.pharma.example/buy/",
    "Cheap pills at HTTPS://PHARMA.EXAMPLE/buy",
    "Cheap pills at https://pharma.example:443/buy#order",
    "Cheap pills at https://pharma.example/buy?utm_source=forum&fbclid=x1&gclid=9",
    "Cheap pills at https://pharma.example/%62%75%79",
    "[Cheap pills at](https://pharma.example/buy)",
    "Cheap pills at pharma.example/buy",
)
# Emoji-only posts: a repeat is the same post, another emoji is not.
EMOJI_ONLY = (("🎉🎉🎉", "🎉", "🎈"), ("👍👍", "👍", "👎"), (":)", ":)))", ":("), ("❤️❤️", "❤", "💔"))

# Phrases many members write to each other, in several languages: never a wave.
ORDINARY = (
    "Happy birthday! Wishing you all the best this year",
    "The quick brown fox jumps over the lazy dog",
    "Thanks for sharing, this was really helpful!",
    "Congratulations, well deserved!",
    "Welcome to the forum, glad to have you here",
    "谢谢大家的帮助，非常感谢！",
    "祝你生日快乐，愿你今年一切顺利",
    "Alles Gute zum Geburtstag und viel Glück im neuen Jahr!",
    "Joyeux anniversaire, je te souhaite le meilleur",
    "¡Feliz cumpleaños! Que tengas un día maravilloso",
    "С днём рождения! Всего самого лучшего!",
    "お誕生日おめでとうございます",
)
