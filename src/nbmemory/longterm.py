"""Long-term memory methods of :class:`~nbmemory.Memory` (issue 5).

Seed 004's Astreus memory API (``add_memory``, ``search_memories`` ...) lives here;
seed 000's facts, macros, allowed prefixes, scheduled tasks and consolidation live
in their own modules whose mixins :class:`LongTermMixin` combines, so
:mod:`nbmemory.memory` stays the small core.

A *memory* is an event with ``kind="memory"`` (what ``add_memory`` and
``remember_conversation`` write) or ``kind="summary"`` (what consolidation writes).
Conversation messages (``kind="message"``) are not memories: the Astreus methods
never list, change or delete them.  Memories added without a session go to the
session :data:`DEFAULT_MEMORY_SESSION` (``"memories"``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from . import events as ev
from .config import check_limit, check_unit_interval
from .consolidation import ConsolidationMixin
from .errors import InvalidInput, MemoryNotFound
from .facts import FactsMixin
from .macros import MacrosMixin
from .prefixes import PrefixesMixin
from .scheduler import SchedulerMixin
from .store import READ_COLUMNS, where_clause

#: Event kinds the memory methods work on.
MEMORY_KINDS = ("memory", "summary")
#: Session of memories added without ``session_id`` (seed 004's scope is optional).
DEFAULT_MEMORY_SESSION = "memories"

#: Keys accepted in ``filters=`` (camelCase spellings of seed 004 are accepted too).
SCOPE_KEYS = ("session_id", "graph_id", "task_id", "namespace", "kind", "role")
_ALIASES = {"sessionId": "session_id", "graphId": "graph_id", "taskId": "task_id"}

#: Columns of the DataFrames the memory methods return (similarity searches add
#: ``similarity`` and ``distance_score``).
MEMORY_COLUMNS = [
    "id",
    "content",
    "metadata",
    "session_id",
    "graph_id",
    "task_id",
    "namespace",
    "kind",
    "role",
    "importance",
    "created_at",
    "updated_at",
    "embedding_model",
    "embedding_error",
]

_ORDER_BY = {
    "created_at": "created_at {o}, id {o}",
    "createdAt": "created_at {o}, id {o}",
    "updated_at": "updated_at {o}, id {o}",
    "updatedAt": "updated_at {o}, id {o}",
    # without a query, a memory's relevance is its importance (seed 000 salience)
    "relevance": "importance {o}, created_at {o}, id {o}",
}
_METRICS = ("cosine", "distance")


class LongTermMixin(FactsMixin, MacrosMixin, PrefixesMixin, SchedulerMixin, ConsolidationMixin):
    """Mixed into :class:`nbmemory.Memory`; uses its store, namespace and audit hook."""

    def _stop_longterm(self) -> None:
        """Called by ``Memory.close``: stop the background consolidation thread."""
        self.stop_consolidation()

    # -- seed 004: writing ---------------------------------------------------------------
    def add_memory(
        self,
        content: str,
        metadata: dict[str, Any] | None = None,
        *,
        graph_id: str | None = None,
        task_id: str | None = None,
        session_id: str | None = None,
        importance: float | None = None,
        role: str = "user",
        namespace: str | None = None,
    ) -> ev.Event:
        """Store ``content`` as a memory (``kind="memory"``) and queue its embedding.

        ``graph_id`` / ``task_id`` / ``session_id`` are seed 004's optional isolation
        scope; every search and list can filter on them.  Without ``session_id`` the
        memory goes to the session ``"memories"``.  Returns the stored memory.
        """
        return self.add_event(
            DEFAULT_MEMORY_SESSION if session_id is None else session_id,
            role,
            content,
            namespace=namespace,
            kind="memory",
            metadata=metadata,
            importance=importance,
            graph_id=graph_id,
            task_id=task_id,
        )

    def remember_conversation(
        self,
        content: str,
        role: str,
        *,
        session_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        importance: float | None = None,
        namespace: str | None = None,
    ) -> ev.Event:
        """Store one turn of a conversation as a memory with its role (seed 004).

        The importance defaults by role (user 0.5, assistant 0.5, tool 0.3, system
        0.1); ``metadata`` gets ``{"type": "conversation"}`` unless it says otherwise.
        """
        extra = {"type": "conversation"}
        if metadata is not None:
            if not isinstance(metadata, Mapping):
                raise InvalidInput(f"metadata must be a dict, got {type(metadata).__name__}")
            extra.update(metadata)
        return self.add_memory(
            content,
            extra,
            session_id=session_id,
            importance=importance,
            role=role,
            namespace=namespace,
        )

    # -- seed 004: reading ---------------------------------------------------------------
    def get_memory(self, id: str, *, namespace: str | None = None) -> ev.Event:
        """One memory by id; :class:`MemoryNotFound` when there is none in the namespace."""
        self._check_open()
        ns = self._ns(namespace)
        record = self._memory_record(ev.check_name(id, "id"), ns)
        if record is None:
            raise MemoryNotFound(id, ns)
        return ev.Event.from_record(record)

    def search_memories(
        self,
        text: str,
        *,
        limit: int = 10,
        offset: int = 0,
        start_date: Any = None,
        end_date: Any = None,
        filters: dict[str, Any] | None = None,
        similarity_threshold: float | None = None,
        use_embedding: bool = True,
        namespace: str | None = None,
    ) -> pd.DataFrame:
        """Memories matching ``text``, best first (seed 004 ``searchMemories``).

        Semantic by default: ranked by cosine similarity to ``text`` (only memories
        whose vector is written are ranked; :meth:`flush` waits for pending ones),
        optionally cut at ``similarity_threshold``.  ``use_embedding=False`` is a
        case-insensitive substring match instead, newest first.  ``offset`` pages.
        """
        self._check_open()
        text = ev.check_text(text, "text")
        limit = check_limit(limit, "limit")
        offset = check_limit(offset, "offset")
        if not isinstance(use_embedding, bool):
            raise InvalidInput(f"use_embedding must be True or False, got {use_embedding!r}")
        ns, where = self._memory_scope(filters, namespace)
        since, until = _date_range(start_date, end_date)
        if not use_embedding:
            clauses, params = where_clause(namespace=ns, filters=where, since=since, until=until)
            clauses.append("content ILIKE ? ESCAPE '\\'")
            params.append("%" + _escape_like(text) + "%")
            return self._memory_frame(
                f"SELECT {', '.join(READ_COLUMNS)} FROM events WHERE {' AND '.join(clauses)}"
                " ORDER BY created_at DESC, id LIMIT ? OFFSET ?",
                [*params, limit, offset],
            )
        threshold = None
        if similarity_threshold is not None:
            threshold = check_unit_interval(similarity_threshold, "similarity_threshold", low=-1)
        return self._ranked(text, ns, where, since, until, limit, offset, threshold, "cosine")

    def search_memories_by_similarity(
        self,
        query: str,
        *,
        similarity_threshold: float | None = None,
        limit: int = 10,
        filters: dict[str, Any] | None = None,
        metric: str = "cosine",
        start_date: Any = None,
        end_date: Any = None,
        namespace: str | None = None,
    ) -> pd.DataFrame:
        """Memories with similarity >= ``similarity_threshold`` (0.7), best first.

        Exact: every stored vector of the scope is scored in SQL, so this is the true
        global top-``limit``, not an approximation.  Each row carries ``similarity``
        (cosine) and ``distance_score`` = 1 / (1 + euclidean distance), seed 004's two
        scores; ``metric="distance"`` applies the threshold and ranking to the latter.
        ``filters`` (session_id, graph_id, task_id, namespace) are honoured.
        """
        self._check_open()
        if metric not in _METRICS:
            raise InvalidInput(f"metric must be one of {', '.join(_METRICS)}, got {metric!r}")
        if similarity_threshold is None:
            similarity_threshold = self._settings.similarity_threshold
        threshold = check_unit_interval(similarity_threshold, "similarity_threshold", low=-1)
        limit = check_limit(limit, "limit")
        ns, where = self._memory_scope(filters, namespace)
        since, until = _date_range(start_date, end_date)
        return self._ranked(query, ns, where, since, until, limit, 0, threshold, metric)

    def list_memories(
        self,
        *,
        limit: int = 100,
        offset: int = 0,
        order_by: str = "created_at",
        order: str = "desc",
        start_date: Any = None,
        end_date: Any = None,
        filters: dict[str, Any] | None = None,
        namespace: str | None = None,
    ) -> pd.DataFrame:
        """Memories of the scope, ordered by ``created_at``, ``updated_at`` or ``relevance``.

        Without a query, ``relevance`` orders by importance (then time).  ``order`` is
        ``"desc"`` (default) or ``"asc"``; ``limit`` (100) and ``offset`` page.
        """
        self._check_open()
        limit = check_limit(limit, "limit")
        offset = check_limit(offset, "offset")
        if order_by not in _ORDER_BY:
            raise InvalidInput(
                f"order_by must be created_at, updated_at or relevance, got {order_by!r}"
            )
        if not isinstance(order, str) or order.lower() not in ("asc", "desc"):
            raise InvalidInput(f"order must be 'asc' or 'desc', got {order!r}")
        ns, where = self._memory_scope(filters, namespace)
        since, until = _date_range(start_date, end_date)
        clauses, params = where_clause(namespace=ns, filters=where, since=since, until=until)
        ordering = _ORDER_BY[order_by].format(o=order.upper())
        return self._memory_frame(
            f"SELECT {', '.join(READ_COLUMNS)} FROM events WHERE {' AND '.join(clauses)}"
            f" ORDER BY {ordering} LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )

    # -- seed 004: changing ---------------------------------------------------------------
    def update_memory(
        self,
        id: str,
        *,
        content: str | None = None,
        metadata: dict[str, Any] | None = None,
        namespace: str | None = None,
    ) -> ev.Event:
        """Change a memory's content and/or metadata (metadata is replaced whole).

        Changed content loses its vector and is queued for embedding again, so
        similarity search never ranks new text by the old vector.
        """
        self._check_open()
        id = ev.check_name(id, "id")
        ns = self._ns(namespace)
        if content is None and metadata is None:
            raise InvalidInput("update_memory: nothing to change; pass content= and/or metadata=")
        redacted = 0
        if content is not None:
            content = ev.check_text(content, "content", max_bytes=self._settings.max_content_bytes)
            content, redacted = self._prepare_content(content)  # secrets never stored
        meta_json = ev.dump_metadata(metadata) if metadata is not None else None
        record = self._memory_record(id, ns)
        if record is None:
            raise MemoryNotFound(id, ns)
        sets = ["updated_at = ?"]
        params: list[Any] = [ev.utcnow()]
        changed: list[str] = []
        reembed = content is not None and content != record["content"]
        if reembed:
            sets += ["content = ?", "embedding = NULL", "embedding_model = NULL"]
            sets.append("embedding_error = NULL")
            params.append(content)
            changed.append("content")
        if metadata is not None:
            sets.append("metadata = ?")
            params.append(meta_json)
            changed.append("metadata")
        # RETURNING: DuckDB then reports a clash with the embedding worker (and the
        # store retries) instead of silently dropping the update
        rows = self.store.fetchall(
            f"UPDATE events SET {', '.join(sets)} WHERE id = ? AND namespace = ? RETURNING id",
            [*params, id, ns],
        )
        if not rows:  # deleted meanwhile
            raise MemoryNotFound(id, ns)
        self.working.forget_ids([id])
        if reembed and self.worker is not None:
            self.worker.submit([(id, content)])
        details: dict[str, Any] = {"fields": changed}
        if redacted:
            details["redacted"] = redacted
        self._audit("update_memory", [id], ns, details)
        return self.get_memory(id, namespace=ns)

    def delete_memory(self, id: str, *, namespace: str | None = None) -> bool:
        """Delete one memory; True if it existed (seed 004 returns a boolean)."""
        self._check_open()
        id = ev.check_name(id, "id")
        ns = self._ns(namespace)
        rows = self.store.fetchall(
            "DELETE FROM events WHERE id = ? AND namespace = ?"
            " AND kind IN (SELECT unnest(?::VARCHAR[])) RETURNING id",
            [id, ns, list(MEMORY_KINDS)],
        )
        if not rows:
            return False
        self.working.forget_ids([id])
        self._audit("delete_memory", [id], ns)
        return True

    def clear_memories(
        self, filters: dict[str, Any] | None = None, *, namespace: str | None = None
    ) -> int:
        """Delete every memory of the scope (all of the namespace without ``filters``).

        Conversation messages are never touched.  Returns how many were deleted.
        """
        self._check_open()
        ns, where = self._memory_scope(filters, namespace)
        clauses, params = where_clause(namespace=ns, filters=where)
        rows = self.store.fetchall(
            f"DELETE FROM events WHERE {' AND '.join(clauses)} RETURNING id", params
        )
        ids = [r[0] for r in rows]
        if ids:
            self.working.forget_ids(ids)
            details = {k: v for k, v in where.items() if k != "kind"}
            self._audit("clear_memories", ids, ns, {"count": len(ids), "filters": details})
        return len(ids)

    def generate_embedding_for_memory(
        self, id: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        """Embed one memory now (migration/repair); seed 004's result dict.

        ``{"success": True, "message": "Embedding generated successfully",
        "embedding": [...]}``, or ``success`` False with "Memory not found",
        "Memory already has embedding" (by the current model) or "Failed to
        generate embedding" (``error`` then says why).
        """
        self._check_open()
        id = ev.check_name(id, "id")
        ns = self._ns(namespace)
        record = self._memory_record(id, ns)
        if record is None:
            return {"success": False, "message": "Memory not found"}
        if record["has_embedding"] and record["embedding_model"] == self.model_name:
            return {"success": False, "message": "Memory already has embedding"}
        try:
            vectors = np.asarray(self.embedder.embed([record["content"]]), dtype=np.float32)
            if vectors.shape[0] != 1 or not np.isfinite(vectors).all() or not vectors.any():
                raise ValueError(f"unusable vector of shape {vectors.shape}")
            self.store.write_embeddings([id], vectors, self.model_name)
        except Exception as exc:
            return {
                "success": False,
                "message": "Failed to generate embedding",
                "error": f"{type(exc).__name__}: {exc}",
            }
        self._audit("generate_embedding", [id], ns, {"model": self.model_name})
        return {
            "success": True,
            "message": "Embedding generated successfully",
            "embedding": vectors[0].tolist(),
        }

    # -- helpers ---------------------------------------------------------------------------
    def _memory_record(self, id: str, namespace: str) -> dict[str, Any] | None:
        rows = self.store.records(
            f"SELECT {', '.join(READ_COLUMNS)}, embedding IS NOT NULL AS has_embedding"
            " FROM events WHERE id = ? AND namespace = ? AND kind IN (SELECT unnest(?::VARCHAR[]))",
            [id, namespace, list(MEMORY_KINDS)],
        )
        return rows[0] if rows else None

    def _memory_scope(
        self, filters: dict[str, Any] | None, namespace: str | None
    ) -> tuple[str, dict[str, Any]]:
        """The namespace and the equality filters of a memory query, validated."""
        if filters is None:
            filters = {}
        if not isinstance(filters, Mapping):
            raise InvalidInput(
                f"filters must be a dict like {{'session_id': 's1'}}, got {type(filters).__name__}"
            )
        where: dict[str, Any] = {}
        for raw_key, value in filters.items():
            key = _ALIASES.get(raw_key, raw_key)
            if key not in SCOPE_KEYS:
                raise InvalidInput(
                    f"cannot filter memories on {raw_key!r}; use {', '.join(SCOPE_KEYS)}"
                )
            if key in where or (key == "namespace" and namespace is not None):
                raise InvalidInput(f"filter {key!r} given twice")
            where[key] = _scope_value(key, value)
        if "namespace" in where:
            ns_value = where.pop("namespace")
            if not isinstance(ns_value, str):
                raise InvalidInput("the namespace filter takes one name")
            namespace = ns_value
        kinds = where.get("kind", list(MEMORY_KINDS))
        for kind in [kinds] if isinstance(kinds, str) else kinds:
            if kind not in MEMORY_KINDS:
                raise InvalidInput(
                    f"memories are of kind {' or '.join(MEMORY_KINDS)}, not {kind!r}"
                )
        where["kind"] = kinds
        return self._ns(namespace), where

    def _ranked(
        self,
        query: str,
        namespace: str,
        where: dict[str, Any],
        since: dt.datetime | None,
        until: dt.datetime | None,
        limit: int,
        offset: int,
        threshold: float | None,
        metric: str,
    ) -> pd.DataFrame:
        """Exact top-k of the scope by cosine (or distance score), in SQL."""
        vector = np.asarray(self.embed_query(query), dtype=np.float32).tolist()
        clauses, params = where_clause(namespace=namespace, filters=where, since=since, until=until)
        clauses += ["embedding IS NOT NULL", "embedding_model = ?"]
        params.append(self.model_name)
        score = "similarity" if metric == "cosine" else "distance_score"
        sql = (
            f"SELECT * FROM (SELECT {', '.join(READ_COLUMNS)},"
            " list_cosine_similarity(embedding, ?::FLOAT[]) AS similarity,"
            " 1.0 / (1.0 + list_distance(embedding, ?::FLOAT[])) AS distance_score"
            f" FROM events WHERE {' AND '.join(clauses)}) WHERE {score} IS NOT NULL"
        )
        params = [vector, vector, *params]
        if threshold is not None:
            sql += f" AND {score} >= ?"
            params.append(threshold)
        sql += f" ORDER BY {score} DESC, created_at DESC, id LIMIT ? OFFSET ?"
        frame = self._memory_frame(
            sql, [*params, limit, offset], extra=["similarity", "distance_score"]
        )
        frame.attrs["query"] = query
        frame.attrs["threshold"] = threshold
        frame.attrs["metric"] = metric
        return frame

    def _memory_frame(
        self, sql: str, params: list[Any], extra: list[str] | tuple[str, ...] = ()
    ) -> pd.DataFrame:
        frame = self.store.df(sql, params).reindex(columns=[*MEMORY_COLUMNS, *extra])
        frame["metadata"] = [ev.parse_metadata(m) for m in frame["metadata"]]
        return frame


def _scope_value(key: str, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        return ev.check_name(value, key)
    if isinstance(value, (list, tuple, set, frozenset)) and value:
        return [ev.check_name(v, key) for v in value]
    raise InvalidInput(f"filter {key!r} takes a string or a list of strings, got {value!r}")


def _date_range(start: Any, end: Any) -> tuple[dt.datetime | None, dt.datetime | None]:
    since = None if start is None else ev.to_utc(start, "start_date")
    until = None if end is None else ev.to_utc(end, "end_date")
    if since is not None and until is not None and since > until:
        raise InvalidInput(
            f"start_date {since:%Y-%m-%d %H:%M} is after end_date {until:%Y-%m-%d %H:%M}"
        )
    return since, until


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
