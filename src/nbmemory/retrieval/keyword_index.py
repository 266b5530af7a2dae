"""BM25 keyword search over memory content, kept in step with the ``events`` table.

Why our own index: DuckDB's ``fts`` extension builds a static index that must be
rebuilt by hand after every change (and is not installable offline for DuckDB
2.0), and the Python libraries (``bm25s``, ``rank-bm25``) index a fixed corpus
too.  Memory changes on every ``add_event``, so this is a small incremental
inverted index: postings per term, BM25 statistics per namespace (one
namespace's documents never change another's scores), documents added and
removed one by one.  Like :mod:`nbmemory.retrieval.vector_index` it is a cache
kept in step by the store's change announcements; when a change cannot be
applied it is marked stale, and the next search rebuilds it from the table.

It also knows each document's place in its session (by ``created_at``, then
insertion order), which gives the "neighbouring turns" signal of hybrid search.
"""

from __future__ import annotations

import bisect
import math
import re
import threading
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .vector_index import positions_mask

K1 = 1.2
B = 0.75

_WORD_RE = re.compile(r"\w+", re.UNICODE)
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


#: "Name: text" or "First Last: text" at the start of a turn: a transcript's speaker.
_SPEAKER_RE = re.compile(r"^\s*([A-Z][\w'’.-]*(?: [A-Z][\w'’.-]*){0,2}):\s")


def speaker_of(content: str | None) -> str | None:
    """The speaker a turn is written by when it reads "Name: text" (lower-cased),
    as transcripts and LoCoMo's turns do; None otherwise."""
    match = _SPEAKER_RE.match(content or "")
    return match.group(1).lower() if match else None


_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_DAYS = "Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday"
#: Words that place a turn in time: relative days and periods, weekdays, month
#: names (capitalised, so "may" the verb is not one), years and dates.
_TIME_RE = re.compile(
    rf"\b(?:{_MONTHS}|{_DAYS})\b"
    r"|(?i:\b(?:yesterday|today|tonight|tomorrow|ago|recently|lately|weekend"
    r"|(?:last|next|this|past|coming) (?:week|month|year|night|weekend|summer|winter"
    r"|spring|fall|autumn|time|few (?:days|weeks|months)))\b)"
    r"|\b(?:19|20)\d{2}\b|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b"
)
#: A question that asks when something happened.
_WHEN_RE = re.compile(
    r"(?i)\bwhen\b|\bwhat (?:year|month|day|date|time|week)\b|\bhow long ago\b"
    r"|\bwhich (?:year|month|day|week)\b"
)


#: Every match of ``_TIME_RE`` holds one of these words (lower-cased) or a digit:
#: a text with neither is not searched (the regex costs ~15 µs a text, most have none).
_TIME_WORDS = frozenset(
    w.lower()
    for w in (
        _MONTHS.split("|")
        + _DAYS.split("|")
        + ["yesterday", "today", "tonight", "tomorrow", "ago", "recently", "lately", "weekend"]
        + ["last", "next", "this", "past", "coming"]
    )
)
_DIGIT_RE = re.compile(r"\d")


def mentions_time(content: str | None) -> bool:
    """Whether a turn places something in time ("yesterday", "last May", "2023")."""
    text = content or ""
    return _mentions_time(text, _WORD_RE.findall(text.lower()))


def _mentions_time(text: str, words: list[str]) -> bool:
    """:func:`mentions_time` of ``text`` whose lower-cased words are ``words``."""
    if _DIGIT_RE.search(text) is None and _TIME_WORDS.isdisjoint(words):
        return False
    return bool(_TIME_RE.search(text))


def asks_when(query: str) -> bool:
    """Whether a question asks when ("When did ...", "What year ...")."""
    return bool(_WHEN_RE.search(query))


