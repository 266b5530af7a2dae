"""A second opinion on the best candidates: re-scoring them with a reranker.

A first-stage ranking (cosine, BM25, the hybrid fusion) reads the query and each
memory apart; a cross-encoder reads them together and judges better, at a cost
per candidate.  So only the first ``rerank_top_n`` candidates (a setting, 20)
are re-scored and re-ordered; the rest keep their place after them.

A reranker is any callable ``(query, texts) -> one score per text`` (higher is
better), or an object with fastembed's ``TextCrossEncoder`` interface
(``.rerank(query, documents)`` yielding scores), adapted here by
:func:`as_reranker`.  None is the default: nothing is re-scored.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InvalidInput, RerankerError

#: ``(query, texts) -> one score per text``, higher is better.
Reranker = Callable[[str, list[str]], Sequence[float]]


def as_reranker(spec: Any) -> Reranker | None:
    """``spec`` as a :data:`Reranker`: None stays None (no reranking), an object
    with a ``.rerank(query, documents)`` method (fastembed's ``TextCrossEncoder``)
    is adapted, and any other callable is used as it is."""
    if spec is None:
        return None
    method = getattr(spec, "rerank", None)
    if callable(method):

        def rerank(query: str, texts: list[str]) -> list[float]:
            return list(method(query, texts))

        rerank.__qualname__ = f"{type(spec).__name__}.rerank"
        return rerank
    if callable(spec):
        return spec
    raise InvalidInput(
        f"reranker must be a callable (query, texts) -> scores or an object with "
        f".rerank(query, documents) such as fastembed's TextCrossEncoder, not "
        f"{type(spec).__name__}"
    )


def reranker_name(reranker: Reranker | None) -> str:
    """A short name for a reranker (evaluation tables say which one they used)."""
    if reranker is None:
        return "none"
    return str(getattr(reranker, "__qualname__", None) or type(reranker).__name__)


def rerank_scores(reranker: Reranker, query: str, texts: list[str]) -> list[float]:
    """The reranker's score of each text, checked: one finite number per text.

    Raises :class:`~nbmemory.errors.RerankerError` (one line, saying what to fix)
    when the reranker raises or answers with the wrong number of scores.
    """
    name = reranker_name(reranker)
    try:
        answer = reranker(query, list(texts))
        scores = [float(score) for score in answer]
    except Exception as exc:  # the caller's code: any failure is a RerankerError
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise RerankerError(
            f"the reranker {name} failed on {len(texts)} texts: {type(exc).__name__}: {first}; "
            "fix it, or open the Memory without reranker="
        ) from exc
    if len(scores) != len(texts):
        raise RerankerError(
            f"the reranker {name} returned {len(scores)} scores for {len(texts)} texts; "
            "it must return one score per text, in the order given"
        )
    if not all(math.isfinite(score) for score in scores):
        raise RerankerError(
            f"the reranker {name} returned a NaN or infinite score; it must return finite numbers"
        )
    return scores


def rerank_frame(
    frame: pd.DataFrame, query: str, reranker: Reranker, *, top_n: int, limit: int
) -> pd.DataFrame:
    """``frame`` (hits best first, a ``content`` column) with its first ``top_n``
    rows re-ordered by the reranker's score, best first (ties keep the first
    stage's order), the other rows after them, cut to ``limit`` rows.

    Adds ``rerank_score`` (NaN for rows not re-scored) and ``rerank`` to the
    ``signals`` of the re-scored rows.
    """
    frame = frame.reset_index(drop=True)
    if frame.empty:
        return frame.assign(rerank_score=pd.Series(dtype=float))
    head = frame.iloc[:top_n].copy()
    scores = rerank_scores(reranker, query, ["" if c is None else str(c) for c in head["content"]])
    head["rerank_score"] = scores
    if "signals" in head.columns:
        head["signals"] = [f"{s}, rerank" if s else "rerank" for s in head["signals"]]
    order = np.argsort(-np.asarray(scores, dtype=float), kind="stable")
    tail = frame.iloc[top_n:].assign(rerank_score=np.nan)
    pieces = [head.iloc[order]] + ([tail] if not tail.empty else [])
    return pd.concat(pieces, ignore_index=True).head(limit)
