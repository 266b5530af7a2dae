"""``store.vectors``: the vectors of events (``event_vectors``), and rankings computed
from them.

Separate from :mod:`.events` because vectors have their own life: written by the
embedding worker after the row, only for the exact text they were computed from,
dropped when the text changes, the event goes or the model does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from .changes import Change, Vectors
from .clauses import where, where_clause
from .schema import EVENT_VECTORS, READ_COLUMNS
from .table import TableObject

_READ = ", ".join(READ_COLUMNS)

#: The element type SQL compares vectors in.  DuckDB 1.x computes
#: ``list_cosine_similarity`` of FLOAT lists in float32, where vectors near the float32
#: limit overflow (two equal vectors of 1e38 scored -1.0 on 1.5.5); 2.x does not, and
#: FLOAT is ~25% faster there (100k 384-d vectors: 53 vs 69 ms).
MATH_TYPE = "DOUBLE" if duckdb.__version__.startswith("1.") else "FLOAT"


def cosine_sql(column: str) -> str:
    """SQL for the cosine similarity of ``column`` and the next ``?`` parameter."""
    return f"list_cosine_similarity({column}::{MATH_TYPE}[], ?::{MATH_TYPE}[])"


#: Events with the vector of one model (the model is the first parameter).
_WITH_VECTOR = (
    f"SELECT {', '.join('e.' + c for c in READ_COLUMNS)}, v.embedding FROM events e"
    " JOIN event_vectors v ON v.id = e.id AND v.model = e.embedding_model WHERE v.model = ?"
)


def _direction(dim: int) -> np.ndarray:
    """A fixed random unit direction of ``dim`` (the same in every process)."""
    vector = np.random.default_rng(0x6E626D).standard_normal(dim)
    return (vector / np.linalg.norm(vector)).astype(np.float32)


class EventVectors(TableObject):
    """``event_vectors``, and the vector-side state of ``events`` (``embedding_model``:
    the model whose vector is stored for the text; ``embedding_error``: why there is none)."""

    table = EVENT_VECTORS

    def pending(self, limit: int | None = None) -> list[tuple[str, str]]:
        """(id, content) of events with text, no vector and no recorded failure."""
        sql = (
            "SELECT id, content FROM events WHERE content IS NOT NULL AND embedding_error IS NULL"
            " AND embedding_model IS NULL ORDER BY created_at, id"
        )
        params: list[Any] = []
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [(row[0], row[1]) for row in self.store.run(sql, params)]

    def vector_dim(self, model: str) -> int | None:
        """Dimension of the stored vectors of ``model`` (None when there is none)."""
        rows = self.store.run(
            "SELECT len(embedding) FROM event_vectors WHERE model = ? LIMIT 1", [model]
        )
        return int(rows[0][0]) if rows else None

    def embedded_count(self, model: str) -> int:
        """How many events ``model`` embedded."""
        rows = self.store.run("SELECT count(*) FROM event_vectors WHERE model = ?", [model])
        return int(rows[0][0])

    def hashes(self, model: str, dim: int) -> tuple[pa.Array, np.ndarray, np.ndarray]:
        """(ids, hashes, DuckDB rowids) of the ``dim``-long vectors of ``model`` in the
        order :meth:`batches` reads them.  A hash covers the id, the namespace and the
        vector's projection on a fixed random direction, so a saved vector index is
        used only while the table still starts with the very vectors it holds."""
        batches = list(
            self.store.stream(
                "SELECT id, hash(id, namespace, CASE WHEN len(embedding) = ? THEN"
                " list_dot_product(embedding, ?::FLOAT[]) END) AS h, rowid"
                " FROM event_vectors WHERE model = ? AND len(embedding) = ?",
                [dim, _direction(dim).tolist(), model, dim],
                65536,
                lean=True,  # read once: DuckDB need not keep the vectors' blocks
            )
        )
        if not batches:
            empty = np.zeros(0, dtype=np.int64)
            return pa.array([], pa.string()), empty.astype(np.uint64), empty
        table = pa.Table.from_batches(batches)
        ids = table.column(0).combine_chunks()  # compared whole, never as Python strings
        rowids = table.column(2).to_numpy().astype(np.int64)
        return ids, table.column(1).to_numpy().astype(np.uint64), rowids

    def count_of(self, model: str, dim: int) -> int:
        """How many ``dim``-long vectors of ``model`` the table holds."""
        rows = self.store.run(
            "SELECT count(*) FROM event_vectors WHERE model = ? AND len(embedding) = ?",
            [model, dim],
        )
        return int(rows[0][0])

    def first_row(self, model: str, dim: int, ids: Sequence[str]) -> int | None:
        """The smallest DuckDB ``rowid`` of the ``dim``-long vectors of ``model`` for
        these events (None for none)."""
        rows = self.store.run(
            "SELECT min(rowid) FROM event_vectors WHERE model = ? AND len(embedding) = ?"
            " AND id IN (SELECT unnest(?::VARCHAR[]))",
            [model, dim, list(ids)],
        )
        return None if rows[0][0] is None else int(rows[0][0])

    def count_around(self, model: str, dim: int, rowid: int) -> tuple[int, int]:
        """(how many ``dim``-long vectors of ``model`` come before ``rowid``, how many from it)."""
        rows = self.store.run(
            "SELECT count(*) FILTER (rowid < ?), count(*) FILTER (rowid >= ?)"
            " FROM event_vectors WHERE model = ? AND len(embedding) = ?",
            [rowid, rowid, model, dim],
        )
        return int(rows[0][0]), int(rows[0][1])

    def rows_from(self, model: str, dim: int, rowid: int) -> pa.Table:
        """(id, namespace, embedding) of the ``dim``-long vectors of ``model`` from DuckDB's
        ``rowid`` on (a filter DuckDB answers without reading the rows before it)."""
        table: pa.Table = self.store.run(
            "SELECT id, namespace, embedding FROM event_vectors WHERE rowid >= ?"
            " AND model = ? AND len(embedding) = ?",
            [rowid, model, dim],
            "arrow",
        )
        return table

    def rows_of(self, model: str, ids: Sequence[str]) -> pa.Table:
        """(id, namespace, embedding) of ``model``'s vectors of these events."""
        table: pa.Table = self.store.run(
            "SELECT id, namespace, embedding FROM event_vectors WHERE model = ?"
            " AND id IN (SELECT unnest(?::VARCHAR[]))",
            [model, list(ids)],
            "arrow",
        )
        return table

    def batches(self, model: str, rows: int = 65536) -> Iterator[pa.RecordBatch]:
        """(id, namespace, embedding) of every event ``model`` embedded, a batch at a time.

        A stream, so the caller never holds the whole table twice; consume it fully
        (the store's lock is held until then).
        """
        yield from self.store.stream(
            "SELECT id, namespace, embedding FROM event_vectors WHERE model = ?",
            [model],
            rows,
            lean=True,
        )

    def embedded_frame(self, namespace: str, model: str, columns: Sequence[str]) -> pd.DataFrame:
        """Events of ``namespace`` embedded by ``model``, with their vectors, oldest first."""
        unknown = set(columns) - set(READ_COLUMNS)
        if unknown:
            raise ValueError(f"unknown columns {unknown}")
        frame: pd.DataFrame = self.store.run(
            f"SELECT {', '.join(columns)}, embedding FROM ({_WITH_VECTOR})"
            " WHERE namespace = ? ORDER BY created_at, id",
            [model, namespace],
            "df",
        )
        return frame

    def similar(
        self,
        vector: np.ndarray,
        model: str,
        *,
        limit: int,
        namespace: str | None,
        threshold: float | None = None,
        strict: bool = False,
        filters: dict[str, Any] | None = None,
        since: Any = None,
        until: Any = None,
        exclude_ids: Iterable[str] = (),
        offset: int = 0,
        rank_by: str = "similarity",
    ) -> pd.DataFrame:
        """Exact top-``limit`` by cosine similarity in SQL (``list_cosine_similarity``).

        The reference ranking: every stored vector of ``model`` in scope is scored.
        Rows carry ``similarity`` and ``distance_score`` = 1 / (1 + euclidean
        distance); ``rank_by`` picks which one ranks and meets ``threshold``
        (``>=``, or ``>`` when ``strict``).  Ties: newest first, then id.
        """
        if rank_by not in ("similarity", "distance_score"):
            raise ValueError(rank_by)
        clauses, params = where_clause(
            namespace=namespace, filters=filters, since=since, until=until
        )
        exclude = list(exclude_ids)
        if exclude:
            clauses.append("id NOT IN (SELECT unnest(?::VARCHAR[]))")
            params.append(exclude)
        query = np.asarray(vector, dtype=np.float32).tolist()
        sql = (
            f"SELECT * FROM (SELECT {_READ},"
            f" {cosine_sql('embedding')} AS similarity,"
            f" 1.0 / (1.0 + list_distance(embedding::{MATH_TYPE}[], ?::{MATH_TYPE}[]))"
            " AS distance_score"
            f" FROM ({_WITH_VECTOR}){where(clauses)}) WHERE {rank_by} IS NOT NULL"
        )
        params = [query, query, model, *params]
        if threshold is not None:
            sql += f" AND {rank_by} {'>' if strict else '>='} ?"
            params.append(float(threshold))
        sql += f" ORDER BY {rank_by} DESC, created_at DESC, id LIMIT ? OFFSET ?"
        params += [int(limit), int(offset)]
        frame: pd.DataFrame = self.store.run(sql, params, "df")
        return frame

    def write_vectors(
        self, ids: Sequence[str], vectors: np.ndarray, model: str, texts: Sequence[str]
    ) -> list[str]:
        """Store each vector for its event, only if the event still holds the text it was
        computed from and has no vector yet; clears any earlier error.  Returns the ids
        written.

        The event rows are marked in one ``UPDATE`` of plain columns (which also picks
        the rows, atomically with the check); the vectors are appended from Arrow.
        """
        self._write()
        if not len(ids):
            return []
        matrix = np.asarray(vectors, dtype=np.float32)
        data = pa.table(
            {"id": pa.array(list(ids), pa.string()), "content": pa.array(list(texts), pa.string())}
        )
        with self.store.registered("_nbmemory_vectors", data) as view:
            written = self._mark(view, model)
        if not written:
            return []
        row_of = {event_id: i for i, event_id in enumerate(ids)}
        group = Vectors(
            model,
            [w[0] for w in written],
            [w[1] for w in written],
            matrix[[row_of[event_id] for event_id, _ in written]],
        )
        self.append(group)
        self.store.changed(Change(vectors=[group]))
        return group.ids

    def _mark(self, view: str, model: str) -> list[tuple[str, str]]:
        """Mark the events of ``view`` (id, content) that still hold that text and have
        no vector as embedded by ``model``; returns their (id, namespace).

        The rows are picked by a ``SELECT`` and marked by an ``UPDATE`` with the same
        condition, in the caller's transaction: ``UPDATE ... RETURNING`` is DuckDB's
        slow path (~30 µs a row, and its commit as much again, against ~2 µs)."""
        condition = (
            "events.id = v.id AND events.content = v.content AND events.embedding_model IS NULL"
        )
        rows: list[tuple[str, str]] = self.store.run(
            f"SELECT DISTINCT events.id, events.namespace FROM events, {view} v WHERE {condition}"
        )
        if rows:
            self.store.statements.update(
                "events",
                "embedding_model = ?, embedding_error = NULL",
                [model],
                condition,
                from_=f"{view} v",
            )
        return rows

    def append(self, group: Vectors) -> None:
        """Append the vectors of ``group`` (their events marked by the caller)."""
        self._write()
        if group.ids:
            self.store.statements.insert_arrow("event_vectors", vector_rows(group))

    def forget(self, ids: Sequence[str]) -> None:
        """Take these events' vectors away (the events then wait for a new one)."""
        self._write()
        if not ids:
            return
        self.store.statements.update(
            "events",
            "embedding_model = NULL",
            [],
            "id IN (SELECT unnest(?::VARCHAR[]))",
            [list(ids)],
        )
        self.drop(ids)
        self.store.changed(Change(unvectored=list(ids)))

    def drop(self, ids: Sequence[str]) -> None:
        """Forget the stored vectors of these events (every model)."""
        self._write()
        if ids:
            self.store.statements.delete(
                "event_vectors", "id IN (SELECT unnest(?::VARCHAR[]))", [list(ids)]
            )

    def write_errors(self, errors: dict[str, str]) -> None:
        """Record why embedding failed for each id (its vector, if any, is dropped)."""
        self._write()
        if not errors:
            return
        data = pa.table(
            {
                "id": pa.array(list(errors), pa.string()),
                "error": pa.array(list(errors.values()), pa.string()),
            }
        )
        with self.store.registered("_nbmemory_errors", data) as view:
            self.store.statements.update(
                "events",
                "embedding_model = NULL, embedding_error = e.error",
                where_sql="events.id = e.id",
                from_=f"{view} e",
            )
        self.drop(list(errors))
        self.store.changed(Change(unvectored=list(errors)))

    def clear_errors(self) -> list[tuple[str, str]]:
        """Forget recorded embedding failures; returns (id, text) now waiting again."""
        self._write()
        rows = [
            (r[0], r[1])
            for r in self.store.statements.update(
                "events",
                "embedding_error = NULL",
                where_sql="embedding_error IS NOT NULL AND content IS NOT NULL",
                returning=("id", "content"),
            )
        ]
        if rows:
            self.store.changed(Change(to_embed=rows))
        return rows

    def clear_vectors_not_of(self, model: str, namespace: str | None) -> list[tuple[str, str]]:
        """Drop vectors made by other models (and failures); returns (id, text) to embed."""
        self._write()
        condition = "embedding_model IS DISTINCT FROM ? AND content IS NOT NULL"
        params: list[Any] = [model]
        if namespace is not None:
            condition += " AND namespace = ?"
            params.append(namespace)
        rows = [
            (r[0], r[1])
            for r in self.store.statements.update(
                "events",
                "embedding_model = NULL, embedding_error = NULL",
                [],
                condition,
                params,
                returning=("id", "content"),
            )
        ]
        if rows:
            self.drop([r[0] for r in rows])
            self.store.changed(Change(unvectored=[r[0] for r in rows], to_embed=rows))
        return rows


