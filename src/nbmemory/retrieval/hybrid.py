"""Hybrid relevance: cosine similarity fused with BM25 keywords and neighbouring turns.

Measured on the five LoCoMo conversations (760 questions, all-MiniLM-L6-v2),
recall@10 of the evidence turns: cosine 0.51, BM25 0.60, this fusion 0.75
(docs/retrieval.md).  For one query:

1. candidates: the top ``candidates`` memories by cosine and the top ``candidates``
   by BM25 (both exact, from the in-memory indexes), plus the turn before and
   after each of them in its session;
2. ``fused = (1 - w) * cos_norm + w * bm25_norm`` where cosine is min-max
   normalised over the searched memories (the similarity itself, clipped to 0..1,
   when they are all equal: a single memory) and BM25 divided by its maximum;
3. ``score = fused + neighbour_weight * max(fused(previous), fused(next))``: a turn
   next to a strong hit is likely part of the same exchange (answers often span
   a question and its reply);
4. a turn written as "Name: text" by a speaker the query names ("What did
   Caroline research?") scores ``x (1 + speaker_weight)``: people ask about what
   someone said or did, and that person's own turns hold it;
5. on a question that asks *when*, a turn that places something in time
   ("yesterday", "last May", a weekday, a year) scores ``x (1 + time_weight)``;
6. memories whose cosine similarity does not pass the floor are dropped.

Each hit says which signals found it (``vector``, ``keyword``, ``neighbour``,
``speaker``, ``time``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .keyword_index import KeywordIndex, KeywordScores, asks_when
from .vector_index import VectorIndex


@dataclass
class HybridHit:
    id: str
    score: float
    similarity: float | None
    keyword_score: float
    signals: list[str] = field(default_factory=list)


def hybrid_rank(
    vectors: VectorIndex,
    keywords: KeywordIndex,
    query_text: str,
    query_vector: np.ndarray,
    *,
    namespace: str | None,
    limit: int,
    floor: float | None = None,
    strict: bool = False,
    keyword_weight: float = 0.5,
    neighbor_weight: float = 0.5,
    candidates: int = 50,
    allowed: set[str] | None = None,
    speaker_weight: float = 0.0,
    time_weight: float = 0.0,
) -> list[HybridHit]:
    """The ``limit`` best memories for a query by the fused score, best first."""
    if limit <= 0:
        return []
    score_range = [0.0, 0.0]
    vector_hits = vectors.search(
        query_vector, candidates, namespace=namespace, allowed=allowed, score_range=score_range
    )
    keyword_scores = keywords.score_array(query_text, namespace, allowed=allowed, top=candidates)
    vector_ids = {event_id for event_id, _ in vector_hits}
    seeds = vector_ids | {event_id for event_id, _ in keyword_scores.top(candidates)}
    if not seeds:
        return []
    pool, links = _with_neighbours(seeds, keywords)
    needed = pool | {n for pair in links.values() for n in pair if n is not None}
    if allowed is not None:
        pool &= allowed
    keyword_scores.prefetch(needed)  # the common terms' share, for all of them at once
    fusion = _Fusion(
        vectors.similarities(query_vector, needed), keyword_scores, score_range, keyword_weight
    )
    named = keywords.speakers_named(query_text, namespace) if speaker_weight else set()
    when = bool(time_weight) and asks_when(query_text)
    fused = {event_id: fusion(event_id) for event_id in needed}  # each id once
    ranked = []
    for event_id in pool:
        similarity = fusion.cosine.get(event_id)
        if not _passes(similarity, floor, strict):
            continue
        before, after = links.get(event_id, (None, None))
        own = fused[event_id]
        neighbour = max(fused.get(before, 0.0), fused.get(after, 0.0))  # type: ignore[arg-type]
        score = own + neighbor_weight * neighbour
        spoken = bool(named) and keywords.speaker(event_id) in named
        if spoken:
            score *= 1.0 + speaker_weight
        timed = when and keywords.mentions_time(event_id)
        if timed:
            score *= 1.0 + time_weight
        ranked.append((score, event_id, similarity, own, neighbour, spoken, timed))
    ranked.sort(key=lambda h: (-h[0], h[1]))
    hits = []
    for score, event_id, similarity, own, neighbour, spoken, timed in ranked[:limit]:
        keyword_score = keyword_scores.get(event_id, 0.0)
        signals = []
        if event_id in vector_ids:
            signals.append("vector")
        if keyword_score > 0:
            signals.append("keyword")
        if event_id not in seeds or neighbor_weight * neighbour > own:
            signals.append("neighbour")
        if spoken:
            signals.append("speaker")
        if timed:
            signals.append("time")
        hits.append(HybridHit(event_id, score, similarity, keyword_score, signals))
    return hits


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


class _Fusion:
    """``(1 - w) * cosine (min-max over the searched memories) + w * BM25 / max BM25``.

    When every searched similarity is the same (one memory, say), min-max has no
    spread: the cosine part is then the similarity itself, clipped to 0..1.
    """

    def __init__(
        self,
        cosine: dict[str, float],
        keywords: KeywordScores,
        score_range: list[float],
        keyword_weight: float,
    ) -> None:
        self.cosine = cosine
        self.keywords = keywords
        self.low, high = score_range
        self.spread = high - self.low if high > self.low else 0.0
        self.top_keyword = keywords.max or 1.0
        self.weight = keyword_weight

    def __call__(self, event_id: str | None) -> float:
        if event_id is None:
            return 0.0
        cos = self.cosine.get(event_id)
        if cos is None:
            cos_part = 0.0
        elif self.spread:
            cos_part = max(0.0, (cos - self.low) / self.spread)
        else:
            cos_part = min(1.0, max(0.0, cos))
        keyword_part = self.keywords.get(event_id, 0.0) / self.top_keyword
        return (1.0 - self.weight) * cos_part + self.weight * keyword_part
