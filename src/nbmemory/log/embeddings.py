"""The vectors stored with events: waiting for them, retrying failures, re-embedding
after a model change, and reading them back for research."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core import Core
from ..errors import InvalidInput
from ..retrieval.vector_index import normalise_rows
from ..validation import check_text

#: Columns of the memory a vector of :meth:`Embeddings.vectors` belongs to.
MEMORY_FRAME_COLUMNS = ["id", "session_id", "role", "kind", "content", "importance", "created_at"]
#: Columns of :meth:`Embeddings.vectors`: the memory, then the characters of its content
#: the vector is of (NA for a memory embedded whole).
VECTOR_FRAME_COLUMNS = [*MEMORY_FRAME_COLUMNS, "passage_start", "passage_stop"]


class Embeddings:
    """``flush``, ``backlog``, ``retry_failed``, ``reembed``, ``vectors``, ``embed_query``,
    ``embed_queries``."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued embedding is written; False if ``timeout`` ran out.

        Raises :class:`~nbmemory.retrieval.embedders.ModelUnavailable` (an
        ``EmbedderError``, one line) when the model cannot load: the texts stay
        pending in the store, are embedded as soon as the model loads in this
        process (the next ``flush`` tries again), and are queued again at the next open.

        After a bulk ingest (``add_events`` of at least ``index_cache_min_rows`` rows
        since the last time), the saved indexes are brought up to date on a thread,
        so the next process to open the store loads them instead of building them on
        its first search; ``close()`` waits for that.
        """
        worker = self.core.worker
        done = True if worker is None else worker.flush(timeout)
        if done:
            self.core.indexes.refresh_saved(None if worker is None else self.core.model)
        return done

    @property
    def backlog(self) -> int:
        """Events queued for embedding in this process and not yet written."""
        worker = self.core.worker
        return 0 if worker is None else worker.backlog

    def retry_failed(self) -> int:
        """Re-queue events whose embedding failed; returns how many were queued.

        (A model that cannot load fails no event: those stay pending instead.)
        """
        with self.core.writer.transaction() as tx:
            rows = tx.vectors.clear_errors()
            if rows:
                tx.audit("retry_embeddings", [r[0] for r in rows], None, {"count": len(rows)})
        return len(rows)

    def requeue_for_passages(self) -> int:
        """Queue again the memories longer than the window in characters that are stored
        with one whole-text vector (embedded before passages, or imported so): the
        worker cuts them on its thread, embeds the passages of those longer than the
        window and replaces the old vector with them in one transaction (it serves
        search until then).  Returns how many were queued to look at;
        ``status()["passages"]`` follows them."""
        worker = self.core.worker
        split = None if worker is None else worker.split
        if worker is None or split is None:
            return 0
        rows = self.core.store.vectors.whole_long(
            self.core.model, getattr(split, "known_window", 0)
        )
        worker.submit_for_passages(rows)
        return len(rows)

    def reembed(self, *, namespace: str | None = None) -> int:
        """Queue every event not embedded by the current model (after a model change)."""
        ns = None if namespace is None else self.core.ns(namespace)
        with self.core.writer.transaction() as tx:
            rows = tx.vectors.clear_vectors_not_of(self.core.model, ns)
            if rows:
                tx.audit("reembed", [r[0] for r in rows], ns, {"model": self.core.model})
        return len(rows)

    def vectors(self, *, namespace: str | None = None) -> tuple[pd.DataFrame, np.ndarray]:
        """Every vector the current model stored for the namespace's memories, unit length.

        Returns ``(frame, matrix)``: one row of ``frame`` per row of the float32
        ``matrix``, oldest memory first.  A memory longer than the model's window is
        stored as several passages (see ``docs/retrieval.md``), so it has one row per
        passage, in order: ``frame`` holds the memory (id, session_id, role, kind,
        content, importance, created_at) and the characters of its content the vector
        is of (``passage_start``/``passage_stop``, NA for a memory embedded whole).
        ``matrix @ q`` is then the cosine of a query to every passage; search scores
        a memory by its best passage (the maximum over its rows), which is what
        ``mem.research.similarities`` returns, one row per memory.
        """
        frame = self.core.store.vectors.embedded_frame(
            self.core.ns(namespace), self.core.model, MEMORY_FRAME_COLUMNS
        )
        for column in ("passage_start", "passage_stop"):
            frame[column] = frame[column].astype("Int64")
        if frame.empty:
            return frame[VECTOR_FRAME_COLUMNS], np.zeros((0, 0), dtype=np.float32)
        matrix = normalise_rows(np.stack(frame["embedding"].to_numpy()).astype(np.float32))
        return frame[VECTOR_FRAME_COLUMNS].reset_index(drop=True), matrix

    def embed_query(self, query: str) -> np.ndarray:
        """The vector of one query, as search embeds it (the last 256 distinct queries are cached)."""
        return self.core.retriever.embed_query(query)

    def embed_queries(self, queries: list[str]) -> np.ndarray:
        """Unit-length vectors of ``queries`` (one batch through the store's model)."""
        if isinstance(queries, (str, bytes)) or not isinstance(queries, (list, tuple)):
            raise InvalidInput(f"queries must be a list of strings, got {type(queries).__name__}")
        texts = [check_text(q, "query") for q in queries]
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return normalise_rows(np.asarray(self.core.embedder.embed(texts), dtype=np.float32))
