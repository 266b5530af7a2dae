"""Finding memories: ``search`` in every mode and the tri-hybrid ``get_context``.

One dispatch for every relevance ranking:

* ``vector`` — exact cosine top-k from the in-memory index (filters select the
  rows scored); DuckDB's ``list_cosine_similarity`` ranking
  (``store.vectors.similar``) gives the same answer;
* ``keyword`` — BM25 from the keyword index;
* ``hybrid`` — cosine fused with BM25 and neighbouring turns
  (:mod:`nbmemory.retrieval.hybrid`).

With a reranker (:mod:`nbmemory.retrieval.rerank`), every mode's best
``rerank_top_n`` candidates, and those of the context's relevance, are re-scored
by it and re-ordered.
"""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from ..config import Settings
from ..errors import EmbedderError, InvalidInput
from ..store import READ_COLUMNS, Store
from ..validation import (
    check_choice,
    check_flag,
    check_limit,
    check_name,
    check_text,
    check_unit_interval,
    date_range,
    scope_filters,
    shown,
    utcnow,
)
from .context import Context, context_parameters, merge
from .corrections import hits_corrections_first
from .corrections import pool as corrections_pool
from .embedders import Embedder
from .fusion import weights_vector
from .hit_rows import by_similarity, hit_records
from .hybrid import Candidates, HybridHit, find_candidates, hybrid_rank, keyword_pass
from .indexes import Indexes
from .passages import passage_columns
from .rerank import Reranker, rerank_frame
from .salience import SalientIds
from .working_memory import WorkingMemory

#: Columns of :meth:`Retriever.search`'s answer.
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
    "passage_start",
    "passage_stop",
]

#: Rankings :meth:`Retriever.search` offers.
SEARCH_MODES = ("hybrid", "vector", "keyword")
_QUERY_CACHE = 256


