"""A keyword index built from a column in bulk reads every text as the row-by-row path
does: the same words (ASCII split by Arrow, other texts by ``\\w+``), speakers, times
and questions, so it scores and describes every document the same."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest

from nbmemory.retrieval.keywords import KeywordIndex
from nbmemory.retrieval.keywords import columns as columns_module
from nbmemory.retrieval.keywords.features import micros

TEXTS = [
    "Caroline: I went to the LGBTQ support group yesterday!",
    "Melanie: That's great — how did it go?",
    "  Dr. Smith: the appointment is on 12/05/2023 at 9am",
    "the port is now 8443 (was 8080); config_file=/etc/app.toml",
    "Traceback (most recent call last):\n  File \"x.py\", line 3\nKeyError: 'host'",
    '{"tool": "deploy", "args": {"region": "eu-west-1", "replicas": 3}}',
    "Ça va? Je suis allé à São Paulo en 2019, naïve café",
    "\u00a0Alice: a no-break space before the name",
    "Größe: 5 — Straße über alles",
    "東京に行きました。 Tokyo trip last May",
    "what did we decide about the cache?   \n",
    "",
    None,
    "Note: nothing here places itself in time, nor asks anything",
    "since we last spoke I moved; three years now",
    "under_score words_with_digits 42abc abc42 x__y",
    "Why? Because. Really?\u2003",
    "mixed ÀSCII and ascii: Ünïcödé ünicode",
    "Tab\tseparated\x1cfile\x1dgroup separators?\x1f",
    "Last Fri we met; in the coming few weeks again",
    "build 19999 and 1999, ratio 10/12",
    "SINCE I LAST saw you",
    "a couple of months now",
    "we may meet; I know now",
    "v2.0.1 released 2026-12-05 at 20:00",
]
QUERIES = [
    "support group",
    "port 8443",
    "KeyError host",
    "region replicas",
    "São Paulo café",
    "straße größe",
    "tokyo 東京に行きました",
    "cache decide",
    "moved years",
    "42abc x__y",
    "ascii ünicode",
    "separated file group",
]


def same_groups(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays of codes group the same positions together."""
    pairs = set(zip(a.tolist(), b.tolist(), strict=True))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


def rows(texts):
    start = dt.datetime(2023, 5, 1, tzinfo=dt.timezone.utc)
    return [
        (f"e{i}", "ns" if i % 3 else "other", f"s{i % 4}", text, start + dt.timedelta(days=i), i)
        for i, text in enumerate(texts)
    ]


def bulk(data, as_arrow: bool) -> KeywordIndex:
    index = KeywordIndex()
    contents = [r[3] for r in data]
    index.rebuild_columns(
        [r[0] for r in data],
        pa.array([r[1] for r in data]),
        pa.array([r[2] for r in data]),
        pa.chunked_array([pa.array(contents, pa.string())]) if as_arrow else contents,
        np.array([micros(r[4]) for r in data], dtype=np.int64),
        np.array([r[5] for r in data], dtype=np.int64),
    )
    return index


def one_by_one(data) -> KeywordIndex:
    index = KeywordIndex()
    index.rebuild([])
    index.add(data)
    return index


@pytest.mark.parametrize("as_arrow", [True, False])
@pytest.mark.parametrize("slice_chars", [columns_module.SLICE_CHARS, 40])
def test_a_bulk_build_reads_every_text_as_one_by_one(monkeypatch, as_arrow, slice_chars):
    monkeypatch.setattr(columns_module, "SLICE_CHARS", slice_chars)
    data = rows(TEXTS * 3)
    built, added = bulk(data, as_arrow), one_by_one(data)
    ids = [r[0] for r in data]
    a, b = built.facts(ids), added.facts(ids)
    for name in ("lengths", "question", "timed", "said_from", "said_to"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert same_groups(a.sessions, b.sessions)  # the codes are numbered apart
    assert [built.speaker(i) for i in ids] == [added.speaker(i) for i in ids]
    for query in QUERIES:
        for namespace in ("ns", "other", None):
            assert built.scores(query, namespace) == pytest.approx(
                added.scores(query, namespace)
            ), (query, namespace)
    # what the texts say is read, not only matched
    assert built.speaker("e0") == "caroline" and built.speaker("e7") == "alice"
    assert built.mentions_time("e2") and built.mentions_time("e14")
    assert not built.mentions_time("e13")


def test_words_are_looked_up_once_per_distinct_word_of_a_slice():
    seen: list[str] = []

    def word_id(word: str) -> int:
        seen.append(word)
        return len(seen)

    texts = pa.array(["alpha beta alpha", "beta gamma", "ALPHA"] * 100)
    words = columns_module.column_words(texts, word_id)
    assert sorted(seen) == ["alpha", "beta", "gamma"]
    assert len(words.term_ids) == len(words.doc_of) == 600
    assert np.bincount(words.doc_of).tolist() == [3, 2, 1] * 100
