"""A vector budget: the most memory one model's vectors may take in this process.

Without a budget one :class:`~.vector_index.VectorIndex` holds every vector of the
model.  With ``vector_budget_mb`` set and the model's vectors larger than it, each
namespace searched again gets an index of its own, kept while it is among the
most recently used that fit (least recently used ones are dropped first); a
namespace larger than the whole budget, or a search across namespaces, is
answered by :class:`SqlVectors` from DuckDB.  Either way the answer is the
in-memory index's: DuckDB ranks by its cosine and the rows it returns are scored
again here exactly as the index scores them (normalised float32 rows, one
matrix-vector product), fetching more until the last rows DuckDB left out
cannot reach the answer.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa

from ..store.changes import Change, Vectors
from ..store.vector_scan import VectorScan
from ..store.vectors import passage_key
from .blas import one_thread
from .vector_index import VectorIndex, best_per_event, event_of, normalise_in_place, unit_norm

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ..store import Store


class WholeIndexes(Protocol):
    """What the budget needs of :class:`~.indexes.Indexes` (no import: no cycle)."""

    def whole(self, model: str) -> VectorIndex | None: ...
    def vectors(self, model: str) -> VectorIndex: ...
    def drop_whole(self, model: str) -> None: ...
    def read_vectors(
        self, index: VectorIndex, batches: Iterator[pa.RecordBatch] | None, count: int | None
    ) -> None: ...


#: How far DuckDB's cosine may be from ours (float32 against DOUBLE sums): a row
#: DuckDB scored this much below the last one returned cannot be in the answer.
SCORE_SLACK = 1e-4


def _unit(query: np.ndarray, dim: int) -> np.ndarray | None:
    """The query as the index scores it (float32 of the float64 unit vector)."""
    q = np.asarray(query, dtype=np.float32).reshape(-1)
    norm = unit_norm(q)
    if norm == 0 or q.shape[0] != dim:
        return None
    return (q.astype(np.float64) / norm).astype(np.float32)


def _scores(table: pa.Table, unit: np.ndarray, dim: int) -> np.ndarray:
    """The index's scores of the rows of ``table`` (its ``embedding`` column)."""
    vectors = table.column("embedding").combine_chunks().flatten()
    block = vectors.to_numpy(zero_copy_only=False).astype(np.float32).reshape(-1, dim)
    normalise_in_place(block)
    with one_thread(block.size):
        scores = block @ unit
    return np.clip(scores, -1.0, 1.0)