class Retriever:
    """Search and context over one store, its indexes and working memory."""

    def __init__(
        self,
        store: Store,
        indexes: Indexes,
        working: WorkingMemory,
        embedder: Embedder,
        settings: Callable[[], Settings],
        *,
        namespace: Callable[[str | None], str],
        touch: Callable[[str, str], None] = lambda namespace, session_id: None,
        dim: Callable[[], int | None] = lambda: None,
        token_counter: Callable[[str], int] | None = None,
        reranker: Reranker | None = None,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        #: The store's time (naive UTC): what "yesterday" in a question is read against.
        self.clock = clock
        self.store = store
        self.indexes = indexes
        self.working = working
        self.embedder = embedder
        self._settings = settings
        self._namespace = namespace
        self._touch = touch
        self._dim = dim
        self.token_counter = token_counter
        #: Re-scores the best candidates of search and of the context's relevance (None: off)
        self.reranker = reranker
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        #: The salient ids of each namespace, kept in step with the store.
        self.salient_ids = SalientIds(store)

    @property
    def model(self) -> str:
        return self.embedder.name

    # -- the query ------------------------------------------------------------------------
    def settings_of(self, settings: Any) -> Settings:
        """The settings of one call: those given (checked), else the store's."""
        if settings is None:
            return self._settings()
        if not isinstance(settings, Settings):
            raise InvalidInput(f"settings must be a Settings, got {type(settings).__name__}")
        return settings

    def embed_query(self, text: str) -> np.ndarray:
        """The query's vector (cached for the last 256 distinct queries)."""
        text = check_text(text, "query")
        cached = self._queries.get(text)
        if cached is not None:
            self._queries.move_to_end(text)
            return cached
        shown = text if len(text) <= 80 else text[:80] + "…"
        try:
            vectors = np.asarray(self.embedder.embed([text]), dtype=np.float32)
        except Exception as exc:  # a broken model is an EmbedderError, not a raw traceback
            first = str(exc).splitlines()[0] if str(exc) else ""
            raise EmbedderError(
                f"the embedding model failed on the query {shown!r}: {type(exc).__name__}: {first}"
            ) from exc
        problem = _query_problem(vectors, self._dim())
        if problem:
            raise EmbedderError(
                f"the embedder returned an unusable vector for the query {shown!r} ({problem}); "
                "check the model, or retry"
            )
        vector = vectors[0]
        self._queries[text] = vector
        if len(self._queries) > _QUERY_CACHE:
            self._queries.popitem(last=False)
        return vector

    # -- search -------------------------------------------------------------------------
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
        settings: Settings | None = None,
    ) -> pd.DataFrame:
        """Memories most relevant to ``query``, best first.

        ``mode`` is ``"hybrid"`` (cosine similarity fused with BM25 keywords and
        neighbouring turns: the default of the ``hybrid`` profile), ``"vector"``
        (plain cosine ranking: the ``spec`` profile) or ``"keyword"`` (BM25 only).
        Every row has its cosine ``similarity``; ``score`` is what it was ranked by
        and ``signals`` says which signals found it.  ``threshold`` keeps only hits
        whose cosine similarity is >= threshold (``df.attrs["best_similarity"]``
        then tells how close the best memory came when nothing passed).
        ``session_id``, ``role``, ``kind``, ``filters`` and ``since``/``until``
        narrow the search.  ``settings`` tries other settings for this call only.
        With a reranker, the best ``rerank_top_n`` candidates are re-ordered by
        its score (the ``rerank_score`` column; ``score`` stays the first stage's).
        """
        s = self.settings_of(settings)
        limit = check_limit(limit, "limit")
        if threshold is not None:
            threshold = check_unit_interval(threshold, "threshold", low=-1.0)
        mode = check_choice(s.search_mode if mode is None else mode, SEARCH_MODES, "search mode")
        flt = scope_filters(filters, session_id=session_id, role=role, kind=kind)
        start, end = date_range(since, until)
        ns = self._namespace(namespace)
        vector = self.embed_query(query)
        reranker = self.reranker if limit else None
        wanted = limit if reranker is None else max(limit, s.rerank_top_n)
        if mode == "vector":
            hits = self.vector_search(
                vector, ns, limit=wanted, threshold=threshold, filters=flt, since=start, until=end
            )
            hits["score"] = hits["similarity"]
            hits["keyword_score"] = np.nan
            hits["signals"] = "vector"
        else:
            allowed = self._allowed_ids(ns, flt, start, end)
            hybrid = mode == "hybrid"
            ranked = self.rank(
                query, vector, ns, allowed=allowed, settings=s, threshold=threshold, mode=mode,
                limit=corrections_pool(wanted, s.signal_weights) if hybrid else wanted,
            )  # fmt: skip
            hits = self.hits_frame(ranked, query if hybrid else None, s, limit=wanted)
        columns = SEARCH_COLUMNS
        if reranker is not None:
            hits = rerank_frame(hits, query, reranker, top_n=s.rerank_top_n, limit=limit)
            columns = [*SEARCH_COLUMNS, "rerank_score"]
        frame = hits.reindex(columns=columns)
        spans = self.indexes.passage_spans(self.model, vector, list(frame["id"]), ns)
        passage_columns(frame, spans)
        frame.attrs.update(query=query, threshold=threshold, mode=mode)
        if threshold is not None and frame.empty:
            best = self.vector_search(vector, ns, limit=1, filters=flt, since=start, until=end)
            frame.attrs["best_similarity"] = (
                None if best.empty else float(best["similarity"].iloc[0])
            )
        self.indexes.prepare_lookups()  # after the answer: the thread does not slow it
        return frame

    def ranked(
        self,
        query: str,
        *,
        limit: int,
        mode: str = "hybrid",
        namespace: str | None = None,
        settings: Settings | None = None,
    ) -> list[HybridHit]:
        """The hits :meth:`search` ranks for ``query`` in ``hybrid`` or ``keyword`` mode
        (no filters, threshold or reranker), without reading their rows or building a
        frame: what an evaluation asks thousands of times, and where a search spent
        about a third of its time."""
        if mode not in ("hybrid", "keyword"):
            raise InvalidInput(f"ranked() ranks in hybrid or keyword mode, not {shown(mode)}")
        s = self.settings_of(settings)
        ns = self._namespace(namespace)
        limit = check_limit(limit, "limit")
        hybrid = mode == "hybrid"
        hits = self.rank(
            query, self.embed_query(query), ns, threshold=None, mode=mode, settings=s,
            limit=corrections_pool(limit, s.signal_weights) if hybrid else limit,
        )  # fmt: skip
        if hybrid:  # as search() orders them
            rows = self._rows(h.id for h in hits)
            hits = hits_corrections_first(hits, query, rows, s.signal_weights)[:limit]
        self.indexes.prepare_lookups()
        return hits

    def vector_search(
        self,
        vector: np.ndarray,
        namespace: str | None,
        *,
        limit: int,
        threshold: float | None = None,
        strict: bool = False,
        filters: dict[str, Any] | None = None,
        since: Any = None,
        until: Any = None,
        exclude_ids: Iterable[str] = (),
    ) -> pd.DataFrame:
        """Exact cosine top-``limit``, best first (``similarity`` column).

        Answered from the in-memory index; filters (session, role, kind, dates ...)
        select the allowed rows with one query on ``events`` and only those are
        scored.  The same answer as
        DuckDB's ``list_cosine_similarity`` ranking (``store.vectors.similar``),
        ties broken the same way (newest first, then id).
        """
        allowed = self._allowed_ids(namespace, filters or {}, since, until)
        hits = self.indexes.searcher(self.model, namespace).search(
            vector, limit, namespace=namespace, threshold=threshold, strict=strict,
            exclude_ids=exclude_ids, allowed=allowed,
        )  # fmt: skip
        columns = [*READ_COLUMNS, "similarity"]
        if hits:
            rows = by_similarity(hits, self._rows([event_id for event_id, _ in hits]))
            frame = pd.DataFrame.from_records(rows[:limit], columns=columns)
        else:
            frame = pd.DataFrame(columns=columns)
        self.indexes.prepare_lookups()  # a filter looked ids up: see search()
        return frame

    def _allowed_ids(
        self, namespace: str | None, filters: dict[str, Any], since: Any, until: Any
    ) -> set[str] | None:
        """Ids passing the filters (None when there are none: everything in the namespace)."""
        if not filters and since is None and until is None:
            return None
        return set(
            self.store.events.ids(namespace=namespace, filters=filters, since=since, until=until)
        )

    def rank(
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
        settings: Settings | None = None,
        keyword_pass: float | None = None,
    ) -> list[HybridHit]:
        """Keyword or hybrid ranking from the in-memory indexes."""
        s = self.settings_of(settings)
        vectors = self.indexes.searcher(self.model, namespace)
        keywords = self.indexes.keywords()
        if mode == "keyword":
            # with a cosine threshold, look further down the keyword ranking
            wanted_top = limit if threshold is None else max(limit * 20, 200)
            ranked = keywords.score_array(query, namespace, allowed=allowed, top=wanted_top).top(
                wanted_top
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
            vectors, keywords, query, vector, namespace=namespace, limit=limit, floor=threshold,
            strict=strict, candidates=max(s.hybrid_candidates, limit), allowed=allowed,
            weights=weights_vector(s.fusion_weights, s.signal_weights),
            diversity=s.diversity_weight, keyword_scale=s.signal_weights.get("keywords", 1.0),
            keyword_pass=keyword_pass, now=self.clock(),
        )  # fmt: skip

    def candidates(
        self,
        query: str,
        namespace: str | None = None,
        *,
        floor: float | None = None,
        settings: Settings | None = None,
    ) -> Candidates | None:
        """The candidates hybrid ``search`` scores for ``query``, with their features
        (what :func:`nbmemory.research.fitting.fit_weights` learns from)."""
        s = self.settings_of(settings)
        return find_candidates(
            self.indexes.searcher(self.model, self._namespace(namespace)), self.indexes.keywords(),
            query, self.embed_query(query), namespace=self._namespace(namespace), floor=floor,
            candidates=s.hybrid_candidates, now=self.clock(),
        )  # fmt: skip

    def hits_frame(
        self, hits: list[HybridHit], query: str | None = None, s: Settings | None = None,
        limit: int | None = None,
    ) -> pd.DataFrame:  # fmt: skip
        """Stored rows of the best ``limit`` ranked hits (None: all), in rank order, with
        their scores (with ``query`` and ``s``, later corrections first: :mod:`.corrections`)."""
        columns = [*READ_COLUMNS, "similarity", "score", "keyword_score", "signals"]
        if not hits:
            return pd.DataFrame(columns=columns)
        rows = self._rows([hit.id for hit in hits])
        if query is not None and s is not None:
            hits = hits_corrections_first(hits, query, rows, s.signal_weights)
        records = hit_records(hits[:limit], rows)
        return pd.DataFrame.from_records(records, columns=columns)

    def _rows(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The stored rows of these events by id (one query; deleted ones are missing)."""
        wanted = list(dict.fromkeys(ids))
        return {row["id"]: row for row in self.store.events.rows(wanted)} if wanted else {}

    # -- the tri-hybrid context ------------------------------------------------------------
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
        settings: Settings | None = None,
    ) -> Context:
        """The tri-hybrid context for a session: what an agent's next prompt should hold.

        recency: the session's last ``recency_limit`` (10) events, from working memory;
        salience: memories of the namespace with importance >= ``salience_threshold``
        (0.8), up to ``salience_limit`` (5): in the ``hybrid`` profile those closest
        to ``query`` (see :meth:`salient`), in ``spec`` the most important; relevance: similarity to ``query`` >
        ``relevance_threshold`` (the profile's: 0.65 spec, 0.2 hybrid), up to
        ``relevance_limit`` (5), re-ordered by the reranker when there is one (its
        best ``relevance_limit`` of the first ``rerank_top_n``).  Deduplicated by id.
        ``explain=True`` also collects the near misses (candidates just under a
        threshold) in ``context.near_misses``.
        """
        s = self.settings_of(settings)
        session_id = check_name(session_id, "session_id")
        explain = check_flag(explain, "explain")
        ns = self._namespace(namespace)
        p = context_parameters(
            s,
            recency_limit=recency_limit,
            salience_threshold=salience_threshold,
            salience_limit=salience_limit,
            relevance_threshold=relevance_threshold,
            relevance_limit=relevance_limit,
            max_tokens=max_tokens,
        )
        recency = (
            self.working.recent(ns, session_id, p["recency_limit"]) if p["recency_limit"] else []
        )
        vector = None
        by_query = p["relevance_limit"] or (p["salience_limit"] and s.salience_order == "query")
        if query is not None and by_query:
            vector = self.embed_query(query)
        salient_by = vector if s.salience_order == "query" else None
        relevance: list[dict] = []
        if (
            salient_by is not None
            and p["relevance_limit"]
            and s.search_mode == "hybrid"
            and self.reranker is None
        ):  # both strategies ranked from the indexes: their rows read in one query
            ranked = self._ranked_relevance(query or "", salient_by, ns, s, p)
            hits = self._salient_hits(
                ns, salient_by, threshold=p["salience_threshold"], limit=p["salience_limit"]
            )
            rows = self._rows([hit.id for hit in ranked] + [event_id for event_id, _ in hits])
            ranked = hits_corrections_first(ranked, query or "", rows, s.signal_weights)
            relevance = hit_records(ranked[: p["relevance_limit"]], rows)
            salience = self._salient_records(
                ns, hits, rows, threshold=p["salience_threshold"], limit=p["salience_limit"]
            )
        else:
            salience = self.salient(
                ns, salient_by, threshold=p["salience_threshold"], limit=p["salience_limit"]
            )
            if vector is not None and p["relevance_limit"]:
                relevance = self._relevant(query or "", vector, ns, s, p)
        if vector is not None and relevance:  # which part of a long memory matched
            self.indexes.add_passages(self.model, vector, relevance)
        self._touch(ns, session_id)  # once every strategy answered: a failed call changes nothing
        budget = p.pop("max_tokens")
        context = Context(
            session_id=session_id,
            query=query,
            namespace=ns,
            items=merge(recency, salience, relevance),
            parameters=p,
            max_tokens=budget,
            **({"token_counter": self.token_counter} if self.token_counter else {}),
        )
        if explain:
            context.near_misses = self._near_misses(ns, vector, context, p)
        self.indexes.prepare_lookups()  # after the answer: the thread does not slow it
        return context

    def salient(
        self, namespace: str, vector: np.ndarray | None, *, threshold: float, limit: int
    ) -> list[dict[str, Any]]:
        """The salience strategy: up to ``limit`` memories with importance >= ``threshold``.

        With a query ``vector``, the salient memories closest to it come first (a
        store keeps many durable facts; the allergy matters to a dinner question,
        the budget to a booking one), then any salient memory not embedded yet,
        most important first.  Without one, the most important, newest first.
        Each record carries ``similarity`` when it was ranked by one.
        """
        if not limit:
            return []
        if vector is None:
            return self.store.events.by_importance(namespace, threshold, limit)
        hits = self._salient_hits(namespace, vector, threshold=threshold, limit=limit)
        rows = self._rows(event_id for event_id, _ in hits)
        return self._salient_records(namespace, hits, rows, threshold=threshold, limit=limit)

    def _salient_hits(
        self, namespace: str, vector: np.ndarray, *, threshold: float, limit: int
    ) -> list[tuple[str, float]]:
        """(id, similarity) of the salient memories closest to ``vector``."""
        candidates = self.salient_ids.get(namespace, threshold) if limit else frozenset()
        if not candidates:
            return []
        hits: list[tuple[str, float]] = self.indexes.searcher(self.model, namespace).search(
            vector, limit, namespace=namespace, allowed=candidates
        )
        return hits

    def _salient_records(
        self,
        namespace: str,
        hits: list[tuple[str, float]],
        rows: dict[str, dict[str, Any]],
        *,
        threshold: float,
        limit: int,
    ) -> list[dict[str, Any]]:
        """The salient hits' records, best first; then salient memories still waiting
        for their vector, most important first, up to ``limit``."""
        if not limit:
            return []
        records = by_similarity(hits, rows)[:limit]
        if len(records) < limit and (hits or self.salient_ids.get(namespace, threshold)):
            seen = {record["id"] for record in records}
            rest = self.store.events.by_importance(namespace, threshold, limit + len(seen))
            records += [r for r in rest if r["id"] not in seen][: limit - len(records)]
        return records

    def _relevant(
        self, query: str, vector: np.ndarray, namespace: str, s: Settings, p: dict[str, Any]
    ) -> list[dict]:
        limit, threshold = p["relevance_limit"], p["relevance_threshold"]
        wanted = limit if self.reranker is None else max(limit, s.rerank_top_n)
        if s.search_mode == "hybrid":
            frame = self.hits_frame(
                self._ranked_relevance(query, vector, namespace, s, p), query, s, limit=wanted
            )
        else:
            frame = self.vector_search(
                vector, namespace, limit=wanted, threshold=threshold, strict=True
            )
        if self.reranker is not None:
            frame = rerank_frame(frame, query, self.reranker, top_n=s.rerank_top_n, limit=limit)
        records: list[dict] = frame.to_dict(orient="records")
        return records

    def _ranked_relevance(
        self, query: str, vector: np.ndarray, namespace: str, s: Settings, p: dict[str, Any]
    ) -> list[HybridHit]:
        """The hybrid relevance strategy's hits (before any reranker), as many more as
        the corrections step looks at (:func:`.corrections.pool`): the caller keeps
        the number it wants after that step."""
        limit = p["relevance_limit"]
        wanted = limit if self.reranker is None else max(limit, s.rerank_top_n)
        return self.rank(
            query, vector, namespace, limit=corrections_pool(wanted, s.signal_weights),
            threshold=p["relevance_threshold"],
            mode="hybrid", strict=True, settings=s, keyword_pass=keyword_pass(p),
        )  # fmt: skip

    def _near_misses(
        self, namespace: str, vector: np.ndarray | None, context: Context, p: dict[str, Any]
    ) -> pd.DataFrame:
        """Candidates a strategy left out, with how far they were from getting in."""
        taken = set(context.ids)
        rows: list[dict] = []
        threshold, limit = p["relevance_threshold"], p["relevance_limit"]
        if vector is not None:
            close = self.vector_search(vector, namespace, limit=limit + 5, exclude_ids=taken)
            for rec in close.to_dict(orient="records"):
                missed_by = threshold - rec["similarity"]
                reason = (
                    f"similarity {rec['similarity']:.3f} <= threshold {threshold:.2f}"
                    if missed_by >= 0
                    else f"over the threshold but past the limit of {limit}"
                )
                rows.append(_miss(rec, "relevance", rec["similarity"], max(missed_by, 0.0), reason))
        salience = p["salience_threshold"]
        for rec in self.store.events.by_importance(namespace, salience, 5, below=True):
            if rec["id"] in taken:
                continue
            reason = f"importance {rec['importance']:.2f} < {salience:.2f}"
            rows.append(
                _miss(rec, "salience", rec["importance"], salience - rec["importance"], reason)
            )
        return pd.DataFrame(
            rows, columns=["strategy", "id", "role", "content", "score", "missed_by", "reason"]
        )


def _query_problem(vectors: np.ndarray, expected: int | None) -> str | None:
    if vectors.ndim != 2 or vectors.shape[0] != 1:
        return f"shape {vectors.shape} instead of one vector"
    if not np.isfinite(vectors).all():
        return "NaN or infinite values"
    if not np.any(vectors):
        return "the zero vector"
    if expected is not None and vectors.shape[1] != expected:
        return f"{vectors.shape[1]} dimensions, stored vectors have {expected}"
    return None


def _miss(rec: dict, strategy: str, score: float, missed_by: float, reason: str) -> dict:
    miss = {"strategy": strategy, **{k: rec[k] for k in ("id", "role", "content")}}
    return {**miss, "score": float(score), "missed_by": float(missed_by), "reason": reason}
