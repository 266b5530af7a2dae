"""Ranked hits joined to their stored rows: the records of :meth:`Retriever.search`'s
frame and of the context's relevance part (a hit whose row is gone is left out)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .hybrid import HybridHit


def by_similarity(
    hits: list[tuple[str, float]], rows: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """The rows of ``hits`` with their ``similarity``, best first; ties broken as the SQL
    path does: newest first, then id (a Python sort: pandas' sort_values costs
    milliseconds on a handful of rows).  Hits whose row is gone are left out."""
    records = [{**rows[event_id], "similarity": sim} for event_id, sim in hits if event_id in rows]
    records.sort(key=lambda r: r["id"])
    records.sort(key=lambda r: r["created_at"], reverse=True)
    records.sort(key=lambda r: r["similarity"], reverse=True)
    return records


def hit_records(hits: list[HybridHit], rows: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of ranked hybrid hits, in rank order, with their scores (deleted ones left out)."""
    return [
        {
            **rows[hit.id],
            "similarity": np.nan if hit.similarity is None else hit.similarity,
            "score": hit.score,
            "keyword_score": hit.keyword_score,
            "signals": ", ".join(hit.signals),
        }
        for hit in hits
        if hit.id in rows
    ]