class SqlVectors:
    """The search of one model's vectors in one namespace (or all), read from DuckDB
    at each call: the same methods and answers as a :class:`VectorIndex`."""

    def __init__(self, scan: VectorScan, model: str, dim: int, namespace: str | None) -> None:
        self.scan, self.model, self.dim, self.namespace = scan, model, dim, namespace

    @property
    def passage_rows(self) -> int:
        """Not counted here: 1, so callers look for passages (a read finds none)."""
        return 1

    def search(
        self,
        query: np.ndarray,
        limit: int,
        *,
        namespace: str | None,
        threshold: float | None = None,
        strict: bool = False,
        exclude_ids: Iterable[str] = (),
        allowed: AbstractSet[str] | None = None,
        score_range: list[float] | None = None,
        matched: dict[str, int] | None = None,
    ) -> list[tuple[str, float]]:
        """See :meth:`VectorIndex.search`."""
        unit = _unit(query, self.dim)
        if unit is None or limit <= 0 or (allowed is not None and not allowed):
            return []
        scope: dict[str, Any] = {
            "allowed": None if allowed is None else sorted(allowed),
            "exclude": sorted(set(exclude_ids)),
        }
        if score_range is not None:  # over the rows searched, before exclusions
            ends = self.scan.extremes(
                self.model, self.dim, namespace, unit, allowed=scope["allowed"]
            )
            if ends.num_rows:
                scores = _scores(ends, unit, self.dim)
                score_range[:] = [float(scores.min()), float(scores.max())]
        fetch = 2 * limit + 16
        while True:
            top = self.scan.top(self.model, self.dim, namespace, unit, fetch, **scope)
            if not top.num_rows:
                return []
            keys = top.column("id").to_pylist()
            rows = top
            if any(event_of(key)[1] for key in keys):  # long texts: all their passages
                rows = self.scan.of_events(
                    self.model, self.dim, sorted({event_of(k)[0] for k in keys})
                )
            hits = self._ranked(rows, unit, limit, threshold, strict, matched)
            complete = top.num_rows < fetch  # every row in scope was read
            last = float(top.column("score")[top.num_rows - 1].as_py())
            if complete or (len(hits) >= limit and hits[limit - 1][1] > last + SCORE_SLACK):
                return hits
            if threshold is not None and last + SCORE_SLACK < threshold:
                return hits  # nothing left out can pass the threshold
            fetch *= 4

    def _ranked(
        self,
        rows: pa.Table,
        unit: np.ndarray,
        limit: int,
        threshold: float | None,
        strict: bool,
        matched: dict[str, int] | None,
    ) -> list[tuple[str, float]]:
        """Events by their best row, as the index ranks them (ties in table order)."""
        scores = _scores(rows, unit, self.dim)
        keys = rows.column("id").to_pylist()
        rowids = rows.column("rowid").to_numpy()
        keep = np.ones(len(keys), dtype=bool)
        if threshold is not None:
            keep = scores > threshold if strict else scores >= threshold
        order = [i for i in np.lexsort((rowids, -scores)) if keep[i]]
        ranked = [(keys[i], float(scores[i])) for i in order]
        if not any(event_of(key)[1] for key, _ in ranked):
            if len(ranked) > limit:  # every row tied with the limit-th, as the index does
                ranked = [hit for hit in ranked if hit[1] >= ranked[limit - 1][1]]
            if matched is not None:
                matched.update((key, 0) for key, _ in ranked)
            return ranked
        return best_per_event(ranked, limit, matched)

    def similarities(
        self, query: np.ndarray, ids: Iterable[str], matched: dict[str, int] | None = None
    ) -> dict[str, float]:
        """See :meth:`VectorIndex.similarities`."""
        unit = _unit(query, self.dim)
        wanted = list(dict.fromkeys(ids))
        if unit is None or not wanted:
            return {}
        rows = self.scan.of_events(self.model, self.dim, wanted)
        if not rows.num_rows:
            return {}
        best: dict[str, float] = {}
        for key, score in zip(
            rows.column("id").to_pylist(), _scores(rows, unit, self.dim), strict=True
        ):
            event_id, passage = event_of(key)
            if event_id not in best or score > best[event_id]:
                best[event_id] = float(score)
                if matched is not None:
                    matched[event_id] = passage
        return best


#: What answers a vector search (see :meth:`VectorBudget.searcher`).
Searcher = VectorIndex | SqlVectors


