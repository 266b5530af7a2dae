"""BM25 scores of one query, with the common terms added only where they matter.

A query's terms each add ``idf * tf * (K1 + 1) / (tf + norm)`` to the documents
holding them (:class:`TermPart`).  Terms held by very many documents are kept
aside (*deferred*) by the index when the rarer terms already decide the best
documents; :class:`KeywordScores` adds them exactly, but only to the documents
that can still reach the top asked of it.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..id_rows import IdRows

#: BM25's term-frequency saturation and length normalisation.
K1 = 1.2
B = 0.75


class TermPart:
    """One query term's contribution over the documents holding it."""

    __slots__ = ("idf", "positions", "tfs", "norms", "ratio")

    def __init__(
        self,
        idf: float,
        positions: np.ndarray,
        tfs: np.ndarray,
        norms: np.ndarray,
        ratio: float = 1.0,
    ):
        self.idf = idf
        self.positions = positions  # ascending
        self.tfs = tfs
        self.norms = norms
        #: at least the largest tf / (tf + norm) of these documents (1: not known)
        self.ratio = ratio

    @property
    def bound(self) -> float:
        """The most it adds to any document's score."""
        return self.idf * (K1 + 1.0) * self.ratio

    def weights(self, tfs: np.ndarray, positions: np.ndarray) -> np.ndarray:
        return self.idf * tfs * (K1 + 1.0) / (tfs + self.norms[positions])

    def add_to(self, total: np.ndarray) -> None:
        # each term occurs once per document's postings: plain indexing adds
        total[self.positions] += self.weights(self.tfs, self.positions)

    def add_at(self, scores: np.ndarray, positions: np.ndarray) -> None:
        """Add this term to ``scores`` of the (ascending) ``positions``."""
        # the needles in the haystack's dtype: else numpy converts all of the haystack
        at = np.searchsorted(self.positions, positions.astype(self.positions.dtype))
        at = np.minimum(at, self.positions.size - 1)
        hit = self.positions[at] == positions
        if hit.any():
            found = at[hit]
            scores[hit] += self.weights(self.tfs[found], self.positions[found])


class KeywordScores:
    """BM25 scores of one query over every document of a :class:`KeywordIndex`.

    The scores of the common terms (``deferred``) are added lazily, and exactly:
    :meth:`top` adds them only to the documents that can still reach the top
    (those whose score without them, plus the most they can add, reaches the
    ``limit``-th best score without them: no other document can tie or pass it),
    :meth:`get` to the one document asked.  On a large store of short memories
    that skips adding a common term to most documents.
    """

    def __init__(
        self,
        ids: list[str | None],
        rows: IdRows,
        scores: np.ndarray,
        deferred: list[TermPart] | None = None,
        scored: np.ndarray | None = None,
    ) -> None:
        # the index's id list and map when the scores were computed: a compaction
        # replaces them, so these stay the ones the scores belong to
        self._ids = ids
        self._pos = rows
        self._scores = scores
        self._deferred = deferred or []
        #: with deferred terms: the (ascending) positions the others gave a score
        self._scored = scored
        self._exact: dict[int, float] = {}
        self._best: float | None = None

    def _complete(self) -> None:
        """Add every deferred term to every document."""
        for part in self._deferred:  # filtered to the allowed documents already
            part.add_to(self._scores)
        self._deferred = []

    def _at(self, positions: np.ndarray) -> np.ndarray:
        """Exact scores at ascending ``positions``."""
        scores = self._scores[positions].copy()
        for part in self._deferred:
            part.add_at(scores, positions)
        return scores

    @property
    def max(self) -> float:
        if self._best is None:
            best = self.top(1)
            self._best = best[0][1] if best else 0.0
        return self._best

    def get(self, event_id: str | None, default: float = 0.0) -> float:
        pos = self._pos.get(event_id) if event_id is not None else None
        if pos is None or pos >= self._scores.size:
            return default
        if not self._deferred:
            return float(self._scores[pos])
        score = self._exact.get(pos)
        if score is None:
            score = self._exact[pos] = float(self._at(np.array([pos]))[0])
        return score

    def prefetch(self, ids: Iterable[str | None]) -> None:
        """Compute the exact scores of ``ids`` at once (what :meth:`get` then returns)."""
        if not self._deferred:
            return
        size, known = self._scores.size, self._exact
        found = {p for i in ids if i is not None and (p := self._pos.get(i)) is not None}
        positions = np.array(sorted(p for p in found if p < size and p not in known), np.int64)
        if positions.size:
            self._exact.update(zip(positions.tolist(), self._at(positions).tolist(), strict=True))

    def top(self, limit: int | None) -> list[tuple[str, float]]:
        """The ``limit`` best (id, score) with a score above zero (all when None), best first."""
        if limit is not None and limit <= 0:
            return []
        scored = self._scored
        if self._deferred and scored is not None and limit is not None and limit <= scored.size:
            bound = sum(part.bound for part in self._deferred)
            partial = self._scores[scored]
            kth = np.partition(partial, partial.size - limit)[partial.size - limit]
            if kth > bound:  # only documents already within ``bound`` of the cut can reach it
                hits = scored[partial >= kth - bound]
                return self._ranked(*self._pruned(hits, limit), limit)
        self._complete()
        hits = np.flatnonzero(self._scores > 0)  # in index order
        return self._ranked(hits, self._scores[hits], limit)

    def _pruned(self, hits: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """The exact scores of those of ``hits`` (ascending positions, at least
        ``limit``) that can still reach the ``limit`` best, adding the deferred terms
        one at a time: after each, a document whose score so far plus the most the
        terms left can add stays below the ``limit``-th best score so far cannot
        reach the final cut, and the next terms skip it.  Each kept document gets
        every term, in the same order as everywhere: the same floats."""
        scores = self._scores[hits].copy()
        deferred = self._deferred
        for at, part in enumerate(deferred):
            part.add_at(scores, hits)
            rest = sum(later.bound for later in deferred[at + 1 :])
            kth = np.partition(scores, scores.size - limit)[scores.size - limit]
            keep = scores >= kth - rest
            if not keep.all():
                hits, scores = hits[keep], scores[keep]
        return hits, scores

    def _ranked(
        self, hits: np.ndarray, scores: np.ndarray, limit: int | None
    ) -> list[tuple[str, float]]:
        """The ``limit`` best of ``hits`` (ascending positions) by ``scores``."""
        keep = scores > 0
        hits, scores = hits[keep], scores[keep]
        if limit is not None and hits.size > limit:
            # equal scores are common (BM25 of short texts): the earliest documents
            # win a tie at the cut, whatever numpy's selection algorithm does
            kth = -np.partition(-scores, limit - 1)[limit - 1]
            chosen = np.flatnonzero(scores > kth)
            ties = np.flatnonzero(scores == kth)[: limit - chosen.size]
            chosen = np.sort(np.concatenate([chosen, ties]))
            hits, scores = hits[chosen], scores[chosen]
        ids = self._ids
        ranked = sorted(
            ((ids[i], float(score)) for i, score in zip(hits.tolist(), scores, strict=True)),
            key=lambda h: -h[1],
        )
        out = [(event_id, score) for event_id, score in ranked if event_id is not None]
        if out and limit:
            self._best = out[0][1]
        return out
