"""The Astreus memory API (``mem.memories``): ``add``, ``search``, ``update`` ...

A *memory* is an event with ``kind="memory"`` (what ``add`` and
``remember_conversation`` write) or ``kind="summary"`` (what consolidation writes).
Conversation messages (``kind="message"``) are not memories: the Astreus methods
never list, change or delete them.  Memories added without a session go to the
session :data:`DEFAULT_MEMORY_SESSION` (``"memories"``).
"""

from __future__ import annotations

import datetime as dt
import inspect
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..core import Core
from ..errors import InvalidInput, MemoryNotFound
from ..event_rows import Event, build_row
from ..validation import (
    check_filter_value,
    check_limit,
    check_name,
    check_text,
    check_unit_interval,
    date_range,
    is_one_of,
    parse_metadata,
    shown,
)
from .event_log import change_event

#: Event kinds the memory methods work on.
MEMORY_KINDS = ("memory", "summary")
#: Session of memories added without ``session_id`` (the Astreus scope is optional).
DEFAULT_MEMORY_SESSION = "memories"

#: Keys accepted in ``filters=`` (the Astreus camelCase spellings are accepted too).
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
    # without a query, a memory's relevance is its importance (salience)
    "relevance": "importance {o}, created_at {o}, id {o}",
}
_METRICS = ("cosine", "distance")


