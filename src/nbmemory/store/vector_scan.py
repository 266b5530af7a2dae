"""The vector rows of one model read for a search held out of memory (a vector budget).

Under ``vector_budget_mb`` the namespaces whose vectors do not fit in memory are
searched here, in DuckDB: :meth:`VectorScan.top` ranks the rows by
``list_cosine_similarity`` and returns them with their vectors, which the
retrieval layer scores again exactly as the in-memory index does (so both give
the same answer, to the last bit).  The keys are the in-memory index's
(:data:`~.vectors.KEY_SQL`: the event id, or id and passage for a long text's
later passages); only vectors of the index's length ``dim`` are read.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa

from .lean_scan import FILTERED_SCAN_MEMORY
from .table import TableObject
from .vectors import KEY_SQL, cosine_sql

#: A similarity DuckDB cannot compute (a zero vector: NaN) scores 0, as in memory.
_SCORE = f"coalesce(nullif({cosine_sql('embedding')}, 'NaN'::DOUBLE), 0)"


class VectorScan(TableObject):
    """Reads of ``event_vectors`` by namespace, for searches outside the in-memory index."""

    def namespace_sizes(self, model: str) -> tuple[int | None, dict[str, int]]:
        """(the length most of ``model``'s vectors have, rows of that length per
        namespace); (None, {}) when it has none."""
        batches = self.store.stream(
            "SELECT namespace, len(embedding) AS dim, count(*) AS n FROM event_vectors"
            " WHERE model = ? GROUP BY ALL",
            [model],
            65536,
            lean=True,  # reads every vector: DuckDB need not keep their blocks
        )
        rows = [row for batch in batches for row in zip(*batch.to_pydict().values(), strict=True)]
        if not rows:
            return None, {}
        by_dim: dict[int, int] = {}
        for _, dim, count in rows:
            by_dim[int(dim)] = by_dim.get(int(dim), 0) + int(count)
        dim = max(by_dim, key=lambda d: (by_dim[d], d))
        return dim, {str(ns): int(count) for ns, d, count in rows if int(d) == dim}

    def batches(
        self, model: str, dim: int, namespace: str, rows: int = 8192
    ) -> Iterator[pa.RecordBatch]:
        """(key, namespace, embedding) of ``namespace``'s vectors, a batch at a time
        (scanned lean, like :meth:`~.vectors.EventVectors.batches`, with more room:
        :data:`~.lean_scan.FILTERED_SCAN_MEMORY`)."""
        yield from self.store.stream(
            f"SELECT {KEY_SQL} AS id, namespace, embedding FROM event_vectors"
            " WHERE model = ? AND namespace = ? AND len(embedding) = ?",
            [model, namespace, dim],
            rows,
            lean=FILTERED_SCAN_MEMORY,
        )

    def top(
        self,
        model: str,
        dim: int,
        namespace: str | None,
        query: np.ndarray,
        limit: int,
        *,
        allowed: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
    ) -> pa.Table:
        """(key, embedding, score, rowid) of the ``limit`` rows most similar to ``query``
        by DuckDB's cosine, best first; ``allowed`` and ``exclude`` are event ids."""
        clauses, params = self._scope(model, dim, namespace, allowed, exclude)
        return self._read(
            f"SELECT id, embedding, score, rowid FROM (SELECT {KEY_SQL} AS id, embedding,"
            f" {_SCORE} AS score, rowid FROM event_vectors WHERE {clauses})"
            " ORDER BY score DESC, rowid LIMIT ?",
            [np.asarray(query, np.float32).tolist(), *params, int(limit)],
        )

    def extremes(
        self,
        model: str,
        dim: int,
        namespace: str | None,
        query: np.ndarray,
        *,
        allowed: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
    ) -> pa.Table:
        """(key, embedding) of the least and the most similar row in scope (one scan)."""
        clauses, params = self._scope(model, dim, namespace, allowed, exclude)
        ends = self._read(
            "SELECT arg_min(id, score) AS low, arg_min(embedding, score) AS low_vector,"
            " arg_max(id, score) AS high, arg_max(embedding, score) AS high_vector"
            f" FROM (SELECT {KEY_SQL} AS id, embedding, {_SCORE} AS score"
            f" FROM event_vectors WHERE {clauses})",
            [np.asarray(query, np.float32).tolist(), *params],
        )
        if not ends.num_rows or ends.column("low")[0].as_py() is None:
            return pa.table(
                {"id": pa.array([], pa.string()), "embedding": pa.array([], pa.list_(pa.float32()))}
            )
        return pa.table(
            {
                "id": pa.concat_arrays(
                    [ends.column("low").combine_chunks(), ends.column("high").combine_chunks()]
                ),
                "embedding": pa.concat_arrays(
                    [
                        ends.column("low_vector").combine_chunks(),
                        ends.column("high_vector").combine_chunks(),
                    ]
                ),
            }
        )

    def of_events(self, model: str, dim: int, ids: Sequence[str]) -> pa.Table:
        """(key, embedding, rowid) of every vector row of these events (all passages)."""
        return self._read(
            f"SELECT {KEY_SQL} AS id, embedding, rowid FROM event_vectors WHERE model = ?"
            " AND len(embedding) = ? AND id IN (SELECT unnest(?::VARCHAR[]))",
            [model, dim, list(ids)],
        )

    def _read(self, sql: str, params: list[object]) -> pa.Table:
        """The whole result, read under a lowered memory limit: a search that scans
        every vector of a namespace must not leave them in DuckDB's buffer pool, or
        the budget would bound nothing (at 1M, the pool grew by ~1.5 GB)."""
        batches = list(self.store.stream(sql, params, 65536, lean=FILTERED_SCAN_MEMORY))
        if not batches:
            return pa.table({"id": pa.array([], pa.string())})
        return pa.Table.from_batches(batches)

    @staticmethod
    def _scope(
        model: str,
        dim: int,
        namespace: str | None,
        allowed: Sequence[str] | None,
        exclude: Sequence[str],
    ) -> tuple[str, list[object]]:
        clauses, params = ["model = ?", "len(embedding) = ?"], [model, dim]
        if namespace is not None:
            clauses.append("namespace = ?")
            params.append(namespace)
        if allowed is not None:
            clauses.append("id IN (SELECT unnest(?::VARCHAR[]))")
            params.append(list(allowed))
        if exclude:
            clauses.append("id NOT IN (SELECT unnest(?::VARCHAR[]))")
            params.append(list(exclude))
        return " AND ".join(clauses), params
