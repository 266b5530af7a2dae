"""``store.facts``: facts ``(namespace, category, key) -> value`` and their history."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from .schema import FACT_HISTORY, FACTS
from .table import TableObject
from .vectors import cosine_sql

FACT_COLUMNS = ["id", "category", "key", "value", "source", "created_at", "updated_at"]
HISTORY_COLUMNS = ["fact_id", "category", "key", "value", "source", "valid_from", "superseded_at"]


class FactsTable(TableObject):
    table = FACTS

    # -- reads ------------------------------------------------------------------------
    def get(self, namespace: str, category: str, key: str) -> dict[str, Any] | None:
        rows = self.store.run(
            f"SELECT {', '.join(FACT_COLUMNS)} FROM facts"
            " WHERE namespace = ? AND category = ? AND key = ?",
            [namespace, category, key],
            "records",
        )
        return rows[0] if rows else None

    def frame(self, namespace: str, category: str | None = None) -> pd.DataFrame:
        """Current facts of a namespace (one category, or all), by category then key."""
        sql = f"SELECT {', '.join(FACT_COLUMNS)} FROM facts WHERE namespace = ?"
        params: list[Any] = [namespace]
        if category is not None:
            sql += " AND category = ?"
            params.append(category)
        frame: pd.DataFrame = self.store.run(sql + " ORDER BY category, key", params, "df")
        return frame

    def history(
        self, namespace: str, category: str | None = None, key: str | None = None
    ) -> pd.DataFrame:
        """Replaced (or deleted) values, newest supersession first."""
        sql = f"SELECT {', '.join(HISTORY_COLUMNS)} FROM fact_history WHERE namespace = ?"
        params: list[Any] = [namespace]
        for name, value in (("category", category), ("key", key)):
            if value is not None:
                sql += f" AND {name} = ?"
                params.append(value)
        frame: pd.DataFrame = self.store.run(
            sql + " ORDER BY superseded_at DESC, valid_from DESC", params, "df"
        )
        return frame

    def unembedded(self, namespace: str, model: str) -> list[tuple[int, str, str, str]]:
        """(id, category, key, value) of facts without a vector of ``model``."""
        rows: list[tuple[int, str, str, str]] = self.store.run(
            "SELECT id, category, key, value FROM facts WHERE namespace = ?"
            " AND (embedding IS NULL OR embedding_model IS DISTINCT FROM ?) ORDER BY id",
            [namespace, model],
        )
        return rows

    def similar(
        self,
        vector: np.ndarray,
        model: str,
        *,
        namespace: str,
        limit: int,
        threshold: float | None = None,
        category: str | None = None,
    ) -> pd.DataFrame:
        """Facts most similar to ``vector`` (cosine), best first, with ``similarity``."""
        sql = (
            f"SELECT * FROM (SELECT {', '.join(FACT_COLUMNS)},"
            f" {cosine_sql('embedding')} AS similarity FROM facts"
            " WHERE namespace = ? AND embedding_model = ?"
        )
        params: list[Any] = [np.asarray(vector, dtype=np.float32).tolist(), namespace, model]
        if category is not None:
            sql += " AND category = ?"
            params.append(category)
        sql += ") WHERE similarity IS NOT NULL"
        if threshold is not None:
            sql += " AND similarity >= ?"
            params.append(threshold)
        sql += " ORDER BY similarity DESC, updated_at DESC LIMIT ?"
        frame: pd.DataFrame = self.store.run(sql, [*params, int(limit)], "df")
        return frame

    def keys(self) -> set[tuple[int, str, str, str]]:
        """(id, namespace, category, key) of every fact (to skip duplicates on import)."""
        return set(self.store.run("SELECT id, namespace, category, key FROM facts"))

    # -- writes -----------------------------------------------------------------------
    def upsert(
        self,
        namespace: str,
        category: str,
        key: str,
        value: str,
        source: str,
        now: dt.datetime,
    ) -> tuple[int, str]:
        """Insert or replace one fact; returns (id, ``created``/``updated``/``unchanged``).

        A replaced value goes to ``fact_history`` with the time it was superseded;
        the same value only refreshes the source and ``updated_at``.
        """
        self._write()
        self.store.claim()
        safe = self._redact({"category": category, "key": key, "value": value}, namespace)
        category, key, value = safe["category"], safe["key"], safe["value"]
        rows = self.store.run(
            "SELECT id, value, source, updated_at FROM facts"
            " WHERE namespace = ? AND category = ? AND key = ?",
            [namespace, category, key],
        )
        if not rows:
            row: dict[str, Any] = {"namespace": namespace, "category": category, "key": key}
            row.update(value=value, source=source, created_at=now, updated_at=now)
            new = self.store.statements.insert("facts", row, returning=("id",))
            return int(new[0][0]), "created"
        fact_id, old_value, old_source, valid_from = rows[0]
        if old_value == value:
            self.store.statements.update(
                "facts", "source = ?, updated_at = ?", [source, now], "id = ?", [fact_id]
            )
            return int(fact_id), "unchanged"
        self._archive(fact_id, namespace, category, key, old_value, old_source, valid_from, now)
        self.store.statements.update(
            "facts",
            "value = ?, source = ?, updated_at = ?, embedding = NULL, embedding_model = NULL",
            [value, source, now],
            "id = ?",
            [fact_id],
        )
        return int(fact_id), "updated"

    def delete(
        self, namespace: str, category: str, key: str, now: dt.datetime, *, history: bool = False
    ) -> int | None:
        """Remove a fact, keeping its last value in history (unless ``history``: then it
        is not kept, see :meth:`erase_history`); returns its id, or None."""
        self._write()
        rows = self.store.statements.delete(
            "facts",
            "namespace = ? AND category = ? AND key = ?",
            [namespace, category, key],
            returning=("id", "value", "source", "updated_at"),
        )
        if not history:
            for fact_id, value, source, valid_from in rows:
                self._archive(fact_id, namespace, category, key, value, source, valid_from, now)
        return int(rows[0][0]) if rows else None

    def erase_history(self, namespace: str, category: str, key: str) -> list[int]:
        """Delete every earlier value of ``(category, key)`` (of the fact and of any fact
        deleted before under that name); returns the fact id of each row deleted."""
        self._write()
        where = "namespace = ? AND category = ? AND key = ?"
        params = [namespace, category, key]
        ids = [
            int(r[0])
            for r in self.store.run(f"SELECT fact_id FROM fact_history WHERE {where}", params)
        ]
        if ids:  # no RETURNING: the history has no key a lake could return rows by
            self.store.statements.delete("fact_history", where, params)
        return ids

    def erase_deleted_history(self) -> dict[str, list[int]]:
        """Delete the history of every fact that no longer exists (in any namespace);
        returns namespace -> the fact id of each row deleted."""
        self._write()
        where = "NOT EXISTS (SELECT 1 FROM facts f WHERE f.id = fact_history.fact_id)"
        erased: dict[str, list[int]] = {}
        for namespace, fact_id in self.store.run(
            f"SELECT namespace, fact_id FROM fact_history WHERE {where} ORDER BY namespace, fact_id"
        ):
            erased.setdefault(str(namespace), []).append(int(fact_id))
        if erased:
            self.store.statements.delete("fact_history", where)
        return erased

    def _archive(self, fact_id: int, namespace: str, category: str, key: str, value: str,
                 source: str, valid_from: Any, superseded_at: dt.datetime) -> None:  # fmt: skip
        values = [fact_id, namespace, category, key, value, source, valid_from, superseded_at]
        self.store.statements.insert(
            "fact_history", dict(zip(FACT_HISTORY.names, values, strict=True))
        )

    def write_vectors(self, ids: Sequence[int], vectors: np.ndarray, model: str) -> None:
        """Store the vectors of facts (a cache: not audited)."""
        self._write()
        data = pa.table(
            {
                "id": pa.array([int(i) for i in ids], pa.int32()),
                "embedding": pa.array(list(np.asarray(vectors)), pa.list_(pa.float32())),
            }
        )
        with self.store.registered("_nbmemory_fact_vectors", data) as view:
            self.store.statements.update(
                "facts",
                "embedding = v.embedding, embedding_model = ?",
                [model],
                "facts.id = v.id",
                from_=f"{view} v",
            )

    def insert_rows(self, rows: Sequence[dict[str, Any]]) -> int:
        """Bulk insert with ids (an import); the id sequence moves past them."""
        count = super().insert_rows(rows)
        if rows:
            self.store.advance_ids("facts_id_seq", max(int(r["id"]) for r in rows))
        return count


def advance_sequence(store: Any, sequence: str, at_least: int) -> None:
    """Move ``sequence`` past ``at_least`` so later inserts never reuse an imported id."""
    if sequence not in ("facts_id_seq", "macros_id_seq"):
        raise ValueError(sequence)
    current = int(store.run(f"SELECT nextval('{sequence}')")[0][0])
    if current < at_least:
        store.run(f"SELECT max(nextval('{sequence}')) FROM range(?)", [int(at_least - current)])
