"""Facts (seed 000): small named truths an agent keeps, ``(category, key) -> value``.

``set_fact`` upserts by ``(category, key)`` within a namespace.  A replaced value is
never silently overwritten: the old value, who set it and when it was valid go to
``fact_history`` with the time it was superseded.  Facts are embedded lazily (the
first time a query asks for relevant facts) so ``relevant_facts`` ranks them by
similarity like memories.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from . import events as ev
from .config import check_limit, check_unit_interval
from .errors import InvalidInput

#: Who may have stored a fact.
FACT_SOURCES = ("agent", "user", "consolidation")

FACT_COLUMNS = ["id", "category", "key", "value", "source", "created_at", "updated_at"]
HISTORY_COLUMNS = ["fact_id", "category", "key", "value", "source", "valid_from", "superseded_at"]


def fact_text(category: str, key: str, value: str) -> str:
    """The text a fact is embedded as."""
    return f"{category} {key}: {value}"


def table_frame(
    store: Any, table: str, columns: list[str], order: str, namespace: str, **equal: Any
) -> pd.DataFrame:
    """``SELECT columns FROM table`` of one namespace with equality filters (None = any).

    ``table``, ``columns``, ``order`` and the filter names are fixed by the callers
    (never user input); the filter values are validated names, passed as parameters.
    """
    sql = f"SELECT {', '.join(columns)} FROM {table} WHERE namespace = ?"
    params: list[Any] = [namespace]
    for name, value in equal.items():
        if value is not None:
            sql += f" AND {name} = ?"
            params.append(ev.check_name(value, name))
    return store.df(f"{sql} ORDER BY {order}", params)


def check_fact(category: Any, key: Any, value: Any, source: Any) -> tuple[str, str, str, str]:
    """Validated ``(category, key, value, source)``; :class:`InvalidInput` names the bad one."""
    category = ev.check_name(category, "category")
    key = ev.check_name(key, "key")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    value = ev.check_text(value, "value", max_bytes=100_000)
    if source not in FACT_SOURCES:
        raise InvalidInput(f"source must be one of {', '.join(FACT_SOURCES)}, got {source!r}")
    return category, key, value, source


def upsert(
    store: Any, namespace: str, category: str, key: str, value: str, source: str, now: Any
) -> tuple[int, str]:
    """Insert or replace one fact (caller holds a transaction); returns (id, what happened).

    What happened is ``"created"``, ``"updated"`` (old value moved to history) or
    ``"unchanged"`` (same value: only the source and ``updated_at`` are refreshed).
    """
    row = store.fetchone(
        "SELECT id, value, source, updated_at FROM facts"
        " WHERE namespace = ? AND category = ? AND key = ?",
        [namespace, category, key],
    )
    if row is None:
        new = store.fetchone(
            "INSERT INTO facts (namespace, category, key, value, source, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
            [namespace, category, key, value, source, now, now],
        )
        return int(new[0]), "created"
    fact_id, old_value, old_source, valid_from = row
    if old_value == value:
        store.fetchall(
            "UPDATE facts SET source = ?, updated_at = ? WHERE id = ? RETURNING id",
            [source, now, fact_id],
        )
        return int(fact_id), "unchanged"
    store.execute(
        "INSERT INTO fact_history VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [fact_id, namespace, category, key, old_value, old_source, valid_from, now],
    )
    store.fetchall(  # RETURNING: a concurrent clash raises instead of being dropped
        "UPDATE facts SET value = ?, source = ?, updated_at = ?, embedding = NULL,"
        " embedding_model = NULL WHERE id = ? RETURNING id",
        [value, source, now, fact_id],
    )
    return int(fact_id), "updated"


class FactsMixin:
    """Facts methods of :class:`nbmemory.Memory`."""

    def set_fact(
        self,
        category: str,
        key: str,
        value: str,
        *,
        source: str = "agent",
        namespace: str | None = None,
    ) -> dict[str, Any]:
        """Store ``value`` under ``(category, key)``; a different old value goes to history.

        ``source`` says who knows it: ``"agent"``, ``"user"`` or ``"consolidation"``.
        Returns the fact as a dict with ``status`` created / updated / unchanged.
        """
        self._check_open()
        category, key, value, source = check_fact(category, key, value, source)
        value, redacted = self._prepare_content(value)  # secrets never stored
        ns = self._ns(namespace)
        with self.store.transaction():
            fact_id, status = upsert(self.store, ns, category, key, value, source, ev.utcnow())
        details = {"category": category, "key": key, "source": source, "status": status}
        if redacted:
            details["redacted"] = redacted
        self._audit("set_fact", [str(fact_id)], ns, details)
        return {**self.get_fact(category, key, namespace=ns), "status": status}

    def get_fact(self, category: str, key: str, *, namespace: str | None = None) -> dict[str, Any]:
        """The current fact as a dict; :class:`InvalidInput` when there is none."""
        self._check_open()
        ns = self._ns(namespace)
        rows = self.store.records(
            f"SELECT {', '.join(FACT_COLUMNS)} FROM facts"
            " WHERE namespace = ? AND category = ? AND key = ?",
            [ns, ev.check_name(category, "category"), ev.check_name(key, "key")],
        )
        if not rows:
            raise InvalidInput(
                f"no fact {category!r}/{key!r} in namespace {ns!r}; see mem.facts() for what exists"
            )
        return rows[0]

    def facts(self, category: str | None = None, *, namespace: str | None = None) -> pd.DataFrame:
        """Current facts as a DataFrame (one category, or all), by category then key."""
        self._check_open()
        return table_frame(
            self.store,
            "facts",
            FACT_COLUMNS,
            "category, key",
            self._ns(namespace),
            category=category,
        )

    def fact_history(
        self,
        category: str | None = None,
        key: str | None = None,
        *,
        namespace: str | None = None,
    ) -> pd.DataFrame:
        """Replaced (or deleted) values, newest supersession first."""
        self._check_open()
        return table_frame(
            self.store,
            "fact_history",
            HISTORY_COLUMNS,
            "superseded_at DESC, valid_from DESC",
            self._ns(namespace),
            category=category,
            key=key,
        )

    def delete_fact(self, category: str, key: str, *, namespace: str | None = None) -> bool:
        """Remove a fact (its last value is kept in history); True if it existed."""
        self._check_open()
        category = ev.check_name(category, "category")
        key = ev.check_name(key, "key")
        ns = self._ns(namespace)
        now = ev.utcnow()
        with self.store.transaction():
            rows = self.store.fetchall(
                "DELETE FROM facts WHERE namespace = ? AND category = ? AND key = ?"
                " RETURNING id, value, source, updated_at",
                [ns, category, key],
            )
            for fact_id, value, source, valid_from in rows:
                self.store.execute(
                    "INSERT INTO fact_history VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [fact_id, ns, category, key, value, source, valid_from, now],
                )
        if rows:
            self._audit("delete_fact", [str(rows[0][0])], ns, {"category": category, "key": key})
        return bool(rows)

    def relevant_facts(
        self,
        query: str,
        *,
        limit: int = 5,
        threshold: float | None = None,
        category: str | None = None,
        namespace: str | None = None,
    ) -> pd.DataFrame:
        """Facts most similar to ``query`` (cosine), best first, with ``similarity``.

        Facts not yet embedded by the current model are embedded first (once).
        ``threshold`` keeps only facts with similarity >= it.
        """
        self._check_open()
        limit = check_limit(limit, "limit")
        if threshold is not None:
            threshold = check_unit_interval(threshold, "threshold", low=-1.0)
        ns = self._ns(namespace)
        vector = self.embed_query(query)
        self._embed_facts(ns)
        sql = (
            f"SELECT * FROM (SELECT {', '.join(FACT_COLUMNS)},"
            " list_cosine_similarity(embedding, ?::FLOAT[]) AS similarity FROM facts"
            " WHERE namespace = ? AND embedding_model = ?"
        )
        params: list[Any] = [np.asarray(vector, dtype=np.float32).tolist(), ns, self.model_name]
        if category is not None:
            sql += " AND category = ?"
            params.append(ev.check_name(category, "category"))
        sql += ") WHERE similarity IS NOT NULL"
        if threshold is not None:
            sql += " AND similarity >= ?"
            params.append(threshold)
        sql += " ORDER BY similarity DESC, updated_at DESC LIMIT ?"
        return self.store.df(sql, [*params, limit])

    def _embed_facts(self, namespace: str) -> int:
        """Embed the namespace's facts that have no vector from the current model."""
        rows = self.store.fetchall(
            "SELECT id, category, key, value FROM facts WHERE namespace = ?"
            " AND (embedding IS NULL OR embedding_model IS DISTINCT FROM ?) ORDER BY id",
            [namespace, self.model_name],
        )
        if not rows:
            return 0
        vectors = np.asarray(
            self.embedder.embed([fact_text(r[1], r[2], r[3]) for r in rows]), dtype=np.float32
        )
        data = pa.table(
            {
                "id": pa.array([int(r[0]) for r in rows], pa.int32()),
                "embedding": pa.array(list(vectors), pa.list_(pa.float32())),
            }
        )
        with self.store._lock:
            cur = self.store._cursor()
            cur.register("_nbmemory_fact_vectors", data)
            try:
                cur.execute(
                    "UPDATE facts SET embedding = v.embedding, embedding_model = ?"
                    " FROM _nbmemory_fact_vectors v WHERE facts.id = v.id",
                    [self.model_name],
                ).fetchall()
            finally:
                cur.unregister("_nbmemory_fact_vectors")
        return len(rows)
