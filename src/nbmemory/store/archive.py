"""``store.archive``: every statement on the archive of compacted events.

The Rust agent layer's consolidation compresses old conversations into summaries
"reducing storage and context-window use".  A consolidation that compacts moves
the events it summarised out of ``events`` (and their vectors and passages out of
``event_vectors``) into ``event_archive`` and ``event_vector_archive``, in the
transaction that stores the summary: searches, contexts, working memory and the
indexes then see the summary and not the originals.  :meth:`EventArchive.restore`
moves them back, with their ``seq`` (their place in the conversation) and
vectors, until the archive's retention (or an erasure) deletes them.

Rows travel as Arrow tables through the backend's own inserts
(:mod:`.statements`), so the same code runs on a file and on a lake.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from .changes import Change, Vectors
from .schema import EVENT_ARCHIVE, EVENT_VECTORS, EVENTS, READ_COLUMNS
from .sessions import forget_context_ids
from .table import TableObject

_EVENT_COLUMNS = ", ".join(EVENTS.names)
_VECTOR_COLUMNS = ", ".join(EVENT_VECTORS.names)
_BY_IDS = "namespace = ? AND id IN (SELECT unnest(?::VARCHAR[]))"
#: What a listing of the archive shows (the vectors stay in their table).
_LISTED = ", ".join([*READ_COLUMNS, "summary_id", "archived_at"])


class EventArchive(TableObject):
    """``event_archive`` and ``event_vector_archive``: compacted events, restorable."""

    table = EVENT_ARCHIVE

    # -- reads ------------------------------------------------------------------------
    def frame(self, namespace: str | None, summary_id: str | None = None) -> pd.DataFrame:
        """The archived events (of one summary), oldest first."""
        clauses, params = [], []
        if namespace is not None:
            clauses.append("namespace = ?")
            params.append(namespace)
        if summary_id is not None:
            clauses.append("summary_id = ?")
            params.append(summary_id)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        frame: pd.DataFrame = self.store.run(
            f"SELECT {_LISTED} FROM event_archive{where} ORDER BY created_at, seq", params, "df"
        )
        return frame

    def older_than(self, cutoff: dt.datetime) -> dict[str, list[str]]:
        """namespace -> ids of the rows archived before ``cutoff`` (what retention removes)."""
        out: dict[str, list[str]] = {}
        for namespace, event_id in self.store.run(
            "SELECT namespace, id FROM event_archive WHERE archived_at < ? ORDER BY namespace, id",
            [cutoff],
        ):
            out.setdefault(namespace, []).append(event_id)
        return out

    # -- writes -----------------------------------------------------------------------
    def move(
        self, namespace: str, ids: Sequence[str], summary_id: str, at: dt.datetime
    ) -> list[str]:
        """Move these events, not yet consolidated, and their vectors into the archive
        (``consolidated_at`` = ``archived_at`` = ``at``); returns the ids moved."""
        self._write()
        params = [namespace, list(ids)]
        rows: pa.Table = self.store.run(
            f"SELECT {_EVENT_COLUMNS}, seq FROM events WHERE {_BY_IDS}"
            " AND consolidated_at IS NULL ORDER BY created_at, seq",
            params,
            "arrow",
        )
        if not rows.num_rows:
            return []
        moved = rows.column("id").to_pylist()
        stamp = pa.array([at] * rows.num_rows, pa.timestamp("us"))
        rows = rows.set_column(
            rows.schema.get_field_index("consolidated_at"), "consolidated_at", stamp
        )
        rows = rows.append_column("summary_id", pa.array([summary_id] * rows.num_rows, pa.string()))
        rows = rows.append_column("archived_at", stamp)
        self.store.statements.insert_arrow("event_archive", rows)
        vectors: pa.Table = self.store.run(
            f"SELECT {_VECTOR_COLUMNS} FROM event_vectors WHERE {_BY_IDS}",
            [namespace, moved],
            "arrow",
        )
        if vectors.num_rows:
            self.store.statements.insert_arrow("event_vector_archive", vectors)
        deleted = [
            row[0]
            for row in self.store.statements.delete(
                "events", _BY_IDS, [namespace, moved], returning=("id",)
            )
        ]
        self.store.vectors.drop(deleted)
        forget_context_ids(self.store, deleted)  # a later erasure of the archive finds none
        self.store.changed(Change(deleted=deleted))
        return deleted

    def restore(
        self, namespace: str, *, summary_id: str | None = None, ids: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        """Move archived events (of one summary, or these ids) back into ``events`` with
        their place (``seq``) and vectors; returns their records, oldest first."""
        self._write()
        clauses, params = ["namespace = ?"], list[Any]([namespace])
        if summary_id is not None:
            clauses.append("summary_id = ?")
            params.append(summary_id)
        if ids is not None:
            clauses.append("id IN (SELECT unnest(?::VARCHAR[]))")
            params.append(list(ids))
        where = " AND ".join(clauses)
        rows: pa.Table = self.store.run(
            f"SELECT {_EVENT_COLUMNS}, seq FROM event_archive WHERE {where}"
            " ORDER BY created_at, seq",
            params,
            "arrow",
        )
        if not rows.num_rows:
            return []
        restored = rows.column("id").to_pylist()
        vectors: pa.Table = self.store.run(
            f"SELECT {_VECTOR_COLUMNS} FROM event_vector_archive WHERE {_BY_IDS}"
            " ORDER BY id, passage",
            [namespace, restored],
            "arrow",
        )
        self.store.statements.insert_arrow("events", rows)
        groups = _vector_groups(vectors)
        for group in groups:
            self.store.vectors.append(group)
        self._delete(namespace, restored)
        records = rows.to_pylist()
        change = Change(added=records, bulk=True, vectors=groups)
        change.to_embed = [  # archived before its vector was written: it waits again
            (r["id"], r["content"])
            for r in records
            if r["content"] and r["embedding_error"] is None and r["embedding_model"] is None
        ]
        self.store.changed(change)
        return records

    def delete_where(self, where_sql: str, params: Sequence[Any]) -> list[str]:
        """Delete the archived events matching an ``events`` condition (erasure: the
        conditions that deleted a scope's events delete its archived ones too)."""
        self._write()
        ids = [
            row[0]
            for row in self.store.statements.delete(
                "event_archive", where_sql, params, returning=("id",)
            )
        ]
        if ids:
            self.store.statements.delete(
                "event_vector_archive", "id IN (SELECT unnest(?::VARCHAR[]))", [ids]
            )
        return ids

    def _delete(self, namespace: str, ids: Sequence[str]) -> None:
        self.store.statements.delete("event_archive", _BY_IDS, [namespace, list(ids)])
        self.store.statements.delete("event_vector_archive", _BY_IDS, [namespace, list(ids)])

    def delete_ids(self, namespace: str, ids: Sequence[str]) -> None:
        """Delete these archived events and their vectors (retention)."""
        self._write()
        if ids:
            self._delete(namespace, ids)


def _vector_groups(vectors: pa.Table) -> list[Vectors]:
    """Archived vector rows as one :class:`Vectors` group per model."""
    groups: list[Vectors] = []
    if not vectors.num_rows:
        return groups
    data = vectors.to_pydict()
    for model in sorted(set(data["model"])):
        rows = [i for i, m in enumerate(data["model"]) if m == model]
        passages = [data["passage"][i] for i in rows]
        spans = [
            None
            if data["span_start"][i] is None
            else (int(data["span_start"][i]), int(data["span_stop"][i]))
            for i in rows
        ]
        groups.append(
            Vectors(
                model=model,
                ids=[data["id"][i] for i in rows],
                namespaces=[data["namespace"][i] for i in rows],
                matrix=np.asarray([data["embedding"][i] for i in rows], dtype=np.float32),
                passages=None if all(p is None for p in passages) else passages,
                spans=None if all(s is None for s in spans) else spans,
            )
        )
    return groups