class Memories:
    """The Astreus methods over events of kind ``memory`` and ``summary``."""

    def __init__(self, core: Core) -> None:
        self.core = core

    # -- writing -------------------------------------------------------------------------
    def add(
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
    ) -> Event:
        """Store ``content`` as a memory (``kind="memory"``) and queue its embedding.

        ``graph_id`` / ``task_id`` / ``session_id`` are the optional isolation scope;
        every search and list can filter on them.  Without ``session_id`` the memory
        goes to the session ``"memories"``.  Returns the stored memory.
        """
        row = build_row(
            self.core.settings,
            session_id=DEFAULT_MEMORY_SESSION if session_id is None else session_id,
            role=role,
            content=content,
            namespace=self.core.ns(namespace),
            kind="memory",
            metadata=metadata,
            importance=importance,
            graph_id=graph_id,
            task_id=task_id,
        )
        (record,) = self.core.writer.add_events([row])
        return Event.from_record(record)

    def remember_conversation(
        self,
        content: str,
        role: str,
        *,
        session_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        importance: float | None = None,
        namespace: str | None = None,
    ) -> Event:
        """Store one turn of a conversation as a memory with its role.

        Without ``importance``: the role's default (user 0.5, assistant 0.5, tool
        0.3, system 0.1) or the estimate from the text when higher, as in
        :meth:`add_event`; ``metadata`` gets ``{"type": "conversation"}`` unless it says otherwise.
        """
        extra = {"type": "conversation"}
        if metadata is not None:
            if not isinstance(metadata, Mapping):
                raise InvalidInput(f"metadata must be a dict, got {type(metadata).__name__}")
            extra.update(metadata)
        return self.add(
            content, extra, session_id=session_id, importance=importance, role=role,
            namespace=namespace,
        )  # fmt: skip

    # -- reading -------------------------------------------------------------------------
    def get(self, id: str, *, namespace: str | None = None) -> Event:
        """One memory by id; :class:`MemoryNotFound` when there is none in the namespace."""
        ns = self.core.ns(namespace)
        record = self.core.store.events.get(check_name(id, "id"), ns, kinds=MEMORY_KINDS)
        if record is None:
            raise MemoryNotFound(id, ns)
        return Event.from_record(record)

    def search(
        self,
        text: str,
        *,
        limit: int = 10,
        offset: int = 0,
        order_by: str = "relevance",
        order: str = "desc",
        start_date: Any = None,
        end_date: Any = None,
        filters: dict[str, Any] | None = None,
        session_id: str | None = None,
        graph_id: str | None = None,
        task_id: str | None = None,
        similarity_threshold: float | None = None,
        use_embedding: bool = True,
        include_embedding: bool = False,
        namespace: str | None = None,
    ) -> pd.DataFrame:
        """Memories matching ``text``: the Astreus ``searchMemories`` and its options.

        Semantic by default: the memories whose cosine similarity to ``text`` reaches
        ``similarity_threshold`` (None: ``Settings.similarity_threshold``, 0.7 as the
        Astreus API documents; 0 keeps every embedded memory), ``similarity`` clamped to
        [0, 1] as that API defines it.  Only memories whose vector is written are
        ranked (``flush`` waits for pending ones).  ``order_by`` is ``relevance``
        (best first; ``order="asc"`` turns it round), ``created_at`` or ``updated_at``
        (the matches by time), ``order`` ``desc`` (default) or ``asc``; ``limit``
        and ``offset`` page (:meth:`pages` iterates over pages).  ``session_id``,
        ``graph_id`` and ``task_id`` narrow the scope as ``filters`` does.
        ``use_embedding=False`` is a case-insensitive substring match instead, newest
        first unless ``order_by`` says.  ``include_embedding=True`` adds each
        memory's ``embedding`` (its vector, or its first passage's for a long one).

        An empty result under the threshold says why in ``frame.attrs``:
        ``near_misses`` (memories within 0.1 below it) and ``best_similarity``.
        """
        text = check_text(text, "text")
        limit = check_limit(limit, "limit")
        offset = check_limit(offset, "offset")
        by = _order(order_by, order, query=True)
        for name, flag in (
            ("use_embedding", use_embedding),
            ("include_embedding", include_embedding),
        ):
            if not isinstance(flag, bool):
                raise InvalidInput(f"{name} must be True or False, got {shown(flag)}")
        filters = _with_scope(filters, session_id=session_id, graph_id=graph_id, task_id=task_id)
        ns, where = self._scope(filters, namespace)
        since, until = date_range(start_date, end_date, ("start_date", "end_date"))
        if not use_embedding:
            frame = self.core.store.events.containing(
                text, namespace=ns, filters=where, since=since, until=until, limit=limit,
                offset=offset, order=by or "created_at DESC, id",
            )  # fmt: skip
            return self._finished(_memory_frame(frame), include_embedding)
        if similarity_threshold is None:
            similarity_threshold = self.core.settings.similarity_threshold
        threshold = check_unit_interval(similarity_threshold, "similarity_threshold")
        frame = self._ranked(
            text, ns, where, since, until, limit, offset, threshold, "cosine", order=by,
            ascending=order.lower() == "asc" and by is None,
        )  # fmt: skip
        return self._finished(frame, include_embedding)

    def pages(
        self, text: str | None = None, *, page_size: int = 100, **options: Any
    ) -> Iterator[pd.DataFrame]:
        """The Astreus ``pageSize``: :meth:`search` (with ``text``) or :meth:`list`
        (without) one page of ``page_size`` rows at a time, until a page comes back
        short; ``options`` are theirs (``limit`` caps the rows over all pages)."""
        size = check_limit(page_size, "page_size", allow_zero=False)
        if "offset" in options:
            raise InvalidInput("pages() starts at the first row; leave out offset")
        cap = options.pop("limit", None)
        cap = None if cap is None else check_limit(cap, "limit")
        verb = self.list if text is None else self.search
        unknown = sorted(set(options) - set(inspect.signature(verb).parameters))
        if unknown:  # said before the first page, not as list()'s own TypeError
            raise InvalidInput(
                f"pages() has no option {unknown[0]!r}; it takes those of "
                f"memories.{verb.__name__}()"
            )
        offset = 0
        while cap is None or offset < cap:
            take = size if cap is None else min(size, cap - offset)
            if text is None:
                page = self.list(limit=take, offset=offset, **options)
            else:
                page = self.search(text, limit=take, offset=offset, **options)
            if len(page):
                yield page
            if len(page) < take:
                return
            offset += take

    def search_by_similarity(
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
        (cosine) and ``distance_score`` = 1 / (1 + euclidean distance), the Astreus
        API's two scores; ``metric="distance"`` applies the threshold and ranking to
        the latter.  ``filters`` (session_id, graph_id, task_id, namespace) are honoured.
        """
        if not is_one_of(metric, _METRICS):
            raise InvalidInput(f"metric must be one of {', '.join(_METRICS)}, got {shown(metric)}")
        if similarity_threshold is None:
            similarity_threshold = self.core.settings.similarity_threshold
        threshold = check_unit_interval(similarity_threshold, "similarity_threshold", low=-1)
        limit = check_limit(limit, "limit")
        ns, where = self._scope(filters, namespace)
        since, until = date_range(start_date, end_date, ("start_date", "end_date"))
        frame = self._ranked(query, ns, where, since, until, limit, 0, threshold, metric)
        return self._finished(frame, False)

    def list(
        self,
        *,
        limit: int = 100,
        offset: int = 0,
        order_by: str = "created_at",
        order: str = "desc",
        start_date: Any = None,
        end_date: Any = None,
        filters: dict[str, Any] | None = None,
        session_id: str | None = None,
        graph_id: str | None = None,
        task_id: str | None = None,
        include_embedding: bool = False,
        namespace: str | None = None,
    ) -> pd.DataFrame:
        """Memories of the scope, ordered by ``created_at``, ``updated_at`` or ``relevance``.

        Without a query, ``relevance`` orders by importance (then time).  ``order`` is
        ``"desc"`` (default) or ``"asc"``; ``limit`` (100) and ``offset`` page
        (:meth:`pages` iterates).  ``session_id``, ``graph_id``, ``task_id`` narrow
        the scope; ``include_embedding=True`` adds each memory's ``embedding``.
        """
        limit = check_limit(limit, "limit")
        offset = check_limit(offset, "offset")
        _order(order_by, order, query=False)
        if not isinstance(include_embedding, bool):
            raise InvalidInput(
                f"include_embedding must be True or False, got {shown(include_embedding)}"
            )
        filters = _with_scope(filters, session_id=session_id, graph_id=graph_id, task_id=task_id)
        ns, where = self._scope(filters, namespace)
        since, until = date_range(start_date, end_date, ("start_date", "end_date"))
        frame = self.core.store.events.frame(
            namespace=ns, filters=where, since=since, until=until,
            order=_ORDER_BY[order_by].format(o=order.upper()), limit=limit, offset=offset,
        )  # fmt: skip
        return self._finished(_memory_frame(frame), include_embedding)

    # -- changing ------------------------------------------------------------------------
    def update(
        self,
        id: str,
        *,
        content: str | None = None,
        metadata: dict[str, Any] | None = None,
        namespace: str | None = None,
    ) -> Event:
        """Change a memory's content and/or metadata (metadata is replaced whole).

        Changed content loses its vector and is queued for embedding again, so
        similarity search never ranks new text by the old vector.
        """
        ns = self.core.ns(namespace)
        id = change_event(self.core, id, ns, content, metadata, MEMORY_KINDS, "update_memory")
        return self.get(id, namespace=ns)

    def delete(self, id: str, *, namespace: str | None = None) -> bool:
        """Delete one memory; True if it existed."""
        id = check_name(id, "id")
        ns = self.core.ns(namespace)
        with self.core.writer.transaction() as tx:
            deleted = tx.events.delete([id], namespace=ns, kinds=MEMORY_KINDS)
            if deleted:
                tx.audit("delete_memory", deleted, ns)
        return bool(deleted)

    def clear(
        self,
        filters: dict[str, Any] | None = None,
        *,
        sync_with_context: bool = True,
        namespace: str | None = None,
    ) -> int:
        """Delete every memory of the scope (all of the namespace without ``filters``).

        Conversation messages are never touched.  Returns how many were deleted.
        ``sync_with_context`` (True, as in the Astreus API) also drops them from the
        working memory of their sessions, so the next context no longer holds them;
        False leaves those sessions' working memory as it is until it reloads.
        """
        if not isinstance(sync_with_context, bool):
            raise InvalidInput(
                f"sync_with_context must be True or False, got {shown(sync_with_context)}"
            )
        ns, where = self._scope(filters, namespace)
        with self.core.writer.transaction() as tx:
            tx.change.keep_context = not sync_with_context
            ids = tx.events.delete(namespace=ns, filters=where)
            if ids:
                details = {k: v for k, v in where.items() if k != "kind"}
                tx.audit("clear_memories", ids, ns, {"count": len(ids), "filters": details})
        return len(ids)

    def generate_embedding(self, id: str, *, namespace: str | None = None) -> dict[str, Any]:
        """Embed one memory now (migration/repair); the Astreus result dict.

        ``{"success": True, "message": "Embedding generated successfully",
        "embedding": [...]}``, or ``success`` False with "Memory not found",
        "Memory already has embedding" (by the current model) or "Failed to
        generate embedding" (``error`` then says why).
        """
        id = check_name(id, "id")
        ns = self.core.ns(namespace)
        record = self.core.store.events.get(id, ns, kinds=MEMORY_KINDS)
        if record is None:
            return {"success": False, "message": "Memory not found"}
        if record["has_embedding"] and record["embedding_model"] == self.core.model:
            return {"success": False, "message": "Memory already has embedding"}
        try:
            vectors = np.asarray(self.core.embedder.embed([record["content"]]), dtype=np.float32)
            if vectors.shape[0] != 1 or not np.isfinite(vectors).all() or not vectors.any():
                raise ValueError(f"unusable vector of shape {vectors.shape}")
            with self.core.writer.transaction() as tx:
                if record["has_embedding"]:  # another model's vector: replaced
                    tx.vectors.forget([id])
                written = tx.vectors.write_vectors(
                    [id], vectors, self.core.model, [record["content"]]
                )
                if not written:
                    raise ValueError("the memory's text changed while it was embedded")
                tx.audit("generate_embedding", [id], ns, {"model": self.core.model})
        except Exception as exc:
            return {
                "success": False,
                "message": "Failed to generate embedding",
                "error": f"{type(exc).__name__}: {exc}",
            }
        return {
            "success": True,
            "message": "Embedding generated successfully",
            "embedding": vectors[0].tolist(),
        }

    # -- helpers ---------------------------------------------------------------------------
    def _scope(
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
            where[key] = check_filter_value(key, value)
        if "namespace" in where:
            ns_value = where.pop("namespace")
            if not isinstance(ns_value, str):
                raise InvalidInput("the namespace filter takes one name")
            namespace = ns_value
        kinds = where.get("kind", list(MEMORY_KINDS))
        for kind in [kinds] if isinstance(kinds, str) else kinds:
            if not is_one_of(kind, MEMORY_KINDS):
                raise InvalidInput(
                    f"memories are of kind {' or '.join(MEMORY_KINDS)}, not {shown(kind)}"
                )
        where["kind"] = kinds
        return self.core.ns(namespace), where

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
        *,
        order: str | None = None,
        ascending: bool = False,
    ) -> pd.DataFrame:
        """Exact top-k of the scope by cosine (or distance score), in SQL; ``order``
        pages the matches by time instead (an ORDER BY of the store's whitelist)."""
        vector = self.core.retriever.embed_query(query)
        rank_by = "similarity" if metric == "cosine" else "distance_score"

        def similar(limit: int, offset: int, threshold: float | None) -> pd.DataFrame:
            return self.core.store.vectors.similar(
                vector, self.core.model, limit=limit, namespace=namespace, threshold=threshold,
                filters=where, since=since, until=until, offset=offset, rank_by=rank_by,
                order=order, descending=not ascending,
            )  # fmt: skip

        frame = similar(limit, offset, threshold)
        frame = _memory_frame(frame, extra=["similarity", "distance_score"])
        frame["similarity"] = frame["similarity"].clip(0.0, 1.0)  # 004: similarity in [0, 1]
        frame.attrs.update(query=query, threshold=threshold, metric=metric)
        if frame.empty and threshold is not None and offset == 0:
            below = similar(_COUNT_CAP, 0, max(threshold - NEAR_MISS, 0.0))
            ascending = False  # (the best one)
            best = similar(1, 0, None)
            frame.attrs["near_misses"] = len(below)
            frame.attrs["best_similarity"] = (
                None if best.empty else float(min(max(best[rank_by].iloc[0], 0.0), 1.0))
            )
        return frame.reset_index(drop=True)

    def _finished(self, frame: pd.DataFrame, include_embedding: bool) -> pd.DataFrame:
        """The Astreus columns every result carries: ``agent_id`` (the namespace, where an
        agent's memories live) and, on request, ``embedding``."""
        frame.insert(1, "agent_id", frame["namespace"])
        if include_embedding:
            vectors = self.core.store.vectors.first_vectors(self.core.model, list(frame["id"]))
            frame["embedding"] = [vectors.get(i) for i in frame["id"]]
        return frame


def _memory_frame(frame: pd.DataFrame, extra: list[str] | tuple[str, ...] = ()) -> pd.DataFrame:
    frame = frame.reindex(columns=[*MEMORY_COLUMNS, *extra])
    frame["metadata"] = [parse_metadata(m) for m in frame["metadata"]]
    return frame


#: How far below the threshold a memory counts as a near miss of an empty search.
NEAR_MISS = 0.1
#: At most this many near misses are counted.
_COUNT_CAP = 10_000
_QUERY_ORDERS = ("relevance", "created_at", "createdAt", "updated_at", "updatedAt")


def _order(order_by: Any, order: Any, *, query: bool) -> str | None:
    """The ORDER BY of ``order_by``/``order`` (None: by relevance to the query)."""
    if not isinstance(order_by, str) or order_by not in _ORDER_BY:
        raise InvalidInput(
            f"order_by must be created_at, updated_at or relevance, got {shown(order_by)}"
        )
    if not isinstance(order, str) or order.lower() not in ("asc", "desc"):
        raise InvalidInput(f"order must be 'asc' or 'desc', got {shown(order)}")
    if query and order_by == "relevance":
        return None
    return _ORDER_BY[order_by].format(o=order.upper())


def _with_scope(filters: dict[str, Any] | None, **scope: str | None) -> dict[str, Any] | None:
    """``filters`` with the scope given as arguments (``session_id=`` ...) added."""
    given = {k: v for k, v in scope.items() if v is not None}
    if not given:
        return filters
    if filters is not None and not isinstance(filters, Mapping):
        return filters  # (refused with its message by _scope)
    merged = dict(filters or {})
    for key, value in given.items():
        spelled = {key, *(a for a, k in _ALIASES.items() if k == key)}
        if spelled & set(merged):
            raise InvalidInput(f"{key} given twice: as an argument and in filters")
        merged[key] = value
    return merged