def tokenize(text: str) -> list[str]:
    """Lower-cased words without English stop words, with a light suffix stemmer.

    One of -ing, -ed, -es, -s is stripped from ASCII words longer than four
    letters ("painted", "painting" and "paints" become "paint"); other words are
    kept as they are.  Measured on LoCoMo, this beats no stemming, and a
    heavier stemmer is a dependency for little gain.
    """
    return _terms(_WORD_RE.findall(text.lower()))


#: word -> its term ("" for a stop word); words repeat, stemming them once is enough.
_TERM_OF: dict[str, str] = {}
_TERM_CACHE_SIZE = 500_000


def _terms(words: list[str]) -> list[str]:
    """The terms of lower-cased ``words`` (see :func:`tokenize`)."""
    out = []
    term_of = _TERM_OF
    for word in words:
        term = term_of.get(word)
        if term is None:
            term = _term(word)
            if len(term_of) >= _TERM_CACHE_SIZE:
                term_of.clear()
            term_of[word] = term
        if term:
            out.append(term)
    return out


def _term(word: str) -> str:
    if word in _STOPWORDS:
        return ""
    if word.isascii() and len(word) > 4:
        for suffix in ("ing", "ed", "es", "s"):
            if word.endswith(suffix):
                return word[: -len(suffix)]
    return word


