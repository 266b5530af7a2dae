"""``store.vectors``: the vectors of events (``event_vectors``), and rankings computed
from them.

Separate from :mod:`.events` because vectors have their own life: written by the
embedding worker after the row, only for the exact text they were computed from,
dropped when the text changes, the event goes or the model does.

A long text has one row per passage (``passage`` 0, 1 …, with its characters
``span_start``/``span_stop``), all written in one transaction; a short one, one
row with NULL passage.  Reads that feed the in-memory index name each row by a
key (:data:`KEY_SQL`): the event id for a whole text or a first passage, else
the id, :data:`PASSAGE_SEP` and the passage number.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from .changes import Change, Vectors
from .clauses import ORDERINGS, where, where_clause
from .schema import EVENT_VECTORS, READ_COLUMNS
from .table import TableObject

_READ = ", ".join(READ_COLUMNS)

#: Between an event id and a passage number in a vector row's key: the ASCII unit
#: separator, a control character no generated id holds (an id given by hand that
#: ends in it and digits would share a key with a passage: not guarded).
PASSAGE_SEP = "\x1f"
#: SQL of a vector row's key (see the module's docstring).
KEY_SQL = "CASE WHEN coalesce(passage, 0) = 0 THEN id ELSE id || chr(31) || passage::VARCHAR END"


def passage_key(event_id: str, passage: int | None) -> str:
    """The key :data:`KEY_SQL` gives a vector row."""
    return event_id if not passage else f"{event_id}{PASSAGE_SEP}{passage}"


#: The element type SQL compares vectors in.  DuckDB 1.x computes
#: ``list_cosine_similarity`` of FLOAT lists in float32, where vectors near the float32
#: limit overflow (two equal vectors of 1e38 scored -1.0 on 1.5.5); 2.x does not, and
#: FLOAT is ~25% faster there (100k 384-d vectors: 53 vs 69 ms).
MATH_TYPE = "DOUBLE" if duckdb.__version__.startswith("1.") else "FLOAT"


def cosine_sql(column: str) -> str:
    """SQL for the cosine similarity of ``column`` and the next ``?`` parameter."""
    return f"list_cosine_similarity({column}::{MATH_TYPE}[], ?::{MATH_TYPE}[])"


#: Events with the vectors of one model (the model is the first parameter): one row
#: per passage of a long text.
_WITH_VECTOR = (
    f"SELECT {', '.join('e.' + c for c in READ_COLUMNS)}, v.embedding, v.passage, v.span_start,"
    " v.span_stop FROM events e"
    " JOIN event_vectors v ON v.id = e.id AND v.model = e.embedding_model WHERE v.model = ?"
)


def _columns(columns: Sequence[str]) -> str:
    """``columns`` of ``events`` as a SELECT list, refused unless each is one."""
    unknown = set(columns) - set(READ_COLUMNS)
    if unknown:
        raise ValueError(f"unknown columns {unknown}")
    return ", ".join(columns)


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
                f"SELECT {KEY_SQL} AS id, hash({KEY_SQL}, namespace, CASE WHEN len(embedding) = ?"
                " THEN list_dot_product(embedding, ?::FLOAT[]) END) AS h, rowid"
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
        row = self._scan_one(
            "SELECT count(*) FROM event_vectors WHERE model = ? AND len(embedding) = ?",
            [model, dim],
        )
        return int(row[0])

    def _scan_one(self, sql: str, params: list[Any]) -> tuple[Any, ...]:
        """The one row of an aggregate over the vectors, scanned lean: ``len(embedding)``
        reads every vector, whose blocks DuckDB would otherwise keep (at 200k, a clean
        close's check raised the peak by 260 MB)."""
        batches = list(self.store.stream(sql, params, 1, lean=True))
        table = pa.Table.from_batches(batches)
        return tuple(column[0].as_py() for column in table.columns)

    def first_row(self, model: str, dim: int, ids: Sequence[str]) -> int | None:
        """The smallest DuckDB ``rowid`` of the ``dim``-long vectors of ``model`` with
        these keys (None for none)."""
        row = self._scan_one(
            "SELECT min(rowid) FROM event_vectors WHERE model = ? AND len(embedding) = ?"
            f" AND {KEY_SQL} IN (SELECT unnest(?::VARCHAR[]))",
            [model, dim, list(ids)],
        )
        return None if row[0] is None else int(row[0])

    def count_around(self, model: str, dim: int, rowid: int) -> tuple[int, int]:
        """(how many ``dim``-long vectors of ``model`` come before ``rowid``, how many from it)."""
        row = self._scan_one(
            "SELECT count(*) FILTER (rowid < ?), count(*) FILTER (rowid >= ?)"
            " FROM event_vectors WHERE model = ? AND len(embedding) = ?",
            [rowid, rowid, model, dim],
        )
        return int(row[0]), int(row[1])

    def rows_from(self, model: str, dim: int, rowid: int) -> pa.Table:
        """(key, namespace, embedding) of the ``dim``-long vectors of ``model`` from DuckDB's
        ``rowid`` on (a filter DuckDB answers without reading the rows before it)."""
        table: pa.Table = self.store.run(
            f"SELECT {KEY_SQL} AS id, namespace, embedding FROM event_vectors WHERE rowid >= ?"
            " AND model = ? AND len(embedding) = ?",
            [rowid, model, dim],
            "arrow",
        )
        return table

    def first_vectors(self, model: str, ids: Sequence[str]) -> dict[str, list[float]]:
        """event id -> its vector of ``model``: the whole text's, or its first passage's."""
        rows = self.store.run(
            "SELECT id, embedding FROM event_vectors WHERE model = ?"
            " AND id IN (SELECT unnest(?::VARCHAR[]))"
            " QUALIFY row_number() OVER (PARTITION BY id ORDER BY coalesce(passage, 0)) = 1",
            [model, list(ids)],
        )
        return {str(r[0]): [float(x) for x in r[1]] for r in rows}

    def rows_of(self, model: str, ids: Sequence[str]) -> pa.Table:
        """(key, namespace, embedding) of ``model``'s vector rows with these keys."""
        table: pa.Table = self.store.run(
            f"SELECT {KEY_SQL} AS id, namespace, embedding FROM event_vectors WHERE model = ?"
            f" AND {KEY_SQL} IN (SELECT unnest(?::VARCHAR[]))",
            [model, list(ids)],
            "arrow",
        )
        return table

    def whole_long(self, model: str, min_chars: int) -> list[tuple[str, str]]:
        """(id, content) of events longer than ``min_chars`` whose vector of ``model`` is
        one vector of the whole text (embedded before passages, or imported so)."""
        rows = self.store.run(
            "SELECT id, content FROM events WHERE embedding_model = ? AND length(content) > ?"
            " AND id IN (SELECT id FROM event_vectors WHERE model = ? AND passage IS NULL)"
            " ORDER BY created_at, id",
            [model, int(min_chars), model],
        )
        return [(r[0], r[1]) for r in rows]

    def whole_count(self, model: str, ids: Sequence[str]) -> int:
        """How many of these events still have ``model``'s one whole-text vector."""
        rows = self.store.run(
            "SELECT count(DISTINCT id) FROM event_vectors WHERE model = ? AND passage IS NULL"
            " AND id IN (SELECT unnest(?::VARCHAR[]))",
            [model, list(ids)],
        )
        return int(rows[0][0])

    def spans(self, model: str, keys: Sequence[str]) -> dict[str, tuple[int, int]]:
        """event id -> (span_start, span_stop) of the passage rows of ``model`` with these
        keys (rows of whole texts are left out)."""
        rows = self.store.run(
            "SELECT id, span_start, span_stop FROM event_vectors WHERE model = ?"
            f" AND passage IS NOT NULL AND {KEY_SQL} IN (SELECT unnest(?::VARCHAR[]))",
            [model, list(keys)],
        )
        return {r[0]: (int(r[1]), int(r[2])) for r in rows if r[1] is not None}

    def passages(
        self, *, namespace: str, filters: dict[str, Any] | None = None
    ) -> dict[str, list[tuple[int, int, np.ndarray]]]:
        """event id -> ``(span_start, span_stop, vector)`` of each passage of its
        ``embedding_model``, in order, for the events of ``namespace`` passing
        ``filters`` that are stored as passages (a long text; an export carries them)."""
        clauses, params = where_clause(namespace=namespace, filters=filters)
        rows = self.store.run(
            "SELECT v.id, v.span_start, v.span_stop, v.embedding FROM event_vectors v"
            f" JOIN (SELECT id, embedding_model FROM events{where(clauses)}) e"
            " ON v.id = e.id AND v.model = e.embedding_model"
            " WHERE v.passage IS NOT NULL ORDER BY v.id, v.passage",
            params,
        )
        out: dict[str, list[tuple[int, int, np.ndarray]]] = {}
        for event_id, start, stop, vector in rows:
            out.setdefault(event_id, []).append(
                (int(start), int(stop), np.asarray(vector, dtype=np.float32))
            )
        return out

    def batches(self, model: str, rows: int = 8192) -> Iterator[pa.RecordBatch]:
        """(key, namespace, embedding) of every vector row of ``model``, a batch at a time.

        A stream, so the caller never holds the whole table twice; consume it fully
        (the store's lock is held until then).  Batches of 8,192 rows (12 MB of
        384-d vectors): DuckDB reads several batches ahead, and larger ones raised the
        peak of a 200k build by ~80 MB, no faster.
        """
        yield from self.store.stream(
            f"SELECT {KEY_SQL} AS id, namespace, embedding FROM event_vectors WHERE model = ?",
            [model],
            rows,
            lean=True,
        )

    def embedded_frame(self, namespace: str, model: str, columns: Sequence[str]) -> pd.DataFrame:
        """Every vector ``model`` stored for the events of ``namespace``, with the event's
        ``columns``, oldest event first: one row per vector, so a long text has one per
        passage, in order, with the characters of its content the passage holds
        (``passage_start``/``passage_stop``; NULL for a text embedded whole)."""
        frame: pd.DataFrame = self.store.run(
            f"SELECT {_columns(columns)}, span_start AS passage_start,"
            f" span_stop AS passage_stop, embedding FROM ({_WITH_VECTOR})"
            " WHERE namespace = ? ORDER BY created_at, id, passage",
            [model, namespace],
            "df",
        )
        return frame

    def embedded_events(self, namespace: str, model: str, columns: Sequence[str]) -> pd.DataFrame:
        """The ``columns`` of each event of ``namespace`` embedded by ``model``, one row per
        event however many passages it has, oldest first (no vectors)."""
        frame: pd.DataFrame = self.store.run(
            f"SELECT {_columns(columns)} FROM ({_WITH_VECTOR})"
            " WHERE namespace = ? AND coalesce(passage, 0) = 0 ORDER BY created_at, id",
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
        order: str | None = None,
        descending: bool = True,
    ) -> pd.DataFrame:
        """Exact top-``limit`` by cosine similarity in SQL (``list_cosine_similarity``).

        The reference ranking: every stored vector of ``model`` in scope is scored, an
        event by its best passage.
        Rows carry ``similarity`` and ``distance_score`` = 1 / (1 + euclidean
        distance); ``rank_by`` picks which one ranks and meets ``threshold``
        (``>=``, or ``>`` when ``strict``).  Ties: newest first, then id.  ``order``
        (an ORDER BY of :data:`~.clauses.ORDERINGS`) pages the matches by time instead; ``descending=False`` puts the weakest
        match first.
        """
        if order is not None and order not in ORDERINGS:
            raise ValueError(order)
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
        best = f" QUALIFY row_number() OVER (PARTITION BY id ORDER BY {rank_by} DESC) = 1"
        params = [query, query, model, *params]
        if threshold is not None:
            sql += f" AND {rank_by} {'>' if strict else '>='} ?"
            params.append(float(threshold))
        by = order or (
            f"{rank_by} DESC, created_at DESC, id" if descending else f"{rank_by}, created_at, id"
        )
        sql += f"{best} ORDER BY {by} LIMIT ? OFFSET ?"
        params += [int(limit), int(offset)]
        frame: pd.DataFrame = self.store.run(sql, params, "df")
        return frame

    def write_vectors(
        self,
        ids: Sequence[str],
        vectors: np.ndarray,
        model: str,
        texts: Sequence[str],
        spans: Sequence[Sequence[tuple[int, int]] | None] | None = None,
    ) -> list[str]:
        """Store the vectors of each event, only if the event still holds the text they
        were computed from and has no vector yet; clears any earlier error.  Returns the
        ids written.

        ``spans`` gives, per event, the character spans of its passages (``vectors``
        then holds one row per passage, in order) or None for one vector of the whole
        text.  An event with several passages may also replace the one whole-text
        vector ``model`` made of the same text before passages existed: its old row
        goes and its passages come in this one transaction.

        The event rows are marked in one ``UPDATE`` of plain columns (which also picks
        the rows, atomically with the check); the vectors are appended from Arrow.
        """
        self._write()
        if not len(ids):
            return []
        matrix = np.asarray(vectors, dtype=np.float32)
        per_event = list(spans) if spans is not None else [None] * len(ids)
        counts = [len(s) if s else 1 for s in per_event]
        data = pa.table(
            {
                "id": pa.array(list(ids), pa.string()),
                "content": pa.array(list(texts), pa.string()),
                "passages": pa.array(counts, pa.int32()),
            }
        )
        with self.store.registered("_nbmemory_vectors", data) as view:
            written = self._mark(view, model)
        if not written:
            return []
        position = {event_id: i for i, event_id in enumerate(ids)}
        if spans is None or not any(per_event):  # one vector per event: whole columns
            group = Vectors(
                model,
                [w[0] for w in written],
                [w[1] for w in written],
                matrix[[position[w[0]] for w in written]],
            )
            replaced = [w[0] for w in written if w[2]]
            if replaced:
                self.drop(replaced)
            self.append(group)
            self.store.changed(Change(vectors=[group], unvectored=replaced))
            return list(group.ids)
        first_row = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        rows: list[int] = []
        row_ids: list[str] = []
        namespaces: list[str] = []
        passages: list[int | None] = []
        row_spans: list[tuple[int, int] | None] = []
        for event_id, namespace, _ in written:
            i = position[event_id]
            chosen = per_event[i]
            for k in range(counts[i]):
                rows.append(int(first_row[i]) + k)
                row_ids.append(event_id)
                namespaces.append(namespace)
                passages.append(k if chosen else None)
                row_spans.append((chosen[k][0], chosen[k][1]) if chosen else None)
        replaced = [event_id for event_id, _, again in written if again]
        if replaced:
            self.drop(replaced)
        split = any(p is not None for p in passages)
        group = Vectors(
            model,
            row_ids,
            namespaces,
            matrix[rows],
            passages if split else None,
            row_spans if split else None,
        )
        self.append(group)
        self.store.changed(Change(vectors=[group], unvectored=replaced))
        return list(dict.fromkeys(row_ids))

    def _mark(self, view: str, model: str) -> list[tuple[str, str, bool]]:
        """Mark the events of ``view`` (id, content, passages) that still hold that text
        and have no vector as embedded by ``model`` (or, split into several passages,
        hold only ``model``'s one whole-text vector); returns their (id, namespace,
        whether an old vector is replaced).

        The rows are picked by a ``SELECT`` and marked by an ``UPDATE`` with the same
        condition, in the caller's transaction: ``UPDATE ... RETURNING`` is DuckDB's
        slow path (~30 µs a row, and its commit as much again, against ~2 µs)."""
        condition = (
            "events.id = v.id AND events.content = v.content AND (events.embedding_model IS NULL"
            " OR (v.passages > 1 AND events.embedding_model = ? AND events.id NOT IN"
            f" (SELECT x.id FROM event_vectors x WHERE x.passage IS NOT NULL"
            f" AND x.id IN (SELECT id FROM {view}))))"
        )
        rows: list[tuple[str, str, bool]] = self.store.run(
            "SELECT DISTINCT events.id, events.namespace, events.embedding_model IS NOT NULL"
            f" FROM events, {view} v WHERE {condition}",
            [model],
        )
        if rows:
            self.store.statements.update(
                "events",
                "embedding_model = ?, embedding_error = NULL",
                [model],
                condition,
                [model],
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


def vector_rows(group: Vectors) -> pa.Table:
    """``group`` as rows of ``event_vectors`` (an Arrow table)."""
    matrix = np.asarray(group.matrix, dtype=np.float32)
    none: list[int | None] = [None] * len(group.ids)
    spans = group.spans or [None] * len(group.ids)
    starts = [None if span is None else span[0] for span in spans]
    stops = [None if span is None else span[1] for span in spans]
    return pa.table(
        {
            "id": pa.array(group.ids, pa.string()),
            "namespace": pa.array(group.namespaces, pa.string()),
            "model": pa.array([group.model] * len(group.ids), pa.string()),
            "embedding": pa.FixedSizeListArray.from_arrays(
                pa.array(matrix.reshape(-1)), matrix.shape[1]
            ).cast(pa.list_(pa.float32())),
            "passage": pa.array(group.passages or none, pa.int32()),
            "span_start": pa.array(starts, pa.int32()),
            "span_stop": pa.array(stops, pa.int32()),
        },
        schema=EVENT_VECTORS.arrow_schema,
    )
