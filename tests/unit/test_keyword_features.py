"""The keyword index's features as units: the cheap pre-check before the time regex
answers as the regex alone, and the tokeniser stems each word as the rule says, from
its cache or not.  ``tests/test_hybrid.py`` checks what they do to a search."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nbmemory.retrieval.keywords import mentions_time, tokenize

_TIME_PIECES = [
    "May", "may", "MAY", "Sunday", "sunday", "yesterday", "Yesterday", "ago", "last",
    "week", "next", "month", "this", "weekend", "past", "few days", "2023", "1999",
    "12/05", "3/4/2024", "coming", "summer", "recently", "tonight", "Mayday", "agony",
    "١٩٩٩", "é", "_", "-", "'", ":", " ", "  ", "\n", "the", "cat", "x2020y",
    "Fri", "tues", "since", "we", "3", "years", "now", "Now", "a couple of", "months",
]  # fmt: skip


@given(st.lists(st.sampled_from(_TIME_PIECES), max_size=12).map("".join))
@settings(max_examples=400, deadline=None)
def test_the_time_pre_check_never_hides_a_match(text):
    """The cheap word/digit check before the time regex answers as the regex alone."""
    from nbmemory.retrieval.keywords.features import time_match

    assert mentions_time(text) == time_match(text)


def test_every_time_expression_the_regex_knows_passes_the_pre_check():
    from nbmemory.retrieval.keywords import features as ki

    periods = [
        "week",
        "month",
        "year",
        "night",
        "weekend",
        "summer",
        "winter",
        "spring",
        "fall",
        "autumn",
        "time",
    ]
    periods += ["few days", "few weeks", "few months"]
    phrases = [*ki._MONTHS.split("|"), *ki._DAYS.split("|")]
    phrases += ["yesterday", "today", "tonight", "tomorrow", "ago", "recently", "lately", "weekend"]
    phrases += [f"{w} {p}" for w in ["last", "next", "this", "past", "coming"] for p in periods]
    phrases += ["last Fri", "this Tues", "next thu", "since we last", "since last", "since I last"]
    phrases += ["3 years now", "a few months now", "two weeks now", "a couple of years now"]
    for phrase in phrases:
        for text in (phrase, f"we met {phrase}, I think", phrase.upper(), phrase.capitalize()):
            assert mentions_time(text) == ki.time_match(text), text
        assert mentions_time(f"we met {phrase}, I think"), phrase


@given(st.lists(st.sampled_from([*_TIME_PIECES, "painted", "paints", "the", "is"]), max_size=9))
@settings(max_examples=300, deadline=None)
def test_tokenize_stems_each_word_as_the_rule_says_cached_or_not(pieces):
    from py_rust_stemmers import SnowballStemmer

    from nbmemory.retrieval.keywords import tokens

    stemmer = SnowballStemmer("english")

    def by_the_rule(text: str) -> list[str]:
        words = tokens.WORD_RE.findall(text.lower())
        return [
            stemmer.stem_word(w) if w.isascii() else w for w in words if w not in tokens._STOPWORDS
        ]

    text = " ".join(pieces)
    assert tokenize(text) == by_the_rule(text)  # cache warm from earlier examples
    tokens._TERM_OF.clear()
    assert tokenize(text) == by_the_rule(text)


def test_question_share_is_how_much_of_a_text_asks():
    """The ``question_turn`` feature: the share of a text's words in sentences ending
    with "?".  A message that states a fact and then asks is mostly telling; a yes/no
    "ends with ?" scored it as a question (1.0), as if it held no answer."""
    from nbmemory.retrieval.keywords.features import question_share

    assert question_share("") == question_share(None) == 0.0
    assert question_share("Which port does the API use now?") == 1.0
    assert question_share("How was the trip? Did you see the lake?") == 1.0
    assert question_share("We moved the API to port 8443.") == 0.0
    stated_then_asked = "We moved the API to port 8443 last week. Can you update nginx?"
    assert question_share(stated_then_asked) == 4 / 13  # 9 words told, 4 asked
    answer = "The cause was a stale lock.\n\n```\nretry(lock)\n```\n\nShall I open the PR?"
    assert 0 < question_share(answer) < 0.5
    # a "?" inside a word or a URL ends no sentence
    assert question_share("See https://example.com/search?q=port for the port.") == 0.0
    assert question_share("  Really?  ") == 1.0
    # a Windows line break ends a question as a plain one does
    assert question_share("How was it?\r\nGreat trip.") == question_share(
        "How was it?\nGreat trip."
    )
    assert question_share("How was it?\r\nGreat trip.") == 3 / 5


@given(st.text(alphabet="ab ?.!\n", max_size=60))
@settings(max_examples=300, deadline=None)
def test_question_share_is_a_share(text):
    from nbmemory.retrieval.keywords.features import question_share

    share = question_share(text)
    assert 0.0 <= share <= 1.0
    assert (share > 0) <= ("?" in text)
