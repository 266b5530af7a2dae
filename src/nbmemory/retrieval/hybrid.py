"""Hybrid relevance: cosine similarity and BM25 keywords, fused by learned weights.

On LoCoMo it finds more of the evidence turns than cosine or BM25 alone: each
one's recall, measured by ``nbmemory eval locomo`` (and checked by
``tests/test_hybrid.py``), is in ``docs/retrieval.md``.  For one query:

1. candidates: the top ``candidates`` memories by cosine and the top ``candidates``
   by BM25 (both exact, from the in-memory indexes), plus the turn before and
   after each of them in its session; those under the cosine floor are dropped;
2. each candidate is described by :data:`nbmemory.retrieval.fusion.FEATURES`: its
   cosine (min-max over the searched memories) and BM25 (over the best), its
   neighbours', its session's best, whether a speaker the question names wrote it,
   whether it places something in time on a *when* question, whether it was
   written in (or says something happened in) the period the question names,
   the names of the question it holds, whether it is itself a question, its length
   (over the longest candidate's, so that long memories do not win by length alone);
3. its score is the weighted sum of those features (weights fitted on labelled
   questions, :mod:`nbmemory.retrieval.fusion`);
4. on a question that asks for several things ("What activities ...", "How
   many ..."), the best candidates are re-ordered so that each further pick from a
   session already picked costs ``diversity`` (their answers are spread over
   sessions);
5. the guard: when the fused top 10 shares nothing with the cosine top 10 nor
   with the BM25 top 10 (the weights rank by something neither input sees, as on
   a corpus unlike the ones they were fitted on), the candidates are ranked by the
   plain reciprocal-rank fusion of cosine and BM25 instead, and every hit names
   the signal ``fallback``.

Each hit says which signals found it (``vector``, ``keyword``, ``neighbour``,
``speaker``, ``mention``, ``time``, ``date``, and ``fallback`` when the guard fired);
search then shows a later change of what the question asks about above the older
hit it changes, which names ``correction`` (:mod:`nbmemory.retrieval.corrections`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import numpy as np

from ..config import PROFILES
from .dates import question_period
from .fusion import (
    AFTER_DAYS,
    DIVERSITY_POOL,
    FEATURES,
    GUARD_DEPTH,
    GUARD_OVERLAP,
    MAX_PERIOD_DAYS,
    RRF_K,
    asks_for_several,
    names_mentioned,
)
from .keywords import KeywordIndex, asks_when
from .vector_budget import Searcher

_COLUMN = {name: i for i, name in enumerate(FEATURES)}
#: Signals a hit names when one of their features counted in its score.
_SHOWN = (
    ("speaker", ("speaker", "speaker_fused")),
    ("mention", ("mention",)),
    ("time", ("time", "time_fused")),
    ("date", ("date_written", "date_said", "date_after")),
)
_EPOCH_DAY = dt.date(1970, 1, 1)


@dataclass
class HybridHit:
    id: str
    score: float
    similarity: float | None
    keyword_score: float
    signals: list[str] = field(default_factory=list)


@dataclass
class Candidates:
    """The candidates of one query and their features (one row per candidate)."""

    ids: list[str]
    features: np.ndarray
    similarity: list[float | None]
    keyword_score: np.ndarray
    sessions: np.ndarray
    seeds: set[str]
    vector_ids: set[str]
    several: bool


#: In ``get_context``, a memory whose BM25 is at least this share of the query's best
#: passes the cosine floor (:func:`find_candidates`'s ``keyword_pass``).
KEYWORD_PASS = 0.5
#: ... if its cosine is at least this share of the floor (or it has no vector yet).
KEYWORD_PASS_COSINE = 0.5


def keyword_pass(parameters: dict) -> float | None:
    """:data:`KEYWORD_PASS` under the hybrid profile's floor (0.2) or a lower one; a
    stricter threshold someone chose (``relevance_threshold=0.5``) is kept as chosen."""
    threshold = parameters.get("relevance_threshold")
    floor = PROFILES["hybrid"]["relevance_threshold"]
    return KEYWORD_PASS if threshold is None or threshold <= floor else None


def hybrid_rank(
    vectors: Searcher,
    keywords: KeywordIndex,
    query_text: str,
    query_vector: np.ndarray,
    *,
    namespace: str | None,
    limit: int,
    weights: np.ndarray,
    floor: float | None = None,
    strict: bool = False,
    candidates: int = 50,
    allowed: set[str] | None = None,
    diversity: float = 0.0,
    keyword_scale: float = 1.0,
    guard: bool = True,
    keyword_pass: float | None = None,
    now: dt.datetime | None = None,
) -> list[HybridHit]:
    """The ``limit`` best memories for a query by the fused score, best first.

    With ``guard`` (and the keyword signal on), a fused top that shares nothing
    with both inputs' tops falls back to their reciprocal-rank fusion
    (:func:`disagrees`); its hits then name the signal ``fallback``.  With
    ``keyword_pass``, a memory whose BM25 is at least that share of the query's
    best passes the cosine ``floor`` too (see :func:`find_candidates`).
    """
    if limit <= 0:
        return []
    found = find_candidates(
        vectors,
        keywords,
        query_text,
        query_vector,
        namespace=namespace,
        floor=floor,
        strict=strict,
        candidates=candidates,
        allowed=allowed,
        keyword_scale=keyword_scale,
        keyword_pass=keyword_pass,
        now=now,
    )
    if found is None:
        return []
    order, scores, fallback = fused_order(
        found.features,
        weights,
        guard=guard and keyword_scale > 0,
        diversity=diversity if found.several else 0.0,
        sessions=found.sessions,
        limit=limit,
    )
    hits = [_hit(found, i, float(scores[i]), weights) for i in order[:limit]]
    if fallback:
        for hit in hits:
            hit.signals.append("fallback")
    return hits


def fused_order(
    features: np.ndarray,
    weights: np.ndarray,
    *,
    guard: bool = True,
    diversity: float = 0.0,
    sessions: np.ndarray | None = None,
    limit: int = 10,
) -> tuple[list[int], np.ndarray, bool]:
    """(candidates best first, their scores, whether the guard fell back to RRF).

    Candidates come in id order (:func:`find_candidates`), so equal scores keep it.
    With ``diversity`` (a question asking for several things) and ``sessions``, the
    best are re-picked across sessions (:func:`spread`); the search and the fit's
    held-out ranking (:mod:`nbmemory.research.default_weights`) both order by this.
    """
    scores = features @ weights
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    if guard and disagrees(features, order):  # the plain fusion of the two rankings
        scores = rrf_scores(features)
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
        return order, scores, True
    if diversity > 0 and sessions is not None:
        order = spread(order, scores, sessions, diversity, limit)
    return order, scores, False


def disagrees(features: np.ndarray, order: list[int]) -> bool:
    """Whether the fused top :data:`GUARD_DEPTH` shares less than :data:`GUARD_OVERLAP`
    of its places with the cosine top and with the BM25 top alike: the learned
    weights then rank by something neither input sees (a corpus unlike the ones
    they were fitted on), and the plain fusion of the two inputs is safer."""
    depth = min(GUARD_DEPTH, len(order))
    if depth == 0:
        return False
    top = np.asarray(order[:depth])
    near = 1.0 / GUARD_DEPTH - 1e-12  # 1 / rank: in the top GUARD_DEPTH
    by_cosine = np.count_nonzero(features[top, _COLUMN["cosine_rank"]] >= near)
    by_keywords = np.count_nonzero(features[top, _COLUMN["keyword_rank"]] >= near)
    return bool(max(by_cosine, by_keywords) < GUARD_OVERLAP * depth)


def rrf_scores(features: np.ndarray) -> np.ndarray:
    """Reciprocal-rank fusion of the cosine and BM25 ranks (``1 / (RRF_K + rank)``
    summed over the two; a candidate outside a ranking gets nothing from it)."""
    scores = np.zeros(len(features))
    for column in ("cosine_rank", "keyword_rank"):
        inverse = features[:, _COLUMN[column]]
        held = inverse > 0
        scores[held] += 1.0 / (RRF_K + 1.0 / inverse[held])
    return scores


def find_candidates(
    vectors: Searcher,
    keywords: KeywordIndex,
    query_text: str,
    query_vector: np.ndarray,
    *,
    namespace: str | None,
    floor: float | None = None,
    strict: bool = False,
    candidates: int = 50,
    allowed: set[str] | None = None,
    keyword_scale: float = 1.0,
    keyword_pass: float | None = None,
    now: dt.datetime | None = None,
) -> Candidates | None:
    """The candidates of a query with their :data:`FEATURES` (None: there are none).

    ``keyword_scale`` is how much of BM25 the fused score of neighbours and
    sessions holds (0 when the keyword signal is off: then no feature reads it).
    ``keyword_pass``: a memory whose BM25 is at least this share of the query's best
    passes the cosine ``floor`` however low its cosine: a short query naming a rare
    term ("respx", "KRaft") gets a cosine near 0.17 from the one memory that names
    it, which the floor of ``get_context`` (0.2) dropped while ``search`` ranked it
    first.  So does, then, a memory written in (or saying something happened in) the
    period the question names: "what did we decide yesterday?" is near no decision
    by cosine, and ``search`` ranked yesterday's first by its date.
    """
    score_range = [0.0, 0.0]
    vector_hits = vectors.search(
        query_vector, candidates, namespace=namespace, allowed=allowed, score_range=score_range
    )
    keyword_scores = keywords.score_array(query_text, namespace, allowed=allowed, top=candidates)
    keyword_hits = keyword_scores.top(candidates)
    vector_ids = {event_id for event_id, _ in vector_hits}
    seeds = vector_ids | {event_id for event_id, _ in keyword_hits}
    if not seeds:
        return None
    pool, links = _with_neighbours(seeds, keywords)
    needed = sorted(pool | {n for pair in links.values() for n in pair if n is not None})
    if allowed is not None:
        pool &= allowed
    keyword_scores.prefetch(needed)  # the common terms' share, for all of them at once
    cosine = vectors.similarities(query_vector, needed)
    passing: set[str] = set()
    if keyword_pass is not None and keyword_hits and keyword_hits[0][1] > 0:
        bar = keyword_pass * keyword_hits[0][1]
        near = -1.0 if floor is None else floor * KEYWORD_PASS_COSINE
        passing = {
            event_id
            for event_id, score in keyword_hits
            if score >= bar and (cosine.get(event_id) is None or cosine[event_id] >= near)
        }
    at = {event_id: k for k, event_id in enumerate(needed)}
    facts = keywords.facts(needed)
    if keyword_pass is not None:  # in the period the question names
        written, said, _ = _dates(query_text, _subset(facts, np.arange(len(needed))), now)
        passing |= {needed[k] for k in np.flatnonzero((written > 0) | (said > 0))}
    ids = [i for i in sorted(pool) if i in passing or _passes(cosine.get(i), floor, strict)]
    if not ids:
        return None

    # every needed memory's cosine part, keyword part and fused score
    low, high = score_range
    spread = high - low if high > low else 0.0
    raw = np.array([cosine.get(i, np.nan) for i in needed], dtype=np.float64)
    # no spread (one memory, say): the similarity itself, clipped to 0..1
    cos_part = np.maximum(0.0, (raw - low) / spread) if spread else np.clip(raw, 0.0, 1.0)
    cos_part = np.nan_to_num(cos_part, nan=0.0)  # not embedded yet: no cosine part
    bm25 = np.array([keyword_scores.get(i, 0.0) for i in needed], dtype=np.float64)
    key_part = bm25 / (keyword_scores.max or 1.0)
    fused = 0.5 * cos_part + 0.5 * keyword_scale * key_part

    rows = np.array([at[i] for i in ids], dtype=np.int64)
    before = np.array([_index(at, links[i][0]) for i in ids], dtype=np.int64)
    after = np.array([_index(at, links[i][1]) for i in ids], dtype=np.int64)

    def neighbour(values: np.ndarray) -> np.ndarray:
        padded = np.append(values, 0.0)  # index -1: no neighbour
        return np.maximum(padded[before], padded[after])

    sessions = facts.sessions
    best_in_session = np.zeros(int(sessions.max(initial=-1)) + 2)
    np.maximum.at(best_in_session, sessions + 1, fused)  # session -1 (unknown) at 0
    mine = _subset(facts, rows)

    named = keywords.speakers_named(query_text, namespace)
    speaker = (
        np.isin(mine["speakers"], keywords.speaker_codes(named)).astype(np.float64)
        if named
        else np.zeros(len(ids))
    )
    own = fused[rows]
    timed = mine["timed"].astype(np.float64) * float(asks_when(query_text))
    written, said, later = _dates(query_text, mine, now)
    x = np.zeros((len(ids), len(FEATURES)), dtype=np.float64)
    columns = {
        "cosine": cos_part[rows],
        "cosine_rank": _reciprocal_ranks(vector_hits, ids),
        "keywords": key_part[rows],
        "keyword_rank": _reciprocal_ranks(keyword_hits, ids),
        "agreement": cos_part[rows] * key_part[rows],
        "neighbour": neighbour(fused),
        "neighbour_cosine": neighbour(cos_part),
        "neighbour_keywords": neighbour(key_part),
        "speaker": speaker,
        "speaker_fused": speaker * own,
        "other_speaker": (1.0 - speaker) * float(bool(named)),
        "mention": keywords.mention_share(names_mentioned(query_text, named), ids),
        "time": timed,
        "time_fused": timed * own,
        "date_written": written,
        "date_said": said,
        "date_after": later,
        "session": best_in_session[mine["sessions"] + 1],
        "question_turn": mine["question"].astype(np.float64),
        "length": _of_longest(np.log1p(mine["lengths"].astype(np.float64))),
    }
    for name, values in columns.items():
        x[:, _COLUMN[name]] = values
    return Candidates(
        ids=ids,
        features=x,
        similarity=[cosine.get(i) for i in ids],
        keyword_score=bm25[rows],
        sessions=mine["sessions"],
        seeds=seeds,
        vector_ids=vector_ids,
        several=asks_for_several(query_text),
    )


def _of_longest(values: np.ndarray) -> np.ndarray:
    """``values`` over the largest among this query's candidates, in [0, 1]: a feature
    that means the same on a corpus of short turns and one of 3k-character messages,
    where a raw length outweighed every other signal.  A ratio, not min-max: two
    short turns a word apart stay close (min-max would set them 0 and 1)."""
    if not len(values):
        return values
    high = float(values.max())
    return values / high if high > 0 else np.zeros_like(values)


def _index(at: dict[str, int], event_id: str | None) -> int:
    return -1 if event_id is None else at.get(event_id, -1)


def _subset(facts: object, rows: np.ndarray) -> dict[str, np.ndarray]:
    return {
        name: getattr(facts, name)[rows]
        for name in (
            "lengths",
            "question",
            "timed",
            "speakers",
            "sessions",
            "created_days",
            "said_from",
            "said_to",
        )
    }


def _reciprocal_ranks(hits: list[tuple[str, float]], ids: list[str]) -> np.ndarray:
    """1 / rank among ``hits`` (best first); equal scores share the better rank."""
    rank: dict[str, float] = {}
    for r, (event_id, score) in enumerate(hits):
        tied = r > 0 and score == hits[r - 1][1]
        rank[event_id] = rank[hits[r - 1][0]] if tied else 1.0 / (r + 1)
    return np.array([rank.get(i, 0.0) for i in ids], dtype=np.float64)


def _dates(
    question: str, mine: dict[str, np.ndarray], now: dt.datetime | None = None
) -> tuple[np.ndarray, ...]:
    """date_written, date_said and date_after of each candidate for the period the
    question names (all 0 when it names none, or one wider than two months); a
    relative one ("yesterday", "last week") is read against ``now``, the store's time
    when it is asked (naive UTC; None: the wall clock)."""
    size = len(mine["created_days"])
    zero = np.zeros(size)
    if now is None:
        now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    period = question_period(question, now)
    if period is None:
        return zero, zero, zero
    days = mine["created_days"]
    dated = days >= 0
    if period.any_year:  # "in June": that month of any year
        months = (days.astype("datetime64[D]").astype("datetime64[M]").astype(np.int64) % 12) + 1
        return (dated & (months == period.start.month)).astype(np.float64), zero, zero
    if (period.end - period.start).days > MAX_PERIOD_DAYS:
        return zero, zero, zero
    start = (period.start - _EPOCH_DAY).days
    end = (period.end - _EPOCH_DAY).days
    written = dated & (days >= start) & (days < end)
    said = (mine["said_from"] < end) & (mine["said_to"] > start)
    later = dated & (days >= end) & (days < end + AFTER_DAYS)
    return written.astype(np.float64), said.astype(np.float64), later.astype(np.float64)


def spread(
    order: list[int], scores: np.ndarray, sessions: np.ndarray, cost: float, limit: int
) -> list[int]:
    """``order`` with its best :data:`DIVERSITY_POOL` re-picked greedily: each pick
    from a session already picked costs ``cost`` per earlier pick."""
    head, tail = order[:DIVERSITY_POOL], order[DIVERSITY_POOL:]
    picked: list[int] = []
    taken: dict[int, int] = {}
    while head and len(picked) < limit:
        best = max(head, key=lambda i: scores[i] - cost * taken.get(int(sessions[i]), 0))
        head.remove(best)
        picked.append(best)
        session = int(sessions[best])
        taken[session] = taken.get(session, 0) + 1
    return picked + head + tail


def _hit(found: Candidates, i: int, score: float, weights: np.ndarray) -> HybridHit:
    event_id = found.ids[i]
    row = found.features[i]
    signals = []
    if event_id in found.vector_ids:
        signals.append("vector")
    if found.keyword_score[i] > 0:
        signals.append("keyword")
    own = sum(weights[_COLUMN[n]] * row[_COLUMN[n]] for n in ("cosine", "keywords"))
    beside = sum(
        weights[_COLUMN[n]] * row[_COLUMN[n]]
        for n in ("neighbour", "neighbour_cosine", "neighbour_keywords")
    )
    if event_id not in found.seeds or beside > own:
        signals.append("neighbour")
    for signal, columns in _SHOWN:
        if any(row[_COLUMN[c]] > 0 and weights[_COLUMN[c]] != 0 for c in columns):
            signals.append(signal)
    return HybridHit(event_id, score, found.similarity[i], float(found.keyword_score[i]), signals)


def _with_neighbours(
    seeds: set[str], keywords: KeywordIndex
) -> tuple[set[str], dict[str, tuple[str | None, str | None]]]:
    """The seeds plus their neighbouring turns, and every one's neighbours."""
    links = {event_id: keywords.neighbours(event_id) for event_id in seeds}
    pool = set(seeds)
    for pair in list(links.values()):
        pool.update(n for n in pair if n is not None)
    for event_id in pool - seeds:
        links[event_id] = keywords.neighbours(event_id)
    return pool, links


def _passes(similarity: float | None, floor: float | None, strict: bool) -> bool:
    """Whether a cosine similarity clears the floor (an event not embedded yet does:
    keywords alone may find it)."""
    if floor is None or similarity is None:
        return True
    return similarity > floor or (similarity == floor and not strict)