class VectorBudget:
    """Which index, or DuckDB, answers a search when a budget is set."""

    def __init__(self, store: Store) -> None:
        self.namespaces = NamespaceIndexes()
        self.scan = VectorScan(store)
        #: model -> (its vectors' length, rows per namespace): counted once (a count
        #: reads every vector's length), then kept in step with the vectors written.
        self._sizes: dict[str, tuple[int | None, dict[str, int]]] = {}

    def sizes(self, model: str) -> tuple[int | None, dict[str, int]]:
        if model not in self._sizes:
            self._sizes[model] = self.scan.namespace_sizes(model)
        return self._sizes[model]

    def fits(self, model: str, budget_mb: float) -> bool:
        """Whether every vector of ``model`` fits in ``budget_mb``."""
        dim, sizes = self.sizes(model)
        return dim is None or sum(sizes.values()) * dim * 4 <= budget_mb * 2**20

    def follow(self, change: Change, lost: list[str]) -> None:
        """Count the vectors a change wrote; forget the counts when it removed some."""
        self.namespaces.follow(change, lost)
        models = {group.model for group in change.vectors}
        for model in list(self._sizes):
            if lost or (models and model not in models):  # rows gone, or moved to another model
                del self._sizes[model]
        for group in change.vectors:
            dim, sizes = self._sizes.get(group.model, (None, {}))
            if dim is None:
                continue
            if group.matrix.shape[1] != dim:
                del self._sizes[group.model]
                continue
            for namespace in group.namespaces:
                sizes[namespace] = sizes.get(namespace, 0) + 1

    def invalidate(self) -> None:
        self.namespaces.invalidate()
        self._sizes.clear()

    def searcher(
        self,
        indexes: WholeIndexes,
        model: str,
        namespace: str | None,
        budget: int,
        search: bool = True,
    ) -> VectorIndex | SqlVectors:
        """See :meth:`Indexes.searcher` (called under the store's lock; ``budget`` in
        bytes)."""
        whole = indexes.whole(model)
        if whole is not None and len(whole) * (whole.dim or 0) * 4 <= budget:
            return whole
        dim, sizes = self.sizes(model)
        if dim is None or sum(sizes.values()) * dim * 4 <= budget:
            self.namespaces.drop_model(model)
            return indexes.vectors(model)
        indexes.drop_whole(model)  # over the budget: never held whole
        if namespace is None:
            return SqlVectors(self.scan, model, dim, None)
        index = self.namespaces.get(model, namespace)
        needed = sizes.get(namespace, 0) * dim * 4
        if index is None and (
            needed > budget or not search or not self.namespaces.admit(model, namespace)
        ):
            return SqlVectors(self.scan, model, dim, namespace)
        self.namespaces.make_room(needed - (0 if index is None else len(index) * dim * 4), budget)
        if index is None:
            index = VectorIndex(model)
            with index._lock:
                batches = self.scan.batches(model, dim, namespace)
                indexes.read_vectors(index, batches, sizes.get(namespace, 0))
            self.namespaces.held[(model, namespace)] = index
        return index


class NamespaceIndexes:
    """The indexes of single namespaces kept under a budget, least recently used first."""

    def __init__(self) -> None:
        #: (model, namespace) -> its index, least recently used first.
        self.held: OrderedDict[tuple[str, str], VectorIndex] = OrderedDict()
        #: Namespaces searched once in DuckDB since they were last held.
        self._once: set[tuple[str, str]] = set()

    def admit(self, model: str, namespace: str) -> bool:
        """Whether a namespace not held earns an index: at its second search since it
        was last held.  A namespace searched once in a while is answered by DuckDB
        (tens of ms) rather than read into memory (a second at 250k) only to push out
        one searched often."""
        key = (model, namespace)
        if key in self._once:
            self._once.discard(key)
            return True
        self._once.add(key)
        return False

    def nbytes(self) -> int:
        return sum(len(index) * (index.dim or 0) * 4 for index in self.held.values())

    def get(self, model: str, namespace: str) -> VectorIndex | None:
        """The live index of the namespace, now the most recently used (None if none)."""
        index = self.held.get((model, namespace))
        if index is None or index.stale:
            self.held.pop((model, namespace), None)
            return None
        self.held.move_to_end((model, namespace))
        return index

    def make_room(self, needed: int, budget: int) -> None:
        """Drop the least recently used indexes until ``needed`` more bytes fit."""
        while self.held and self.nbytes() + needed > budget:
            self.held.popitem(last=False)

    def drop_model(self, model: str) -> None:
        for key in [key for key in self.held if key[0] == model]:
            del self.held[key]

    def follow(self, change: Change, lost: list[str]) -> None:
        """Apply the vectors a change wrote, and the rows it removed, to each index."""
        for (model, namespace), index in list(self.held.items()):
            with index._lock:
                if index.stale:
                    continue
                if lost:
                    index.remove(lost)
                for group in change.vectors:
                    if group.model != model:
                        index.remove(group.ids)  # a vector of another model now
                        continue
                    mine = [i for i, ns in enumerate(group.namespaces) if ns == namespace]
                    if mine:
                        _upsert(index, group, mine)

    def invalidate(self) -> None:
        self.held.clear()


def _upsert(index: VectorIndex, group: Vectors, rows: list[int]) -> None:
    keys = [group.ids[i] for i in rows]
    if group.passages is not None:
        keys = [passage_key(key, group.passages[i]) for key, i in zip(keys, rows, strict=True)]
    index.upsert(keys, [group.namespaces[i] for i in rows], group.matrix[rows])
