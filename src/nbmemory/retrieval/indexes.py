"""The in-memory indexes of a store, kept in step with it by its change announcements.

One exact vector index per embedding model and one BM25 keyword index, built
lazily from the table on first use.  Every committed change the store announces
is applied in place (new events, new text, vectors written, deletions); an
unknown change marks them stale and the next use rebuilds.  Builds and
announcements both run under the store's lock, so a build never misses a change
and a change is never applied twice.
"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from ..store import Change, Store
from .keyword_index import KeywordIndex
from .vector_index import VectorIndex, normalise_rows


class Indexes:
    """The vector indexes (by model) and the keyword index of one store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._vectors: dict[str, VectorIndex] = {}
        self._keywords = KeywordIndex()
        store.listen(self.follow)

    def vectors(self, model: str) -> VectorIndex:
        """The vector index of ``model``, rebuilt from the table if it is stale."""
        self.store.refresh()  # another process may have written: then it is stale
        index = self._vectors.get(model)
        if index is None:
            index = self._vectors.setdefault(model, VectorIndex(model))
        if index.stale:
            with self.store._lock, index._lock:  # lock order: store, then index
                if index.stale:
                    self._build_vectors(index)
        return index

    def keywords(self) -> KeywordIndex:
        """The keyword index, rebuilt from the table if it is stale."""
        self.store.refresh()
        index = self._keywords
        if index.stale:
            with self.store._lock, index._lock:
                if index.stale:
                    index.rebuild(self.store.events.text_rows())
                    self._unless_committed(index)
        return index

    def _build_vectors(self, index: VectorIndex) -> None:
        """Fill the index from the table, a batch at a time into one preallocated matrix
        (normalised in place): memory holds the vectors once, not three times."""
        count, dim = self.store.vectors.shape(index.model)
        dim = dim or index.dim or 0
        matrix = np.empty((count, dim), dtype=np.float32)
        ids: list[str] = []
        namespaces: list[str] = []
        filled = 0
        for batch in self.store.vectors.batches(index.model):
            lists = batch.column(2)
            keep = pc.equal(pc.list_value_length(lists), dim)
            if not pc.all(keep).as_py():  # a stray vector of another size is never compared
                batch = batch.filter(keep)
                lists = batch.column(2)
            block = lists.flatten().to_numpy(zero_copy_only=False).reshape(-1, dim)
            if filled + len(block) > len(matrix):  # another writer added rows since shape()
                grown = np.empty((max(2 * len(matrix), filled + len(block)), dim), np.float32)
                grown[:filled] = matrix[:filled]
                matrix = grown
            matrix[filled : filled + len(block)] = normalise_rows(block)
            filled += len(block)
            ids += batch.column(0).to_pylist()
            namespaces += batch.column(1).to_pylist()
        index.rebuild(ids, namespaces, matrix[:filled], normalised=True)
        self._unless_committed(index)

    def _unless_committed(self, index: VectorIndex | KeywordIndex) -> None:
        # built inside an open transaction, it may hold rows a rollback removes
        if self.store.in_transaction:
            index.stale = True

    # -- following the store ---------------------------------------------------------
    def follow(self, change: Change) -> None:
        """Apply one committed change (the store calls this under its lock)."""
        if change.unknown:
            self.invalidate()
            return
        self._follow_vectors(change)
        keywords = self._keywords
        with keywords._lock:
            if keywords.stale:
                return
            gone = change.deleted + [row[0] for row in change.retexted]
            if gone:
                keywords.remove(gone)
            deleted = set(change.deleted)
            texts = [
                (r["id"], r["namespace"], r["session_id"], r["content"], r["created_at"], r["seq"])
                for r in change.added
                if r["content"] is not None
            ]
            keywords.add(row for row in texts + change.retexted if row[0] not in deleted)

    def _follow_vectors(self, change: Change) -> None:
        lost = change.deleted + change.unvectored + [row[0] for row in change.retexted]
        for model, index in self._vectors.items():
            with index._lock:
                if index.stale:
                    continue
                written = [v for v in change.vectors if v.model == model]
                moved = [i for v in change.vectors if v.model != model for i in v.ids]
                if lost or moved:
                    index.remove(lost + moved)
                for vectors in written:
                    index.upsert(vectors.ids, vectors.namespaces, vectors.matrix)

    def invalidate(self) -> None:
        """Rebuild every index on its next use."""
        for index in self._vectors.values():
            index.stale = True
        self._keywords.stale = True

    def clear(self) -> None:
        """Drop what the indexes hold (the store closed)."""
        self._vectors.clear()
        self._keywords = KeywordIndex()
