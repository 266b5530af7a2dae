"""``Memory``: the facade agents, magics, widgets and the CLI all call.

It owns one :class:`~nbmemory.store.Store`, one embedder with its background
worker, and the per-session working memory.  Nothing here imports IPython,
ipywidgets or plotly, so the same object is an agent's memory in production.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from . import audit
from . import events as ev
from .config import DEFAULT_NAMESPACE, Settings, check_limit, check_unit_interval
from .config import default_store_path as _default_path
from .embeddings import Embedder, EmbeddingWorker, estimate_tokens, resolve_embedder
from .errors import EmbedderError, InvalidInput, MemoryNotFound
from .hybrid import HybridHit, hybrid_rank
from .longterm import LongTermMixin
from .research import ResearchMixin
from .retrieval import Context, merge
from .state import StateMixin
from .store import READ_COLUMNS, Store, where_clause
from .working_memory import WorkingMemory

_OPEN: weakref.WeakSet[Memory] = weakref.WeakSet()

SEARCH_COLUMNS = [
    "id",
    "content",
    "role",
    "session_id",
    "similarity",
    "importance",
    "created_at",
    "namespace",
    "kind",
    "metadata",
    "score",
    "keyword_score",
    "signals",
]

#: Rankings :meth:`Memory.search` offers (see nbmemory.hybrid).
SEARCH_MODES = ("hybrid", "vector", "keyword")


class Memory(LongTermMixin, StateMixin, ResearchMixin):
    """An agent's memory in one DuckDB file.

    >>> mem = Memory(":memory:", embedder="hash")
    >>> _ = mem.add_event("s1", "user", "My name is John and I love TypeScript")
    >>> mem.flush()
    True
    >>> mem.search("What language do I love?", limit=1)["content"].iloc[0]
    'My name is John and I love TypeScript'

    ``path`` defaults to ``$NBMEMORY_PATH`` or ``./nbmemory.duckdb``.  ``embedder``
    is ``None`` (all-MiniLM-L6-v2 through fastembed), a model name, ``"hash"`` (the
    offline test embedder), an :class:`~nbmemory.embeddings.Embedder`, or any
    callable ``list[str] -> array``.  Keyword settings (``relevance_threshold=0.5``)
    override :class:`~nbmemory.config.Settings` defaults.  ``shared=True`` lets
    several processes use the same file, each holding it only while an operation
    runs (slower; see :mod:`nbmemory.shared`); ``None`` reads ``$NBMEMORY_SHARED``.
    """

    def __init__(
        self,
        path: str | None = None,
        *,
        embedder: Any = None,
        settings: Settings | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        read_only: bool = False,
        shared: bool | None = None,
        token_counter: Callable[[str], int] = estimate_tokens,
        actor: str = "api",
        **overrides: Any,
    ) -> None:
        self._settings = (settings or Settings()).replace(**overrides)
        self.namespace = ev.check_name(namespace, "namespace")
        self.embedder: Embedder = resolve_embedder(embedder)
        self.token_counter = token_counter
        #: Who the audit trail says made the changes through this object.
        self.actor = actor
        self.path = str(path) if path is not None else _default_path()
        if shared is None and self.path != ":memory:":  # $NBMEMORY_SHARED=1: magics, CLI
            from .shared import shared_from_env

            shared = shared_from_env()
        if shared:  # several kernels on one file, taking turns (see nbmemory.shared)
            from .shared import SharedStore, SharedWorkingMemory

            self.store = SharedStore(self.path, read_only=read_only)
            self.working = SharedWorkingMemory(
                self._settings.working_memory_cap, self._load_recent, self.store
            )
        else:
            self.store = Store(self.path, read_only=read_only)
            self.working = WorkingMemory(self._settings.working_memory_cap, self._load_recent)
        self._query_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._closed = False
        self._lock = threading.RLock()
        self.worker: EmbeddingWorker | None = None
        if not read_only:
            self.worker = EmbeddingWorker(
                self.embedder,
                lambda ids, vectors: self.store.write_embeddings(ids, vectors, self.model_name),
                self.store.write_embedding_errors,
                batch_size=self._settings.embed_batch_size,
                dim=self._stored_dim(),
            )
            # events left without a vector (crash, restart) are picked up now
            self.worker.submit(self.store.pending_embeddings())
            if self._settings.background_consolidation:
                # seed 000: old conversation compressed every consolidation_interval_hours
                # (first run after one interval; close() stops it)
                self.start_consolidation()
        _OPEN.add(self)

    # -- lifecycle ---------------------------------------------------------------------
    @property
    def settings(self) -> Settings:
        return self._settings

    def configure(self, **changes: Any) -> Settings:
        """Change settings of this open store (validated); returns the new settings."""
        self._settings = self._settings.replace(**changes)
        if "working_memory_cap" in changes:
            self.working.resize(self._settings.working_memory_cap)
        if self.worker is not None:
            self.worker.batch_size = self._settings.embed_batch_size
        if not self.store.read_only and not self._closed:
            self._audit("configure", [], None, {"changes": changes})
        return self._settings

    @property
    def model_name(self) -> str:
        """Name of the embedding model; vectors of other models are never compared."""
        return self.embedder.name

    def _stored_dim(self) -> int | None:
        row = self.store.fetchone(
            "SELECT len(embedding) FROM events WHERE embedding_model = ? "
            "AND embedding IS NOT NULL LIMIT 1",
            [self.model_name],
        )
        return int(row[0]) if row else None

    def close(self) -> None:
        """Stop the embedding worker (finishing its batch) and close the file."""
        if self._closed:
            return
        self._closed = True
        self._stop_state()  # AGENTS.md watchers first: they write through the worker
        self._stop_longterm()  # background consolidation (longterm.py)
        if self.worker is not None:
            self.worker.stop()
        self.store.close()
        _OPEN.discard(self)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return (
            f"<Memory {self.path!r} namespace={self.namespace!r} model={self.model_name!r} {state}>"
        )

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidInput("this Memory is closed; open a new one with Memory(path)")

    def _ns(self, namespace: str | None) -> str:
        return self.namespace if namespace is None else ev.check_name(namespace, "namespace")

    def _audit(
        self,
        action: str,
        target_ids: list[str] | tuple[str, ...] = (),
        namespace: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        """Append an audit row for a mutation made through this object."""
        audit.record(
            self.store,
            action,
            actor=self.actor,
            namespace=self.namespace if namespace is None else namespace,
            target_ids=target_ids,
            details=details,
        )

    def audit_log(
        self, *, namespace: str | None = None, action: str | None = None, limit: int | None = None
    ) -> pd.DataFrame:
        """The audit trail as a DataFrame, newest first (all namespaces unless given)."""
        self._check_open()
        return audit.frame(self.store, namespace=namespace, action=action, limit=limit)

    # -- writing -----------------------------------------------------------------------
    def add_event(
        self,
        session_id: str,
        role: str,
        content: str,
        *,
        namespace: str | None = None,
        kind: str = "message",
        metadata: dict[str, Any] | None = None,
        importance: float | None = None,
        tool_call_id: str | None = None,
        tool_name: str | None = None,
        tool_calls: Any = None,
        created_at: Any = None,
        graph_id: str | None = None,
        task_id: str | None = None,
    ) -> ev.Event:
        """Store one event and queue its embedding; returns at once with the stored event.

        ``importance`` defaults by role (user 0.5, assistant 0.5, tool 0.3, system
        0.1); an explicit value must be a number in 0..1.  The row is durable when
        this returns; its vector follows in the background (see :meth:`flush`).
        """
        self._check_open()
        row = ev.build_row(
            self._settings,
            session_id=session_id,
            role=role,
            content=content,
            namespace=self._ns(namespace),
            kind=kind,
            metadata=metadata,
            importance=importance,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            tool_calls=tool_calls,
            created_at=created_at,
            graph_id=graph_id,
            task_id=task_id,
        )
        row["content"], redacted = self._prepare_content(row["content"])
        self.store.insert_event(row)
        details: dict[str, Any] = {"session_id": row["session_id"]}
        if redacted:
            details["redacted"] = redacted
        self._audit("add", [row["id"]], row["namespace"], details)
        self._touch_session(row["namespace"], row["session_id"])
        record = {k: row[k] for k in READ_COLUMNS}
        self.working.appended(record)
        if self.worker is not None:
            self.worker.submit([(row["id"], row["content"])])
        return ev.Event.from_record(record)

    def add_events(
        self,
        rows: Any,
        *,
        session_id: str | None = None,
        namespace: str | None = None,
    ) -> list[str]:
        """Store many events in one Arrow insert; returns their ids in input order.

        ``rows`` is a DataFrame or an iterable of dicts with the keyword arguments of
        :meth:`add_event` as keys (``session_id``, ``role``, ``content``, ...).
        Every row is validated first: one bad row stores nothing and the error names it.
        """
        self._check_open()
        built = []
        default_ns = self._ns(namespace)
        for index, raw in enumerate(ev.iter_input_rows(rows)):
            raw.setdefault("namespace", default_ns)
            if session_id is not None:
                raw.setdefault("session_id", session_id)
            unknown = set(raw) - _ROW_KEYS
            if unknown:
                raise InvalidInput(f"row {index}: unknown field(s) {', '.join(sorted(unknown))}")
            try:
                built.append(ev.build_row(self._settings, **raw))
            except TypeError as exc:
                raise InvalidInput(f"row {index}: {exc}") from None
            except InvalidInput as exc:
                raise InvalidInput(f"row {index}: {exc}") from None
        if not built:
            return []
        ids = [row["id"] for row in built]
        if len(set(ids)) != len(ids):
            raise InvalidInput("add_events: duplicate ids in the input")
        redacted: dict[str, int] = {}
        for r in built:
            r["content"], count = self._prepare_content(r["content"])
            redacted[r["namespace"]] = redacted.get(r["namespace"], 0) + count
        self.store.insert_events(ev.rows_to_arrow(built))
        for ns in sorted({r["namespace"] for r in built}):
            chosen = [r["id"] for r in built if r["namespace"] == ns]
            details: dict[str, Any] = {"count": len(chosen)}
            if redacted[ns]:
                details["redacted"] = redacted[ns]
            self._audit("add", chosen, ns, details)
        for key in sorted({(r["namespace"], r["session_id"]) for r in built}):
            self._touch_session(*key)
        self.working.invalidate({(r["namespace"], r["session_id"]) for r in built})
        if self.worker is not None:
            self.worker.submit([(r["id"], r["content"]) for r in built])
        return ids

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued embedding is written; False if ``timeout`` ran out."""
        if self.worker is None:
            return True
        return self.worker.flush(timeout)

    @property
    def backlog(self) -> int:
        """Events queued for embedding in this process and not yet written."""
        return 0 if self.worker is None else self.worker.backlog

    def retry_failed_embeddings(self) -> int:
        """Re-queue events whose embedding failed; returns how many were queued."""
        self._check_open()
        rows = self.store.fetchall(
            "UPDATE events SET embedding_error = NULL WHERE embedding_error IS NOT NULL "
            "AND content IS NOT NULL RETURNING id, content"
        )
        if self.worker is not None:
            self.worker.submit([(r[0], r[1]) for r in rows])
        if rows:
            self._audit("retry_embeddings", [r[0] for r in rows], None, {"count": len(rows)})
        return len(rows)

    def reembed(self, *, namespace: str | None = None) -> int:
        """Queue every event not embedded by the current model (after a model change)."""
        self._check_open()
        clauses = "embedding_model IS DISTINCT FROM ? AND content IS NOT NULL"
        params: list[Any] = [self.model_name]
        if namespace is not None:
            clauses += " AND namespace = ?"
            params.append(namespace)
        rows = self.store.fetchall(
            f"UPDATE events SET embedding = NULL, embedding_model = NULL, embedding_error = NULL"
            f" WHERE {clauses} RETURNING id, content",
            params,
        )
        if self.worker is not None:
            self.worker.submit([(r[0], r[1]) for r in rows])
        if rows:
            self._audit("reembed", [r[0] for r in rows], namespace, {"model": self.model_name})
        return len(rows)

    # -- reading -----------------------------------------------------------------------
    def _load_recent(self, namespace: str, session_id: str, limit: int) -> list[dict]:
        return self.store.recent(namespace, session_id, limit)

    def recent(
        self, session_id: str, limit: int | None = None, *, namespace: str | None = None
    ) -> pd.DataFrame:
        """The session's latest events, newest first, from working memory (no SQL once cached)."""
        self._check_open()
        limit = self._settings.recency_limit if limit is None else check_limit(limit, "limit")
        records = self.working.recent(
            self._ns(namespace), ev.check_name(session_id, "session_id"), limit
        )
        return pd.DataFrame(records, columns=list(READ_COLUMNS))

    def get_event(self, event_id: str, *, namespace: str | None = None) -> ev.Event:
        """One event by id; :class:`MemoryNotFound` when there is none in the namespace."""
        self._check_open()
        ns = self._ns(namespace)
        rows = self.store.records(
            f"SELECT {', '.join(READ_COLUMNS)} FROM events WHERE id = ? AND namespace = ?",
            [ev.check_name(event_id, "id"), ns],
        )
        if not rows:
            raise MemoryNotFound(event_id, ns)
        return ev.Event.from_record(rows[0])

    def events(
        self,
        *,
        namespace: str | None = None,
        session_id: str | None = None,
        role: str | None = None,
        kind: str | None = None,
        since: Any = None,
        until: Any = None,
        limit: int | None = None,
        filters: dict[str, Any] | None = None,
    ) -> pd.DataFrame:
        """Stored events as a DataFrame (oldest first), filtered like :meth:`search`."""
        self._check_open()
        flt = self._filters(filters, session_id=session_id, role=role, kind=kind)
        clauses_since = ev.to_utc(since, "since") if since is not None else None
        clauses_until = ev.to_utc(until, "until") if until is not None else None
        frame = self.store.events(namespace=self._ns(namespace), where=flt, limit=limit)
        if clauses_since is not None:
            frame = frame[frame["created_at"] >= clauses_since]
        if clauses_until is not None:
            frame = frame[frame["created_at"] <= clauses_until]
        return frame.reset_index(drop=True)

    def _filters(self, filters: dict[str, Any] | None, **named: Any) -> dict[str, Any]:
        result = dict(filters or {})
        if "namespace" in result:
            raise InvalidInput("pass namespace=... rather than a namespace filter")
        for key, value in named.items():
            if value is not None:
                result[key] = ev.check_name(value, key)
        return result

    def embed_query(self, text: str) -> np.ndarray:
        """The query's vector (cached for the last 256 distinct queries)."""
        text = ev.check_text(text, "query")
        cached = self._query_cache.get(text)
        if cached is not None:
            self._query_cache.move_to_end(text)
            return cached
        shown = text if len(text) <= 80 else text[:80] + "…"
        try:
            vectors = np.asarray(self.embedder.embed([text]), dtype=np.float32)
        except Exception as exc:  # a broken model is an EmbedderError, not a raw traceback
            raise EmbedderError(
                f"the embedding model failed on the query {shown!r}: "
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            ) from exc
        expected = self.worker.dim if self.worker is not None else None
        problem = None
        if vectors.ndim != 2 or vectors.shape[0] != 1:
            problem = f"shape {vectors.shape} instead of one vector"
        elif not np.isfinite(vectors).all():
            problem = "NaN or infinite values"
        elif not np.any(vectors):
            problem = "the zero vector"
        elif expected is not None and vectors.shape[1] != expected:
            problem = f"{vectors.shape[1]} dimensions, stored vectors have {expected}"
        if problem:
            raise EmbedderError(
                f"the embedder returned an unusable vector for the query {shown!r} ({problem}); "
                "check the model, or retry"
            )
        vector = vectors[0]
        self._query_cache[text] = vector
        if len(self._query_cache) > 256:
            self._query_cache.popitem(last=False)
        return vector

    def search(
        self,
        query: str,
        *,
        limit: int = 5,
        threshold: float | None = None,
        mode: str | None = None,
        namespace: str | None = None,
        session_id: str | None = None,
        role: str | None = None,
        kind: str | None = None,
        since: Any = None,
        until: Any = None,
        filters: dict[str, Any] | None = None,
    ) -> pd.DataFrame:
        """Memories most relevant to ``query``, best first.

        ``mode`` is ``"hybrid"`` (cosine similarity fused with BM25 keywords and
        neighbouring turns: the default of the ``hybrid`` profile), ``"vector"``
        (plain cosine ranking: the ``spec`` profile) or ``"keyword"`` (BM25 only).
        Every row has its cosine ``similarity``; ``score`` is what it was ranked by
        and ``signals`` says which signals found it.  ``threshold`` keeps only hits
        whose cosine similarity is >= threshold (``df.attrs["best_similarity"]``
        then tells how close the best memory came when nothing passed).
        """
        self._check_open()
        limit = check_limit(limit, "limit")
        if threshold is not None:
            threshold = check_unit_interval(threshold, "threshold", low=-1.0)
        mode = self._settings.search_mode if mode is None else mode
        if mode not in SEARCH_MODES:
            raise InvalidInput(f"unknown search mode {mode!r}; modes: {', '.join(SEARCH_MODES)}")
        flt = self._filters(filters, session_id=session_id, role=role, kind=kind)
        start = ev.to_utc(since, "since") if since is not None else None
        end = ev.to_utc(until, "until") if until is not None else None
        ns = self._ns(namespace)
        vector = self.embed_query(query)
        if mode == "vector":
            hits = self.store.similarity_search(
                vector,
                self.model_name,
                limit=limit,
                namespace=ns,
                threshold=threshold,
                filters=flt,
                since=start,
                until=end,
            )
            hits["score"] = hits["similarity"]
            hits["keyword_score"] = np.nan
            hits["signals"] = "vector"
        else:
            allowed = self._allowed_ids(ns, flt, start, end)
            ranked = self._rank_hits(
                query, vector, ns, limit=limit, threshold=threshold, mode=mode, allowed=allowed
            )
            hits = self._hits_frame(ranked)
        frame = hits.reindex(columns=SEARCH_COLUMNS)
        frame.attrs["query"] = query
        frame.attrs["threshold"] = threshold
        frame.attrs["mode"] = mode
        if threshold is not None and frame.empty:
            frame.attrs["best_similarity"] = self.store.best_similarity(
                vector, self.model_name, namespace=ns, filters=flt, since=start, until=end
            )
        return frame

    def _allowed_ids(
        self, namespace: str, filters: dict[str, Any], since: Any, until: Any
    ) -> set[str] | None:
        """Ids passing the filters (None when there are none: everything in the namespace)."""
        if not filters and since is None and until is None:
            return None
        clauses, params = where_clause(
            namespace=namespace, filters=filters, since=since, until=until
        )
        rows = self.store.fetchall(f"SELECT id FROM events WHERE {' AND '.join(clauses)}", params)
        return {row[0] for row in rows}

    def _rank_hits(
        self,
        query: str,
        vector: np.ndarray,
        namespace: str,
        *,
        limit: int,
        threshold: float | None,
        mode: str,
        allowed: set[str] | None = None,
        strict: bool = False,
    ) -> list[HybridHit]:
        """Keyword or hybrid ranking from the in-memory indexes."""
        s = self._settings
        vectors = self.store.vector_index(self.model_name)
        keywords = self.store.keyword_index()
        if mode == "keyword":
            # with a cosine threshold, look further down the keyword ranking
            ranked = keywords.score_array(query, namespace, allowed=allowed).top(
                limit if threshold is None else max(limit * 20, 200)
            )
            cosine = vectors.similarities(vector, [event_id for event_id, _ in ranked])
            hits = []
            for event_id, score in ranked:
                similarity = cosine.get(event_id)
                if threshold is not None and (similarity is None or similarity < threshold):
                    continue
                hits.append(HybridHit(event_id, score, similarity, score, ["keyword"]))
                if len(hits) == limit:
                    break
            return hits
        return hybrid_rank(
            vectors,
            keywords,
            query,
            vector,
            namespace=namespace,
            limit=limit,
            floor=threshold,
            strict=strict,
            keyword_weight=s.keyword_weight,
            neighbor_weight=s.neighbor_weight,
            candidates=max(s.hybrid_candidates, limit),
            allowed=allowed,
        )

    def _hits_frame(self, hits: list[HybridHit]) -> pd.DataFrame:
        """Stored rows of ranked hits, in rank order, with their scores."""
        columns = [*READ_COLUMNS, "similarity", "score", "keyword_score", "signals"]
        if not hits:
            return pd.DataFrame(columns=columns)
        rows = {r["id"]: r for r in self.store.rows_by_ids([hit.id for hit in hits])}
        records = []
        for hit in hits:
            row = rows.get(hit.id)
            if row is None:  # deleted meanwhile
                continue
            row = dict(row)
            row["similarity"] = np.nan if hit.similarity is None else hit.similarity
            row["score"] = hit.score
            row["keyword_score"] = hit.keyword_score
            row["signals"] = ", ".join(hit.signals)
            records.append(row)
        return pd.DataFrame.from_records(records, columns=columns)

    def get_context(
        self,
        session_id: str,
        query: str | None = None,
        *,
        namespace: str | None = None,
        recency_limit: int | None = None,
        salience_threshold: float | None = None,
        salience_limit: int | None = None,
        relevance_threshold: float | None = None,
        relevance_limit: int | None = None,
        max_tokens: int | None = None,
        explain: bool = False,
    ) -> Context:
        """The tri-hybrid context for a session (seed 000 ``get_context``).

        recency: the session's last ``recency_limit`` (10) events, from working memory;
        salience: memories of the namespace with importance >= ``salience_threshold``
        (0.8), up to ``salience_limit`` (5); relevance: similarity to ``query`` >
        ``relevance_threshold`` (0.65), up to ``relevance_limit`` (5).  Deduplicated
        by id.  ``explain=True`` also collects the near misses (candidates just under
        a threshold) in ``context.near_misses``.
        """
        self._check_open()
        s = self._settings
        session_id = ev.check_name(session_id, "session_id")
        ns = self._ns(namespace)
        recency_limit = check_limit(
            s.recency_limit if recency_limit is None else recency_limit, "recency_limit"
        )
        salience_limit = check_limit(
            s.salience_limit if salience_limit is None else salience_limit, "salience_limit"
        )
        relevance_limit = check_limit(
            s.relevance_limit if relevance_limit is None else relevance_limit, "relevance_limit"
        )
        salience_threshold = check_unit_interval(
            s.salience_threshold if salience_threshold is None else salience_threshold,
            "salience_threshold",
        )
        relevance_threshold = check_unit_interval(
            s.relevance_threshold if relevance_threshold is None else relevance_threshold,
            "relevance_threshold",
            low=-1.0,
        )
        budget = check_limit(
            s.max_memory_tokens if max_tokens is None else max_tokens, "max_tokens"
        )

        self._touch_session(ns, session_id)
        recency = self.working.recent(ns, session_id, recency_limit) if recency_limit else []
        salience = self._salient(ns, salience_threshold, salience_limit)
        relevance: list[dict] = []
        vector = None
        if query is not None and relevance_limit:
            vector = self.embed_query(query)
            if s.search_mode == "hybrid":
                ranked = self._rank_hits(
                    query,
                    vector,
                    ns,
                    limit=relevance_limit,
                    threshold=relevance_threshold,
                    mode="hybrid",
                    strict=True,
                )
                relevance = self._hits_frame(ranked).to_dict(orient="records")
            else:
                relevance = self.store.similarity_search(
                    vector,
                    self.model_name,
                    limit=relevance_limit,
                    namespace=ns,
                    threshold=relevance_threshold,
                    strict=True,
                ).to_dict(orient="records")
        items = merge(recency, salience, relevance)
        context = Context(
            session_id=session_id,
            query=query,
            namespace=ns,
            items=items,
            parameters={
                "recency_limit": recency_limit,
                "salience_threshold": salience_threshold,
                "salience_limit": salience_limit,
                "relevance_threshold": relevance_threshold,
                "relevance_limit": relevance_limit,
            },
            max_tokens=budget,
            token_counter=self.token_counter,
        )
        if explain:
            context.near_misses = self._near_misses(
                ns, vector, context, relevance_threshold, relevance_limit, salience_threshold
            )
        return context

    def _salient(self, namespace: str, threshold: float, limit: int) -> list[dict]:
        if not limit:
            return []
        return self.store.records(
            f"SELECT {', '.join(READ_COLUMNS)} FROM events WHERE namespace = ? AND importance >= ?"
            " ORDER BY importance DESC, created_at DESC, id LIMIT ?",
            [namespace, threshold, limit],
        )

    def _near_misses(
        self,
        namespace: str,
        vector: np.ndarray | None,
        context: Context,
        relevance_threshold: float,
        relevance_limit: int,
        salience_threshold: float,
    ) -> pd.DataFrame:
        """Candidates a strategy left out, with how far they were from getting in."""
        taken = set(context.ids)
        rows: list[dict] = []
        if vector is not None:
            close = self.store.similarity_search(
                vector,
                self.model_name,
                limit=relevance_limit + 5,
                namespace=namespace,
                exclude_ids=taken,
            )
            for rec in close.to_dict(orient="records"):
                missed_by = relevance_threshold - rec["similarity"]
                reason = (
                    f"similarity {rec['similarity']:.3f} <= threshold {relevance_threshold:.2f}"
                    if missed_by >= 0
                    else f"over the threshold but past the limit of {relevance_limit}"
                )
                rows.append(_miss(rec, "relevance", rec["similarity"], max(missed_by, 0.0), reason))
        salient = self.store.records(
            f"SELECT {', '.join(READ_COLUMNS)} FROM events WHERE namespace = ? AND importance < ?"
            " ORDER BY importance DESC, created_at DESC LIMIT 5",
            [namespace, salience_threshold],
        )
        for rec in salient:
            if rec["id"] in taken:
                continue
            gap = salience_threshold - rec["importance"]
            reason = f"importance {rec['importance']:.2f} < {salience_threshold:.2f}"
            rows.append(_miss(rec, "salience", rec["importance"], gap, reason))
        return pd.DataFrame(
            rows, columns=["strategy", "id", "role", "content", "score", "missed_by", "reason"]
        )

    # -- removing ----------------------------------------------------------------------
    def delete(self, ids: str | list[str], *, namespace: str | None = None) -> int:
        """Delete events by id (within the namespace); returns how many were deleted."""
        self._check_open()
        ids = [ids] if isinstance(ids, str) else [ev.check_name(i, "id") for i in ids]
        ns = self._ns(namespace)
        deleted = self.store.delete_events(ids, ns)
        self.working.forget_ids(ids)
        if deleted:
            self._audit("delete", deleted, ns)
        return len(deleted)

    # -- reporting ---------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """Path, model, counts per namespace/session/kind and the embedding backlog."""
        self._check_open()
        counts = self.store.counts()
        return {
            "path": self.path,
            "namespace": self.namespace,
            "model": self.model_name,
            "schema_version": self.store.schema_version(),
            "events": int(counts["events"].sum()) if not counts.empty else 0,
            "embedded": int(counts["embedded"].sum()) if not counts.empty else 0,
            "pending": int(counts["pending"].sum()) if not counts.empty else 0,
            "failed": int(counts["failed"].sum()) if not counts.empty else 0,
            "backlog": self.backlog,
            "counts": counts,
        }


_ROW_KEYS = frozenset(
    {
        "id",
        "session_id",
        "role",
        "content",
        "namespace",
        "kind",
        "metadata",
        "importance",
        "tool_call_id",
        "tool_name",
        "tool_calls",
        "created_at",
        "graph_id",
        "task_id",
    }
)


def _miss(rec: dict, strategy: str, score: float, missed_by: float, reason: str) -> dict:
    return {
        "strategy": strategy,
        "id": rec["id"],
        "role": rec["role"],
        "content": rec["content"],
        "score": float(score),
        "missed_by": float(missed_by),
        "reason": reason,
    }


@atexit.register
def _close_all() -> None:  # stop worker threads so interpreter exit never hangs
    for memory in list(_OPEN):
        with contextlib.suppress(Exception):
            memory.close()
