"""``store.events``: every statement on the ``events`` table.

Reads return records (dicts), DataFrames or Arrow tables; writes record what they
changed in the open transaction (:class:`~.changes.Change`) so the caches follow.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from .arriving_vectors import embedded_vectors, mark_embedded
from .changes import Change, TextRow
from .clauses import ORDERINGS, placeholders, to_epoch_us, where, where_clause
from .schema import EVENTS, READ_COLUMNS
from .sessions import forget_context_ids
from .table import TableObject

_READ = ", ".join(READ_COLUMNS)
_TEXT_COLUMNS = ("id", "namespace", "session_id", "content", "created_at", "seq")
_TEXT_ROW = ", ".join(_TEXT_COLUMNS)
#: A hash of what a keyword index reads from a row (a saved index is checked against it).
_TEXT_HASH = "hash(id, namespace, session_id, content, created_at, seq)"
#: After (created_at as epoch microseconds, seq) given as parameters, in the order
#: ``ORDER BY created_at, seq`` reads (a missing time last).
_AFTER = (
    "created_at IS NULL OR created_at > make_timestamp(?::BIGINT)"
    " OR (created_at = make_timestamp(?::BIGINT) AND seq > ?)"
)
#: created_at as epoch microseconds, a missing one as the parameter (:data:`NO_TIME`).
_CREATED_US = "coalesce(epoch_us(created_at), ?)"
#: The order of an event without a time in the keyword index: before every dated one.
NO_TIME = -(2**62)
_TIMESTAMPS = frozenset({"created_at", "updated_at", "consolidated_at"})
_SINGLE_COLUMNS = EVENTS.names
_READ_SET = frozenset(READ_COLUMNS)
# Times travel as epoch microseconds: binding a datetime parameter into a
# TIMESTAMP column costs ~3 ms in DuckDB 2.0, the integer ~0.1 ms.
_EPOCH_US = {c: "make_timestamp(?)" for c in _SINGLE_COLUMNS if c in _TIMESTAMPS}


class EventsTable(TableObject):
    table = EVENTS

    # -- reads ------------------------------------------------------------------------
    def get(self, event_id: str, namespace: str, *, kinds: Sequence[str] | None = None) -> Any:
        """One event's record (with ``has_embedding``), or None."""
        sql = f"SELECT {_READ}, embedding_model IS NOT NULL AS has_embedding FROM events"
        sql += " WHERE id = ? AND namespace = ?"
        params: list[Any] = [event_id, namespace]
        if kinds is not None:
            sql += " AND kind IN (SELECT unnest(?::VARCHAR[]))"
            params.append(list(kinds))
        rows = self.store.run(sql, params, "records")
        return rows[0] if rows else None

    def frame(
        self,
        *,
        namespace: str | None = None,
        filters: dict[str, Any] | None = None,
        since: Any = None,
        until: Any = None,
        ids: Iterable[str] | None = None,
        order: str = "created_at, id",
        limit: int | None = None,
        offset: int = 0,
        with_embedding: bool = False,
    ) -> pd.DataFrame:
        """Events as a DataFrame, filtered, ordered and paged."""
        if order not in ORDERINGS:
            raise ValueError(f"unsupported ordering {order!r}")
        clauses, params = where_clause(
            namespace=namespace, filters=filters, since=since, until=until, ids=ids
        )
        source = "events"
        if with_embedding:  # each event with the vector of its embedding_model, if any
            source = (  # (a long text's first passage; its passages: ``store.vectors.passages``)
                f"(SELECT {', '.join('e.' + c for c in READ_COLUMNS)}, e.seq, v.embedding"
                " FROM events e"
                " LEFT JOIN event_vectors v ON v.id = e.id AND v.model = e.embedding_model"
                " AND coalesce(v.passage, 0) = 0)"
            )
        columns = [*READ_COLUMNS, "embedding"] if with_embedding else READ_COLUMNS
        sql = f"SELECT {', '.join(columns)} FROM {source}{where(clauses)} ORDER BY {order}"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        if offset:
            sql += " OFFSET ?"
            params.append(int(offset))
        frame: pd.DataFrame = self.store.run(sql, params, "df")
        return frame

    def rows(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        """The records of these ids, in no particular order (missing ids are skipped)."""
        if not ids:
            return []
        rows: list[dict[str, Any]] = self.store.run(
            f"SELECT {_READ} FROM events WHERE id IN ({placeholders(ids)})", list(ids), "records"
        )
        return rows

    def ids(
        self,
        *,
        namespace: str | None = None,
        filters: dict[str, Any] | None = None,
        since: Any = None,
        until: Any = None,
        order: str = "created_at, id",
        limit: int | None = None,
    ) -> list[str]:
        """Ids of the events passing the filters, in ``order``."""
        if order not in ORDERINGS:
            raise ValueError(f"unsupported ordering {order!r}")
        clauses, params = where_clause(
            namespace=namespace, filters=filters, since=since, until=until
        )
        sql = f"SELECT id FROM events{where(clauses)} ORDER BY {order}"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [row[0] for row in self.store.run(sql, params)]

    def namespaces_of(self, ids: Iterable[str]) -> dict[str, str]:
        """id -> namespace of those of ``ids`` that exist."""
        wanted = list(ids)
        if not wanted:
            return {}
        return dict(
            self.store.run(
                "SELECT id, namespace FROM events WHERE id IN (SELECT unnest(?::VARCHAR[]))",
                [wanted],
            )
        )

    def ids_with_prefix(self, namespace: str, prefix: str) -> set[str]:
        rows = self.store.run(
            "SELECT id FROM events WHERE namespace = ? AND starts_with(id, ?)", [namespace, prefix]
        )
        return {row[0] for row in rows}

    def recent(self, namespace: str, session_id: str, limit: int) -> list[dict[str, Any]]:
        """The last ``limit`` events of one session, oldest first."""
        rows: list[dict[str, Any]] = self.store.run(
            f"SELECT {_READ} FROM ("
            "  SELECT * FROM events WHERE namespace = ? AND session_id = ?"
            "   ORDER BY created_at DESC, seq DESC LIMIT ?"
            ") ORDER BY created_at, seq",
            [namespace, session_id, int(limit)],
            "records",
        )
        return rows

    def by_importance(
        self, namespace: str, threshold: float, limit: int, *, below: bool = False
    ) -> list[dict[str, Any]]:
        """The most important events at or above ``threshold`` (or just below it)."""
        op = "<" if below else ">="
        rows: list[dict[str, Any]] = self.store.run(
            f"SELECT {_READ} FROM events WHERE namespace = ? AND importance {op} ?"
            " ORDER BY importance DESC, created_at DESC, id LIMIT ?",
            [namespace, threshold, int(limit)],
            "records",
        )
        return rows

    def ids_at_least(self, namespace: str, threshold: float) -> list[str]:
        """Ids of the events with importance >= ``threshold`` (the salient ones)."""
        rows = self.store.run(
            "SELECT id FROM events WHERE namespace = ? AND importance >= ?",
            [namespace, threshold],
        )
        return [row[0] for row in rows]

    def containing(
        self,
        text: str,
        *,
        namespace: str,
        filters: dict[str, Any],
        since: Any,
        until: Any,
        limit: int,
        offset: int,
        order: str = "created_at DESC, id",
    ) -> pd.DataFrame:
        """Events whose content contains ``text`` (case-insensitive), newest first (or
        in ``order``: ``created_at`` or ``updated_at``, ``ASC`` or ``DESC``, then id)."""
        if order not in ORDERINGS:
            raise ValueError(order)
        clauses, params = where_clause(
            namespace=namespace, filters=filters, since=since, until=until
        )
        clauses.append("content ILIKE ? ESCAPE '\\'")
        params.append("%" + _escape_like(text) + "%")
        frame: pd.DataFrame = self.store.run(
            f"SELECT {_READ} FROM events{where(clauses)} ORDER BY {order} LIMIT ? OFFSET ?",
            [*params, int(limit), int(offset)],
            "df",
        )
        return frame

    def text_table(self) -> pa.Table:
        """Events with text for a keyword index built in bulk, oldest first: id,
        namespace, session_id, content, created (epoch microseconds), seq and the row's
        hash (:meth:`text_hashes`)."""
        table: pa.Table = self.store.run(
            f"SELECT id, namespace, session_id, content, {_CREATED_US} AS created, seq,"
            f" {_TEXT_HASH} AS h FROM events WHERE content IS NOT NULL ORDER BY created_at, seq",
            [NO_TIME],
            "arrow",
        )
        return table

    def text_hashes(self) -> tuple[np.ndarray, np.ndarray]:
        """(seq, hash) of every event with text, oldest first: a saved keyword index is
        used only while the table still starts with the rows it was built from."""
        table: pa.Table = self.store.run(
            f"SELECT seq, {_TEXT_HASH} AS h FROM events WHERE content IS NOT NULL"
            " ORDER BY created_at, seq",
            None,
            "arrow",
        )
        return (
            table.column(0).to_numpy().astype(np.int64),
            table.column(1).to_numpy().astype(np.uint64),
        )

    def text_rows_after(self, created_us: int, seq: int) -> list[TextRow]:
        """(id, namespace, session_id, content, created_at, seq) of the events with text
        after the one at (``created_us``, ``seq``) in the order of :meth:`text_hashes`
        (events without a time come last), oldest first."""
        rows: list[TextRow] = self.store.run(
            f"SELECT {_TEXT_ROW} FROM events WHERE content IS NOT NULL AND ({_AFTER})"
            " ORDER BY created_at, seq",
            [created_us, created_us, seq],
        )
        return rows

    def text_count_after(self, created_us: int, seq: int) -> tuple[int, int]:
        """(events with text, those of them after (``created_us``, ``seq``)): whether
        every event a saved keyword index lacks comes after its last one."""
        rows = self.store.run(
            f"SELECT count(*), count(*) FILTER ({_AFTER}) FROM events WHERE content IS NOT NULL",
            [created_us, created_us, seq],
        )
        return int(rows[0][0]), int(rows[0][1])

    def text_rows_of(self, seqs: Sequence[int]) -> list[TextRow]:
        """(id, namespace, session_id, content, created_at, seq) of the events with text
        and these ``seq`` values, oldest first."""
        rows: list[TextRow] = self.store.run(
            f"SELECT {_TEXT_ROW} FROM events WHERE content IS NOT NULL"
            " AND seq IN (SELECT unnest(?::BIGINT[])) ORDER BY created_at, seq",
            [[int(s) for s in seqs]],
        )
        return rows

    def salience_frame(self, namespace: str, threshold: float, model: str) -> pd.DataFrame:
        """Every event's importance, whether it is salient and whether ``model`` embedded it."""
        frame: pd.DataFrame = self.store.run(
            "SELECT id, session_id, role, kind, content, importance,"
            " importance >= ? AS salient,"
            " coalesce(embedding_model = ?, false) AS embedded, created_at"
            " FROM events WHERE namespace = ? ORDER BY created_at, id",
            [threshold, model, namespace],
            "df",
        )
        return frame

    def counts(self, model: str | None = None) -> pd.DataFrame:
        """Events per namespace, session and kind, with the embedding backlog and how
        many carry a vector of another model than ``model`` (``other_model``: another
        ``Memory`` of the file embedded them; vector search does not see them until
        they are re-embedded)."""
        frame: pd.DataFrame = self.store.run(
            "SELECT namespace, session_id, kind, count(*) AS events,"
            " count(embedding_model) AS embedded,"
            " count(*) FILTER (WHERE embedding_model <> ?) AS other_model,"
            " count(*) FILTER (WHERE embedding_model IS NULL AND embedding_error IS NULL"
            "   AND content IS NOT NULL) AS pending,"
            " count(embedding_error) AS failed,"
            " min(created_at) AS first_at, max(created_at) AS last_at"
            " FROM events GROUP BY ALL ORDER BY namespace, session_id, kind",
            [model or ""],
            "df",
        )
        return frame

    def without_text(self) -> int:
        """How many events have no text to embed (tool-call turns)."""
        rows = self.store.run("SELECT count(*) FROM events WHERE content IS NULL")
        return int(rows[0][0])

    def unconsolidated_sessions(
        self, namespace: str, cutoff: dt.datetime, session_id: str | None = None
    ) -> list[str]:
        """Sessions with messages older than ``cutoff`` not yet consolidated."""
        sql = (
            "SELECT DISTINCT session_id FROM events WHERE namespace = ? AND created_at < ?"
            " AND kind = 'message' AND consolidated_at IS NULL AND content IS NOT NULL"
        )
        params: list[Any] = [namespace, cutoff]
        if session_id is not None:
            sql += " AND session_id = ?"
            params.append(session_id)
        return [row[0] for row in self.store.run(sql + " ORDER BY session_id", params)]

    def unconsolidated(
        self, namespace: str, session_id: str, cutoff: dt.datetime, columns: Sequence[str]
    ) -> list[dict[str, Any]]:
        """A session's messages older than ``cutoff`` not yet consolidated, in order."""
        if set(columns) - set(READ_COLUMNS):
            raise ValueError(columns)
        rows: list[dict[str, Any]] = self.store.run(
            f"SELECT {', '.join(columns)} FROM events WHERE namespace = ?"
            " AND session_id = ? AND created_at < ? AND kind = 'message'"
            " AND consolidated_at IS NULL AND content IS NOT NULL ORDER BY created_at, seq",
            [namespace, session_id, cutoff],
            "records",
        )
        return rows

    def metadata_of_kind(self, namespace: str, kind: str) -> list[tuple[str, Any]]:
        """(id, metadata) of the namespace's events of one kind."""
        rows: list[tuple[str, Any]] = self.store.run(
            "SELECT id, metadata FROM events WHERE namespace = ? AND kind = ?", [namespace, kind]
        )
        return rows

    # -- writes -----------------------------------------------------------------------
    def insert(
        self,
        rows: Sequence[dict[str, Any]],
        *,
        vectors: dict[str, tuple[str, np.ndarray]] | None = None,
        matrix: tuple[str, np.ndarray] | None = None,
        spans: dict[str, list[tuple[int, int]]] | None = None,
        bulk: bool = False,
    ) -> list[dict[str, Any]]:
        """Insert event rows (from ``build_row``); returns the stored records.

        Rows may arrive embedded: ``vectors`` maps an id to ``(model, vector)``
        (imports; for an id of ``spans``, a long text's passages: one row of the
        vector per passage, whose characters ``spans`` gives), or ``matrix`` is
        ``(model, array)`` with one row per event (bulk loads).  A row whose text redaction changed loses its vector.  One row
        without a vector takes a plain parameterised INSERT; more take one Arrow
        insert.  Rows with text and no vector (and no recorded failure) are queued
        for embedding when the transaction commits.
        """
        self._write()
        if not rows:
            return []
        columns = getattr(rows, "columns", None)
        if columns is not None and not vectors and matrix is None:
            return self._insert_built(rows, columns)
        safe = self._redact_rows(rows)
        embedded = []
        if vectors or matrix is not None:
            kept = np.array(
                [
                    a is b or a.get("content") == b.get("content")
                    for a, b in zip(rows, safe, strict=True)
                ]
            )
            embedded = embedded_vectors(safe, kept, vectors or {}, matrix, spans)
        if len(safe) == 1 and not embedded and not bulk:
            values = {
                c: to_epoch_us(safe[0].get(c)) if c in _TIMESTAMPS else safe[0].get(c)
                for c in _SINGLE_COLUMNS
            }
            returned = self.store.statements.insert(
                "events", values, returning=("id", "seq"), placeholders=_EPOCH_US
            )
        else:
            data = EVENTS.to_arrow(safe)
            if embedded:
                data = mark_embedded(data, embedded)
            returned = self.store.statements.insert_arrow("events", data, returning=("id", "seq"))
            for group in embedded:
                self.store.vectors.append(group)
        seq: dict[str, int] = dict(returned)
        model_of = {i: g.model for g in embedded for i in g.ids}
        records: list[dict[str, Any]] = []
        for row in safe:
            record = dict(row) if row.keys() == _READ_SET else {c: row.get(c) for c in READ_COLUMNS}
            record["seq"] = seq[row["id"]]
            record["embedding_model"] = model_of.get(row["id"])
            records.append(record)
        change = Change(added=records, bulk=bulk or len(records) > 1, vectors=embedded)
        change.to_embed = [
            (r["id"], r["content"])
            for r in records
            if r["content"] and r["embedding_error"] is None and r["id"] not in model_of
        ]
        self.store.changed(change)
        return records

    def _insert_built(
        self, rows: Sequence[dict[str, Any]], columns: dict[str, list[Any]]
    ) -> list[dict[str, Any]]:
        """Insert rows built a column at a time (:class:`~nbmemory.event_columns.BuiltRows`,
        none embedded): redacted and written a column at a time.  The rows become the
        stored records (they are this call's own)."""
        columns = dict(columns)
        redactor = self.store.redactor
        suspects = self.store.redaction_suspects
        for name in EVENTS.user_text:
            values = columns.get(name)
            if redactor is None or values is None:
                continue
            where = [i for i, value in enumerate(values) if isinstance(value, str)]
            if suspects is not None:  # one search of the column finds the few to redact
                where = [where[k] for k in suspects([values[i] for i in where])]
            copied = False
            for index in where:
                value = values[index]
                text, count = redactor(value)
                if count or text != value:
                    if not copied:  # the caller's column stays as it was given
                        values = columns[name] = list(values)
                        copied = True
                    values[index] = rows[index][name] = text
                if count:
                    self.store.count_redactions(rows[index]["namespace"], count)
        data = _arrow_of(columns, len(rows))
        seq: dict[str, int] = dict(
            self.store.statements.insert_arrow("events", data, returning=("id", "seq"))
        )
        for row in rows:
            row["seq"] = seq[row["id"]]
        records = list(rows)
        change = Change(added=records, bulk=True)
        change.to_embed = [(r["id"], r["content"]) for r in records if r["content"]]
        self.store.changed(change)
        return records

    def update_text(
        self,
        event_id: str,
        namespace: str,
        *,
        now: dt.datetime,
        content: str | None = None,
        metadata: str | None = None,
        kinds: Sequence[str] | None = None,
    ) -> bool:
        """Change content and/or metadata; changed content loses its vector and is re-queued."""
        self._write()
        sets = ["updated_at = ?"]
        params: list[Any] = [now]
        safe = self._redact({"content": content, "metadata": metadata, "namespace": namespace})
        content, metadata = safe["content"], safe["metadata"]
        if content is not None:
            sets += ["content = ?", "embedding_model = NULL", "embedding_error = NULL"]
            params.append(content)
        if metadata is not None:
            sets.append("metadata = ?")
            params.append(metadata)
        condition = "id = ? AND namespace = ?"
        where_params: list[Any] = [event_id, namespace]
        if kinds is not None:
            condition += " AND kind IN (SELECT unnest(?::VARCHAR[]))"
            where_params.append(list(kinds))
        rows = self.store.statements.update(
            "events", ", ".join(sets), params, condition, where_params, returning=_TEXT_COLUMNS
        )
        if not rows:
            return False
        if content is not None:
            self.store.vectors.drop([event_id])
        change = Change(updated=[event_id])
        if content is not None:
            change.retexted = list(rows)
            change.to_embed = [(event_id, content)]
        self.store.changed(change)
        return True

    def delete(
        self,
        ids: Sequence[str] | None = None,
        *,
        namespace: str | None = None,
        filters: dict[str, Any] | None = None,
        kinds: Sequence[str] | None = None,
    ) -> list[str]:
        """Delete events by id and/or filters (within ``namespace``); returns the ids deleted.

        The archived events (compacted by consolidation) the same conditions match are
        deleted with them, vectors too, and their ids returned with the others: an
        erasure leaves nothing of a scope in the archive."""
        self._write()
        clauses, params = where_clause(namespace=namespace, filters=filters, ids=ids)
        if kinds is not None:
            clauses.append("kind IN (SELECT unnest(?::VARCHAR[]))")
            params.append(list(kinds))
        if not clauses:
            raise ValueError("refusing to delete every event without a condition")
        deleted = [
            row[0]
            for row in self.store.statements.delete(
                "events", " AND ".join(clauses), params, returning=("id",)
            )
        ]
        if deleted:
            self.store.vectors.drop(deleted)
            forget_context_ids(self.store, deleted)  # no id left in a session's state
            self.store.changed(Change(deleted=deleted))
        return deleted + self.store.archive.delete_where(" AND ".join(clauses), params)

    def mark_consolidated(self, namespace: str, ids: Sequence[str], now: dt.datetime) -> list[str]:
        """Set ``consolidated_at`` on events not yet consolidated; returns those marked."""
        self._write()
        marked = [
            row[0]
            for row in self.store.statements.update(
                "events",
                "consolidated_at = ?",
                [now],
                "namespace = ? AND id IN (SELECT unnest(?::VARCHAR[])) AND consolidated_at IS NULL",
                [namespace, list(ids)],
                returning=("id",),
            )
        ]
        if marked:
            self.store.changed(Change(updated=marked))
        return marked


def _arrow_of(columns: dict[str, list[Any]], count: int) -> pa.Table:
    """``columns`` (name -> one value per row; a column not there is NULL) as an Arrow
    table of ``events``."""
    arrays = [
        pa.nulls(count, c.type)
        if columns.get(c.name) is None
        else pa.array(columns[c.name], c.type)
        for c in EVENTS.columns
    ]
    return pa.Table.from_arrays(arrays, schema=EVENTS.arrow_schema)


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