def embedded_vectors(
    rows: list[dict[str, Any]],
    kept: np.ndarray,
    vectors: dict[str, tuple[str, np.ndarray]],
    matrix: tuple[str, np.ndarray] | None,
) -> list[Vectors]:
    """The vectors that arrive with the rows, by model (rows whose text changed left out)."""
    if matrix is not None:
        model, block = matrix
        block = np.asarray(block, dtype=np.float32)
        chosen = np.flatnonzero(kept)
        return [
            Vectors(
                model,
                [rows[i]["id"] for i in chosen],
                [rows[i]["namespace"] for i in chosen],
                block[chosen],
            )
        ]
    by_model: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        if row["id"] in vectors and kept[i]:
            by_model.setdefault(vectors[row["id"]][0], []).append(i)
    return [
        Vectors(
            model,
            [rows[i]["id"] for i in chosen],
            [rows[i]["namespace"] for i in chosen],
            np.stack([np.asarray(vectors[rows[i]["id"]][1], dtype=np.float32) for i in chosen]),
        )
        for model, chosen in by_model.items()
    ]


def mark_embedded(data: pa.Table, groups: list[Vectors]) -> pa.Table:
    """Event rows ``data`` with ``embedding_model`` set for the events of ``groups``."""
    model_of = {event_id: g.model for g in groups for event_id in g.ids}
    models = pa.array(
        [
            model_of.get(i, old)
            for i, old in zip(
                data.column("id").to_pylist(),
                data.column("embedding_model").to_pylist(),
                strict=True,
            )
        ],
        pa.string(),
    )
    return data.set_column(
        data.schema.get_field_index("embedding_model"), "embedding_model", models
    )


def vector_rows(group: Vectors) -> pa.Table:
    """``group`` as rows of ``event_vectors`` (an Arrow table)."""
    matrix = np.asarray(group.matrix, dtype=np.float32)
    return pa.table(
        {
            "id": pa.array(group.ids, pa.string()),
            "namespace": pa.array(group.namespaces, pa.string()),
            "model": pa.array([group.model] * len(group.ids), pa.string()),
            "embedding": pa.FixedSizeListArray.from_arrays(
                pa.array(matrix.reshape(-1)), matrix.shape[1]
            ).cast(pa.list_(pa.float32())),
        },
        schema=EVENT_VECTORS.arrow_schema,
    )
