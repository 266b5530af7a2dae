"""The keyword index's tokeniser: a text's words, without stop words, stemmed.

A text is split into its words (lower-cased), English stop words are dropped
and the rest stemmed with Snowball (English) from ``py_rust_stemmers``, which is
fastembed's own dependency.  What it finds on LoCoMo against tantivy's analysers
is measured by ``benchmarks/bench_keyword_engines.py`` (``docs/performance.md``,
"Keyword engines: tantivy", also says what the stemmer gained over the light
suffix stripper it replaced); the keyword search mode's recall is in
``docs/retrieval.md``.
"""

from __future__ import annotations

import re

from py_rust_stemmers import SnowballStemmer

#: A word: what the index, the query and the speaker-name match split a text into.
WORD_RE = re.compile(r"\w+", re.UNICODE)
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "with",
        "by",
        "from",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "i",
        "you",
        "he",
        "she",
        "it",
        "we",
        "they",
        "me",
        "him",
        "her",
        "us",
        "them",
        "my",
        "your",
        "his",
        "its",
        "our",
        "their",
        "this",
        "that",
        "these",
        "those",
        "what",
        "which",
        "who",
        "whom",
        "when",
        "where",
        "why",
        "how",
        "do",
        "does",
        "did",
        "done",
        "have",
        "has",
        "had",
        "having",
        "not",
        "no",
        "so",
        "as",
        "about",
        "into",
        "than",
        "then",
        "there",
        "here",
        "can",
        "could",
        "would",
        "should",
        "will",
        "just",
        "also",
        "very",
        "too",
        "up",
        "out",
        "over",
        "s",
        "t",
    ]
)


def tokenize(text: str) -> list[str]:
    """Lower-cased words without English stop words, stemmed with Snowball (English).

    "painted", "painting" and "paints" become "paint", "activities" and "active"
    "activ".  Words with non-ASCII letters are kept as they are.
    """
    return word_terms(WORD_RE.findall(text.lower()))


#: word -> its term ("" for a stop word); words repeat, stemming them once is enough.
_TERM_OF: dict[str, str] = {}
_TERM_CACHE_SIZE = 500_000


def word_terms(words: list[str]) -> list[str]:
    """The terms of lower-cased ``words`` (see :func:`tokenize`)."""
    out = []
    term_of = _TERM_OF
    for word in words:
        term = term_of.get(word)
        if term is None:
            term = word_term(word)
            if len(term_of) >= _TERM_CACHE_SIZE:
                term_of.clear()
            term_of[word] = term
        if term:
            out.append(term)
    return out


_STEMMER = SnowballStemmer("english")


def word_term(word: str) -> str:
    """The term of one lower-cased word: its stem, itself if not ASCII, "" for a stop word."""
    if word in _STOPWORDS:
        return ""
    return str(_STEMMER.stem_word(word)) if word.isascii() else word