class KeywordIndex:
    """BM25 over the content of events, per namespace, with session neighbours."""

    def __init__(self) -> None:
        #: True until built, and whenever the table changed in a way not applied here.
        self.stale = True
        self.rebuilds = 0
        self._lock = threading.RLock()
        self._reset()

    def _reset(self) -> None:
        self._ids: list[str | None] = []
        self._pos: dict[str, int] = {}
        self._size = 0
        self._ns_codes = np.zeros(1024, dtype=np.int32)
        self._lengths = np.zeros(1024, dtype=np.float32)
        self._alive = np.zeros(1024, dtype=bool)
        self._timed = np.zeros(1024, dtype=bool)
        self._terms: list[tuple[tuple[str, int], ...]] = []
        self._sessions: list[tuple[int, str]] = []
        self._order: list[tuple[Any, int]] = []
        self._ns: dict[str, int] = {}
        self._postings: dict[str, tuple[array, array]] = {}
        self._df: Counter[tuple[int, str]] = Counter()
        self._docs: Counter[int] = Counter()
        self._total_len: Counter[int] = Counter()
        self._session_docs: dict[tuple[int, str], list[tuple[Any, int, int]]] = {}
        self._speakers: list[str | None] = []
        #: (namespace code, speaker) -> live documents by that speaker
        self._speaker_docs: Counter[tuple[int, str]] = Counter()

    def __len__(self) -> int:
        return len(self._pos)

    # -- keeping in step ---------------------------------------------------------------
    def rebuild(self, rows: Iterable[Sequence[Any]]) -> None:
        """Replace the content: rows of (id, namespace, session_id, content, created_at, seq)."""
        with self._lock:
            self._reset()
            self.add(rows)
            self.stale = False
            self.rebuilds += 1

    def add(self, rows: Iterable[Sequence[Any]]) -> None:
        """Index rows of (id, namespace, session_id, content, created_at, seq)."""
        for event_id, namespace, session_id, content, created_at, seq in rows:
            text = content or ""
            words = _WORD_RE.findall(text.lower())
            self._add_doc(
                event_id,
                namespace,
                session_id,
                tuple(Counter(_terms(words)).items()),
                created_at,
                seq,
                speaker_of(content),
                _mentions_time(text, words),
            )

    def _add_doc(
        self,
        event_id: str,
        namespace: str,
        session_id: str,
        terms: tuple[tuple[str, int], ...],
        created_at: Any,
        seq: Any,
        speaker: str | None = None,
        timed: bool = False,
    ) -> None:
        if event_id in self._pos:
            self.remove([event_id])
        pos = self._size
        if pos == len(self._alive):
            self._grow()
        code = self._ns.setdefault(namespace, len(self._ns))
        length = sum(tf for _, tf in terms)
        self._ids.append(event_id)
        self._pos[event_id] = pos
        self._ns_codes[pos] = code
        self._lengths[pos] = float(length)
        self._alive[pos] = True
        self._timed[pos] = timed
        self._size += 1
        self._terms.append(terms)
        self._speakers.append(speaker)
        if speaker is not None:
            self._speaker_docs[(code, speaker)] += 1
        key = (code, session_id)
        order = (created_at, seq if seq is not None else pos)
        self._sessions.append(key)
        self._order.append(order)
        bisect.insort(self._session_docs.setdefault(key, []), (order[0], order[1], pos))
        self._docs[code] += 1
        self._total_len[code] += length
        for term, tf in terms:
            postings = self._postings.get(term)
            if postings is None:
                postings = self._postings[term] = (array("i"), array("f"))
            postings[0].append(pos)
            postings[1].append(float(tf))
            self._df[(code, term)] += 1

    def compact(self) -> None:
        """Re-index the live documents only (from their stored terms, no re-tokenising)."""
        names = {code: name for name, code in self._ns.items()}
        live = [
            (
                str(self._ids[pos]),
                names[int(self._ns_codes[pos])],
                self._sessions[pos][1],
                self._terms[pos],
                *self._order[pos],
                self._speakers[pos],
                bool(self._timed[pos]),
            )
            for pos in sorted(self._pos.values())
        ]
        self._reset()
        for doc in live:
            self._add_doc(*doc)

    def _grow(self) -> None:
        capacity = len(self._alive) * 2
        for name in ("_ns_codes", "_lengths", "_alive", "_timed"):
            old = getattr(self, name)
            new = np.zeros(capacity, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def remove(self, ids: Iterable[str]) -> None:
        """Forget documents; their postings stay, masked as dead, until half the
        documents are dead and the index compacts itself."""
        for event_id in ids:
            pos = self._pos.pop(event_id, None)
            if pos is None:
                continue
            self._alive[pos] = False
            code = int(self._ns_codes[pos])
            self._docs[code] -= 1
            self._total_len[code] -= int(self._lengths[pos])
            for term, _ in self._terms[pos]:
                self._df[(code, term)] -= 1
            speaker = self._speakers[pos]
            if speaker is not None:
                self._speaker_docs[(code, speaker)] -= 1
            key = self._sessions[pos]
            order = self._order[pos]
            docs = self._session_docs.get(key)
            if docs is not None:
                at = bisect.bisect_left(docs, (order[0], order[1], pos))
                if at < len(docs) and docs[at][2] == pos:
                    del docs[at]
            self._ids[pos] = None
            self._terms[pos] = ()
        dead = self._size - len(self._pos)
        if dead > 1024 and dead * 2 > self._size:
            self.compact()

    # -- querying ----------------------------------------------------------------------
    def score_array(
        self, query: str, namespace: str | None, *, allowed: set[str] | None = None
    ) -> KeywordScores:
        """BM25 scores of every document for ``query`` (zero where no term matches)."""
        with self._lock:
            n = self._size
            total = np.zeros(n, dtype=np.float64)
            terms = set(tokenize(query))
            wanted = None if namespace is None else self._ns.get(namespace)
            if not terms or n == 0 or (namespace is not None and wanted is None):
                return KeywordScores(self, total)
            codes = self._ns_codes[:n]
            alive = self._alive[:n]
            lengths = self._lengths[:n]
            for term in terms:
                postings = self._postings.get(term)
                if postings is None:
                    continue
                positions = np.frombuffer(postings[0], dtype=np.int32)
                tfs = np.frombuffer(postings[1], dtype=np.float32)
                keep = alive[positions]
                if wanted is not None:
                    keep &= codes[positions] == wanted
                positions, tfs = positions[keep], tfs[keep]
                if positions.size == 0:
                    continue
                doc_codes = codes[positions]
                for code in (wanted,) if wanted is not None else np.unique(doc_codes):
                    code = int(code)
                    docs = self._docs[code]
                    df = self._df[(code, term)]
                    if docs <= 0 or df <= 0:
                        continue
                    idf = math.log(1.0 + (docs - df + 0.5) / (df + 0.5))
                    avg = max(self._total_len[code] / docs, 1e-9)
                    if wanted is None:
                        mask = doc_codes == code
                        p, tf = positions[mask], tfs[mask]
                    else:
                        p, tf = positions, tfs
                    norm = tf + K1 * (1.0 - B + B * lengths[p] / avg)
                    # each term occurs once per document's postings: plain indexing adds
                    total[p] += idf * tf * (K1 + 1.0) / norm
            if allowed is not None:
                total[~positions_mask(self._pos, allowed, n)] = 0.0
            return KeywordScores(self, total)

    def scores(
        self, query: str, namespace: str | None, *, allowed: set[str] | None = None
    ) -> dict[str, float]:
        """BM25 score of every document of ``namespace`` sharing a term with ``query``."""
        result = self.score_array(query, namespace, allowed=allowed)
        return dict(result.top(None))

    def speakers_named(self, query: str, namespace: str | None) -> set[str]:
        """The speakers of ``namespace`` whose every name word is a word of ``query``
        ("What did Caroline research?" names "caroline")."""
        words = set(_WORD_RE.findall(query.lower()))
        with self._lock:
            wanted = None if namespace is None else self._ns.get(namespace)
            return {
                speaker
                for (code, speaker), count in self._speaker_docs.items()
                if count > 0
                and (wanted is None or code == wanted)
                and set(_WORD_RE.findall(speaker)) <= words
            }

    def mentions_time(self, event_id: str | None) -> bool:
        """Whether the document places something in time (see :func:`mentions_time`)."""
        pos = self._pos.get(event_id) if event_id is not None else None
        return False if pos is None else bool(self._timed[pos])

    def speaker(self, event_id: str | None) -> str | None:
        """Who wrote the document ("Name: text"), if it says."""
        pos = self._pos.get(event_id) if event_id is not None else None
        return None if pos is None else self._speakers[pos]

    def neighbours(self, event_id: str) -> tuple[str | None, str | None]:
        """The previous and next document of the same session (by time), if any."""
        with self._lock:
            pos = self._pos.get(event_id)
            if pos is None:
                return None, None
            docs = self._session_docs.get(self._sessions[pos], [])
            order = self._order[pos]
            at = bisect.bisect_left(docs, (order[0], order[1], pos))
            before = self._ids[docs[at - 1][2]] if at > 0 else None
            after = self._ids[docs[at + 1][2]] if at + 1 < len(docs) else None
            return before, after


class KeywordScores:
    """BM25 scores of one query over every document of a :class:`KeywordIndex`."""

    def __init__(self, index: KeywordIndex, scores: np.ndarray) -> None:
        self._index = index
        self._scores = scores

    @property
    def max(self) -> float:
        return float(self._scores.max()) if self._scores.size else 0.0

    def get(self, event_id: str | None, default: float = 0.0) -> float:
        pos = self._index._pos.get(event_id) if event_id is not None else None
        if pos is None or pos >= self._scores.size:
            return default
        return float(self._scores[pos])

    def top(self, limit: int | None) -> list[tuple[str, float]]:
        """The ``limit`` best (id, score) with a score above zero (all when None), best first."""
        hits = np.flatnonzero(self._scores > 0)  # in index order
        if limit is not None and hits.size > limit:
            # equal scores are common (BM25 of short texts): the earliest documents
            # win a tie at the cut, whatever numpy's selection algorithm does
            scores = self._scores[hits]
            kth = -np.partition(-scores, limit - 1)[limit - 1]
            above = hits[scores > kth]
            hits = np.sort(np.concatenate([above, hits[scores == kth][: limit - above.size]]))
        ids = self._index._ids
        ranked = sorted(((ids[i], float(self._scores[i])) for i in hits), key=lambda h: -h[1])
        return [(event_id, score) for event_id, score in ranked if event_id is not None]
