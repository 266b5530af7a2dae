"""The in-memory indexes of a store, kept in step with it by its change announcements.

One exact vector index per embedding model and one BM25 keyword index, built
lazily from the table on first use.  Every committed change the store announces
is applied in place (new events, new text, vectors written, deletions); an
unknown change marks them stale and the next use rebuilds.  Builds and
announcements both run under the store's lock, so a build never misses a change
and a change is never applied twice.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import LargeStoreWarning
from ..store import Change, Store
from ..store.events import NO_TIME
from ..store.vectors import passage_key
from .bulk_refresh import BulkRefresh
from .index_cache import MAX_TAIL, FileState, IndexCache
from .keywords import KeywordIndex
from .passages import matched_spans
from .vector_budget import Searcher, VectorBudget
from .vector_index import VectorIndex, normalise_in_place

log = logging.getLogger(__name__)

#: Share of the machine's memory the vector matrix may need before a warning says so.
MEMORY_SHARE = 0.5


def physical_memory() -> int | None:
    """Bytes of RAM of this machine (None where the system does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


@dataclass
class Standing:
    """What an index holds of a saved copy: the copy's rows (the table's first
    ``rows`` when it was loaded or saved) and the state of its files then.  Kept
    while every change since only added rows after them, so a clean close can
    record where the rest are (:meth:`Indexes.closing_record`)."""

    rows: int
    files: dict[str, FileState | None]
    #: The keyword copy's last row as (created_at in epoch microseconds, seq).
    after: tuple[int, int] | None = None


#: The key of the keyword index in :attr:`Indexes._standing` and in the record of a check.
KEYWORDS = "keywords"


def vectors_key(model: str) -> str:
    """The key of ``model``'s vector index in :attr:`Indexes._standing` and the record."""
    return f"vectors/{model}"


def last_key(created: np.ndarray, seq: np.ndarray) -> tuple[int, int] | None:
    """The (created, seq) that sorts last, or None when some row has no time (those
    sort last in the table, first in the index) or there are none."""
    if not len(created) or bool((created == NO_TIME).any()):
        return None
    newest = int(created.max())
    return newest, int(seq[created == newest].max())


def warn_if_too_large(rows: int, dim: int) -> bool:
    """Warn (and say so) when ``rows`` vectors of ``dim`` float32 need over half of the RAM."""
    need = rows * dim * 4
    total = physical_memory()
    if total and need > total * MEMORY_SHARE:
        warnings.warn(
            LargeStoreWarning(
                f"the vectors of {rows:,} memories need {need / 2**30:.1f} GB in memory, over "
                f"half of this machine's {total / 2**30:.1f} GB: search will page to disk or "
                "run out of memory; split the memories over several stores (one per agent or "
                "project), or search with mode='keyword' (see docs/performance.md, Large stores)"
            ),
            stacklevel=4,
        )
        return True
    return False


class Indexes:
    """The vector indexes (by model) and the keyword index of one store."""

    def __init__(
        self,
        store: Store,
        cache: IndexCache | None = None,
        budget_mb: Callable[[], float | None] = lambda: None,
    ) -> None:
        self.store = store
        #: The vector budget in MB (the setting ``vector_budget_mb``, read at each search).
        self.budget_mb = budget_mb
        #: Indexes of single namespaces, when the model's vectors exceed the budget.
        self._budget = VectorBudget(store)
        #: Where the indexes are saved between processes (None: they are not).
        self.cache = cache
        self._vectors: dict[str, VectorIndex] = {}
        self._keywords = KeywordIndex()
        self._warned: set[str] = set()  # models whose size was warned about
        #: "keywords" or "vectors/<model>" -> what that index holds of its saved copy.
        self._standing: dict[str, Standing] = {}
        #: Counts every change followed, so a save finished in the background stands
        #: only when nothing changed while it was written.
        self._changes = 0
        #: Saves of a freshly built index running off the query path.
        self._saves: list[threading.Thread] = []
        #: Rebuilds of the saved copies after a bulk ingest (:meth:`refresh_saved`).
        self._bulk = BulkRefresh()
        #: The record of the last check as it held when the store was opened, while
        #: nothing an index holds has changed since (None: it did, or there was none):
        #: a clean close carries over what it says of the indexes this process left
        #: unloaded (a session searching in vector mode keeps the keyword copy's word).
        self._record_at_open = (
            None if cache is None or store.in_transaction else cache.record_for(cache.store_state())
        )
        store.listen(self.follow)

    def vectors(self, model: str) -> VectorIndex:
        """The vector index of ``model``, rebuilt from the table if it is stale."""
        self.store.refresh()  # another process may have written: then it is stale
        index = self._vectors.get(model)
        if index is None:
            index = self._vectors.setdefault(model, VectorIndex(model))
        if index.stale:
            with self.store.locked(), index._lock:  # lock order: store, then index
                if index.stale:
                    self._build_vectors(index)
                    self._unless_committed(index)
                    if model not in self._warned and warn_if_too_large(len(index), index.dim or 0):
                        self._warned.add(model)
        return index

    def searcher(self, model: str, namespace: str | None, *, search: bool = True) -> Searcher:
        """The model's whole index, or over a vector budget (:mod:`.vector_budget`) the
        namespace's or DuckDB (``search=False``: not counted as a search of it)."""
        budget_mb = self.budget_mb()
        if budget_mb is None:
            return self.vectors(model)
        self.store.refresh()
        with self.store.locked():
            return self._budget.searcher(self, model, namespace, int(budget_mb * 2**20), search)

    def whole(self, model: str) -> VectorIndex | None:
        """The model's whole index when it is held and current (None otherwise)."""
        return None if (index := self._vectors.get(model)) is None or index.stale else index

    def drop_whole(self, model: str) -> None:
        """Forget the model's whole index (a vector budget holds namespaces instead)."""
        self._vectors.pop(model, None)
        self._standing.pop(vectors_key(model), None)

    def keywords(self) -> KeywordIndex:
        """The keyword index, rebuilt from the table if it is stale."""
        self.store.refresh()
        index = self._keywords
        if index.stale:
            with self.store.locked(), index._lock:
                if index.stale:
                    self._fill_keywords(index)
                    self._unless_committed(index)
        return index

    def _fill_keywords(self, index: KeywordIndex) -> None:
        """From the saved copy plus the rows added since when it still matches the
        table, else from the table in bulk (and then saved)."""
        cache = self.cache
        self._bulk.built(KEYWORDS)
        if cache is not None and self._load_keywords(index, cache):
            return
        table = self.store.events.text_table()
        created, seq = table.column("created").to_numpy(), table.column("seq").to_numpy()
        index.rebuild_columns(
            table.column("id").to_pylist(),
            table.column("namespace"),
            table.column("session_id"),
            table.column("content"),
            created,
            seq,
        )
        self._standing.pop(KEYWORDS, None)
        if cache is not None and not self.store.in_transaction and len(table) >= cache.min_rows:
            arrays, hashes = index.to_arrays(), table.column("h").to_numpy()
            standing = (len(table), last_key(created, seq))
            self._in_background(KEYWORDS, lambda: cache.save_keywords(arrays, hashes), standing)

    def _load_keywords(self, index: KeywordIndex, cache: IndexCache) -> bool:
        state = self._store_state(cache)  # before anything is read
        saved = cache.load_keywords()
        if saved is None:
            return False
        n = len(saved.hashes)
        after = last_key(saved.arrays["created"][:n], saved.arrays["seq"][:n])
        trust = cache.checked(state, saved.files, KEYWORDS)
        added: list[Any] | None = None  # rows the table holds after the copy's
        if trust is not None and "rows" in trust:  # a clean close said where they are
            rows = trust["rows"]
            if after is not None and type(rows) is int and rows >= n:
                added = self.store.events.text_rows_after(*after)
            if added is None or n + len(added) != rows:
                trust, added = None, None
        seqs = None
        if trust is None:  # hash every row: does the table start with the copy's?
            seqs, hashes = self.store.events.text_hashes()
            tail = len(hashes) - n
            if tail < 0 or tail > n * MAX_TAIL or not np.array_equal(hashes[:n], saved.hashes):
                return False
        try:
            index.load_arrays(saved.arrays)
        except (ValueError, KeyError, IndexError) as exc:
            log.info("not using the saved keyword index: %s", exc)
            return False
        self._standing[KEYWORDS] = Standing(n, saved.files, after)
        if added:
            index.add(added)
        elif seqs is not None and len(seqs) > n:
            index.add(self.store.events.text_rows_of(seqs[n:].tolist()))
        elif seqs is not None:
            cache.mark_checked(state, saved.files, KEYWORDS)
        return True

    def _store_state(self, cache: IndexCache) -> FileState | None:
        """The store file's state, as a check of the saved copies may rely on: None inside
        a transaction (its rows are not in the file, and may yet be rolled back)."""
        return None if self.store.in_transaction else cache.store_state()

    def _build_vectors(self, index: VectorIndex) -> None:
        """Fill the index from its saved copy when that still matches the table, else
        from the table (and save it)."""
        cache = self.cache
        self._bulk.built(vectors_key(index.model))
        if cache is not None and self._load_vectors(index, cache):
            return
        self.read_vectors(index)
        key = vectors_key(index.model)
        self._standing.pop(key, None)
        if cache is not None and index.dim and not self.store.in_transaction:
            ids, hashes, _ = self.store.vectors.hashes(index.model, index.dim)
            state = index.state()
            if ids.to_pylist() == state[0]:  # the table's order: what the next process compares
                self._save_in_background(key, index.model, state, hashes)

    def _save_in_background(
        self,
        key: str,
        model: str,
        state: tuple[list[str], list[str], np.ndarray, np.ndarray],
        hashes: np.ndarray,
    ) -> None:
        """Write the saved copy of a freshly built vector index off the query path.

        The matrix given is the index's own (a view, not a copy): a later grow or
        compaction replaces the index's matrix, leaving this one intact; a vector
        replaced in place is a followed change, after which the copy does not stand
        (and the next process finds its hash changed).  The copy is written to a
        temporary name and renamed, so a process killed mid-save leaves no copy that
        could be read."""
        cache = self.cache
        assert cache is not None
        self._in_background(
            key, lambda: cache.save_vectors(model, *state, hashes), (len(state[0]), None)
        )

    def _in_background(
        self,
        key: str,
        write: Callable[[], dict[str, FileState | None] | None],
        standing: tuple[int, tuple[int, int] | None],
    ) -> None:
        """Run ``write`` (a save of ``key``'s copy) in a thread; the copy stands when
        written and nothing changed meanwhile."""
        changes = self._changes

        def save() -> None:
            try:
                files = write()
            except Exception as exc:  # pragma: no cover - a save is only an optimisation
                log.info("could not save the index %s: %s", key, exc)
                return
            if files is not None and self._changes == changes:
                self._standing[key] = Standing(standing[0], files, standing[1])

        self._saves = [thread for thread in self._saves if thread.is_alive()]
        thread = threading.Thread(target=save, name="nbmemory-index-save", daemon=True)
        self._saves.append(thread)
        thread.start()

    def wait_for_saves(self, timeout: float | None = None) -> None:
        """Wait for the refreshes and saves in the background (before a close locks)."""
        self._bulk.wait(timeout)
        self._wait_for_writes(timeout)

    def _wait_for_writes(self, timeout: float | None = None) -> None:
        """Wait for the saves only (they write files and never take the store's lock:
        safe to wait for while holding it)."""
        for thread in list(self._saves):
            thread.join(timeout)

    # -- the saved copies after a bulk ingest ---------------------------------------------
    def refresh_saved(self, model: str | None) -> bool:
        """Bring the saved copies up to date on a thread after a bulk ingest has been
        embedded, when one is due (see :mod:`.bulk_refresh`); True when one started."""
        cache = self.cache
        if cache is None or self.store.in_transaction or not self.store.sole_writer():
            return False
        return self._bulk.start_if_due(cache.min_rows, self._refresh, model)

    def _refresh(self, model: str | None) -> None:
        try:
            budget = self.budget_mb()
            if model is not None and (budget is None or self._budget.fits(model, budget)):
                self._behind(self._vectors.get(model), vectors_key(model))
                self.vectors(model)
            self._behind(self._keywords, KEYWORDS)
            self._bulk.rows_then = len(self.keywords())
        except Exception as exc:  # pragma: no cover - a refresh is only an optimisation
            log.info("could not refresh the saved indexes: %s", exc)

    def _behind(self, index: VectorIndex | KeywordIndex | None, key: str) -> None:
        """Mark a live index stale when it followed too many bulk rows (its rebuild from
        the table is saved); one a search built after the ingest is left alone."""
        if index is None:
            return
        with self.store.locked(), index._lock:
            if not index.stale and self._bulk.behind(key, len(index)):
                index.stale = True

    def _load_vectors(self, index: VectorIndex, cache: IndexCache) -> bool:
        state = self._store_state(cache)  # before anything is read
        saved = cache.load_vectors(index.model)
        if saved is None:
            return False
        key = vectors_key(index.model)
        n, dim = len(saved.ids), saved.matrix.shape[1]
        trust = cache.checked(state, saved.files, key)
        added: pa.Table | None = None  # rows the table holds after the copy's
        if trust is not None and "rows" in trust:  # a clean close said where they are
            rows, first = trust["rows"], trust.get("from")
            if type(rows) is not int or rows < n or (rows > n and type(first) is not int):
                trust = None
            else:
                if rows > n:
                    added = self.store.vectors.rows_from(index.model, dim, int(first or 0))
                if n + (added.num_rows if added is not None else 0) != rows:
                    trust, added = None, None
        ids = None  # the table's, when it had to be hashed
        if trust is None:  # hash every row: does the table start with the copy's vectors?
            ids, hashes, rowids = self.store.vectors.hashes(index.model, dim)
            tail = len(hashes) - n
            if (
                tail < 0
                or tail > n * MAX_TAIL
                or not ids.slice(0, n).cast(pa.large_string()).equals(saved.ids)
                or not np.array_equal(hashes[:n], saved.hashes)
            ):
                return False
        index.load(
            saved.ids.to_pylist(),
            saved.namespaces,
            saved.codes,
            saved.matrix,
            saved.order,
            saved.ids,
        )
        if ids is not None and len(ids) > n:  # hashed: the rows after the copy's, by id
            tail_ids = ids.slice(n).to_pylist()
            start = int(rowids[n:].min())
            if n == 0 or int(rowids[:n].max()) < start:  # all the table holds from there
                added = self.store.vectors.rows_from(index.model, dim, start)  # no full scan
            if added is None or added.num_rows != len(tail_ids):  # (reads every vector's block)
                added = self.store.vectors.rows_of(index.model, tail_ids)
                order = {event_id: i for i, event_id in enumerate(added.column(0).to_pylist())}
                added = added.take([order[event_id] for event_id in tail_ids])  # table order
        elif ids is not None:
            cache.mark_checked(state, saved.files, key)
        if added is not None and added.num_rows:
            new = added.column(0).to_pylist()
            if len(set(new)) != len(new) or any(index.holds(event_id) for event_id in new):
                log.info("the rows after the saved vectors are not new ones: rebuilding")
                return False  # built from the table instead (not expected)
            block = added.column(2).combine_chunks().flatten().to_numpy(zero_copy_only=False)
            index.upsert(new, added.column(1).to_pylist(), block.reshape(-1, dim))
        self._standing[key] = Standing(n, saved.files)
        return True

    def read_vectors(
        self,
        index: VectorIndex,
        batches: Iterator[pa.RecordBatch] | None = None,
        count: int | None = None,
    ) -> None:
        """Fill the index from the table (or from ``batches`` of ``count`` rows), a batch
        at a time into one preallocated matrix normalised in place: memory holds the
        vectors once, not three times."""
        if batches is None:
            batches = self.store.vectors.batches(index.model)
            count = self.store.vectors.embedded_count(index.model)
        matrix = np.empty((count or 0, index.dim or 0), np.float32)
        ids: list[str] = []
        namespaces: list[pa.Array] = []
        filled = 0
        dim: int | None = None
        for batch in batches:
            lists = batch.column(2)
            lengths = pc.list_value_length(lists)
            if dim is None:  # the length most vectors have (a stray one is never compared)
                dim = int(pc.mode(lengths)[0]["mode"].as_py() or 0) if len(batch) else None
                if dim is None:
                    continue
                matrix = np.empty((len(matrix), dim), np.float32)
            keep = pc.equal(lengths, dim)
            if not pc.all(keep).as_py():
                batch = batch.filter(keep)
                lists = batch.column(2)
            block = lists.flatten().to_numpy(zero_copy_only=False).reshape(-1, dim)
            if filled + len(block) > len(matrix):  # another writer added rows since count()
                grown = np.empty((max(2 * len(matrix), filled + len(block)), dim), np.float32)
                grown[:filled] = matrix[:filled]
                matrix = grown
            target = matrix[filled : filled + len(block)]
            target[:] = block
            normalise_in_place(target)
            filled += len(block)
            ids += batch.column(0).to_pylist()
            # a copy: a column of an imported batch would keep the whole batch alive,
            # its vectors included, until the last batch is read
            namespaces.append(pa.concat_arrays([batch.column(1)]))
        names = pa.chunked_array(namespaces).combine_chunks() if namespaces else []
        index.rebuild(ids, names, matrix[:filled], normalised=True)

    def _unless_committed(self, index: VectorIndex | KeywordIndex) -> None:
        # built inside an open transaction, it may hold rows a rollback removes
        if self.store.in_transaction:
            index.stale = True

    # -- following the store ---------------------------------------------------------
    def follow(self, change: Change) -> None:
        """Apply one committed change (the store calls this under its lock)."""
        self._changes += 1
        self._bulk.note(change)
        held = (change.added, change.retexted, change.deleted, change.vectors, change.unvectored)
        if change.unknown or any(held):
            self._record_at_open = None  # what an unloaded index holds may have changed
        if change.unknown:
            self.invalidate()
            return
        if self.cache is not None and (change.deleted or change.retexted or change.unvectored):
            self._wait_for_writes()  # a copy being written may hold what is forgotten
            self.cache.discard()  # the saved copies may hold what was just forgotten
            self._standing.clear()
        self._follow_vectors(change)
        keywords = self._keywords
        with keywords._lock:
            if keywords.stale:
                return
            gone = change.deleted + [row[0] for row in change.retexted]
            if gone:
                self._standing.pop(KEYWORDS, None)
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
        self._budget.follow(change, lost)
        for model, index in self._vectors.items():
            with index._lock:
                if index.stale:
                    continue
                written = [v for v in change.vectors if v.model == model]
                moved = [i for v in change.vectors if v.model != model for i in v.ids]
                if lost or moved:
                    self._standing.pop(vectors_key(model), None)
                    index.remove(lost + moved)
                for vectors in written:
                    keys = vectors.ids
                    if vectors.passages is not None:
                        keys = [
                            passage_key(event_id, passage)
                            for event_id, passage in zip(keys, vectors.passages, strict=True)
                        ]
                    if index.upsert(keys, vectors.namespaces, vectors.matrix):
                        self._standing.pop(vectors_key(model), None)  # a vector replaced

    def passage_spans(
        self, model: str, vector: np.ndarray, ids: list[str], namespace: str | None = None
    ) -> dict[str, tuple[int, int]]:
        """event id -> ``(start, stop)`` of its passage closest to ``vector`` (long texts)."""
        return matched_spans(
            self.searcher(model, namespace, search=False),
            lambda keys: self.store.vectors.spans(model, keys),
            vector,
            ids,
        )

    def add_passages(self, model: str, vector: np.ndarray, records: list[dict[str, Any]]) -> None:
        """Set ``passage_start``/``passage_stop`` of each record (by ``id``) whose event is
        stored as passages (None for the others)."""
        names = {r.get("namespace") for r in records}  # one: that namespace's searcher
        ids = [r["id"] for r in records]
        spans = self.passage_spans(model, vector, ids, names.pop() if len(names) == 1 else None)
        for record in records:
            record["passage_start"], record["passage_stop"] = spans.get(record["id"], (None, None))

    def prepare_lookups(self) -> None:
        """Start making, on a thread, the id dictionaries of loaded indexes that looked
        ids up by binary search (see :mod:`.id_rows`); called once an answer is made."""
        self._keywords.prepare_lookups()
        for index in list(self._vectors.values()):
            index.prepare_lookups()

    def invalidate(self) -> None:
        """Rebuild every index on its next use."""
        for index in self._vectors.values():
            index.stale = True
        self._budget.invalidate()
        self._keywords.stale = True
        self._standing.clear()

    def clear(self) -> None:
        """Drop what the indexes hold (the store closed)."""
        self.wait_for_saves()
        self._vectors.clear()
        self._budget.invalidate()
        self._keywords = KeywordIndex()
        self._standing.clear()

    # -- a clean close -----------------------------------------------------------------
    def closing_record(self) -> tuple[dict[str, FileState | None], dict[str, Any]] | None:
        """What a clean close may record beside the saved copies (call under the store's
        locks, just before it closes): for each index that still stands on its saved
        copy, the copy's files and how many rows the table holds, every one the copy
        lacks after its last (:meth:`record_closed` adds what the record said at open
        of the indexes left unloaded).  None when there is nothing to record, or when another
        writer may write after this close (a shared store, another ``Memory`` open on
        the file in this process)."""
        store = self.store
        self._wait_for_writes()  # at most one save of a just-built index: under 1.5 s at 200k
        if self.cache is None or not store.sole_writer() or store.in_transaction:
            return None
        files: dict[str, FileState | None] = {}
        tails: dict[str, Any] = {}
        keywords = self._keywords
        standing = self._standing.get(KEYWORDS)
        if standing is not None and standing.after is not None and not keywords.stale:
            total, after = store.events.text_count_after(*standing.after)
            if total - after == standing.rows and total == len(keywords):
                files.update(standing.files)
                tails[KEYWORDS] = {"rows": total}
        for model, index in self._vectors.items():
            standing = self._standing.get(vectors_key(model))
            if standing is None or index.stale or index.dim is None:
                continue
            tail = index.ids_after(standing.rows)
            if len(index) != standing.rows + len(tail):
                continue
            record: dict[str, Any] = {"rows": len(index)}
            if tail:  # DuckDB's rowid of the first: the next process reads from there
                first = store.vectors.first_row(model, index.dim, tail)
                if first is None:
                    continue
                before, after = store.vectors.count_around(model, index.dim, first)
                if (before, after) != (standing.rows, len(tail)):
                    continue  # the table does not hold them last: nothing to record
                record["from"] = first
            elif store.vectors.count_of(model, index.dim) != standing.rows:
                continue
            files.update(standing.files)
            tails[vectors_key(model)] = record
        if not tails and self._record_at_open is None:
            return None
        return files, tails

    def record_closed(self, record: tuple[dict[str, FileState | None], dict[str, Any]]) -> bool:
        """Write what :meth:`closing_record` found, once the store file is closed (its
        state then: DuckDB checkpoints at close)."""
        assert self.cache is not None
        return self.cache.record_closed(self.cache.store_state(), *record, self._record_at_open)
