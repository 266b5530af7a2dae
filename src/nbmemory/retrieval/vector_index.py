"""An exact in-memory cosine index kept in step with the ``events`` table.

DuckDB stays the source of truth; this is a cache of the vectors of one model,
L2-normalised in a contiguous float32 matrix so a query is one matrix-vector
product (the numpy floor) instead of ``list_cosine_similarity`` over LIST
columns, many times slower (``benchmarks/bench_search.py`` times both;
``docs/performance.md``, "Search and context", has the figures).  Answers are
exact: the same top-k as the SQL ranking.

Keeping in step: the store announces every committed change
(:mod:`nbmemory.retrieval.indexes` applies vectors written and events deleted in
place); a change it cannot describe (plain SQL, another process) marks the
index stale, and the next search rebuilds it from the table.  So the index is
never consulted out of date.

A long text has one row per passage (see :mod:`.passages`): the first passage is
keyed by the event id, the others by the keys of
:func:`nbmemory.store.vectors.passage_key`.  An event ranks by its best passage
(max-sim), and a search can say which passage that was.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet

import numpy as np
import pyarrow as pa

from ..store.vectors import PASSAGE_SEP
from .blas import one_thread
from .encoding import codes_of
from .id_rows import IdRows


def event_of(key: str) -> tuple[str, int]:
    """(event id, passage number) of a row's key (0 for a whole text or first passage)."""
    event_id, sep, passage = key.rpartition(PASSAGE_SEP)
    return (event_id, int(passage)) if sep and passage.isdigit() else (key, 0)


class VectorIndex:
    """Vectors of one embedding model: ids, namespaces, a normalised matrix."""

    def __init__(self, model: str) -> None:
        self.model = model
        #: True until built, and whenever the table changed in a way not applied here.
        self.stale = True
        self.dim: int | None = None
        self._lock = threading.RLock()
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._ids: list[str | None] = []
        #: id -> row (see :mod:`.id_rows`: no dictionary of every id until one is needed)
        self._pos = IdRows.of(self._ids)
        self._live = 0  # rows with an id
        self._alive = np.zeros(0, dtype=bool)
        self._ns_codes = np.zeros(0, dtype=np.int32)
        self._ns: dict[str, int] = {}
        self._size = 0
        self.rebuilds = 0
        #: Times it was filled from a saved copy instead of the table.
        self.loads = 0
        #: event id -> the keys of its passages after the first (long texts only).
        self._extra: dict[str, list[str]] = {}

    def __len__(self) -> int:
        return self._live

    @property
    def passage_rows(self) -> int:
        """Rows held for passages after the first of long texts."""
        return sum(len(keys) for keys in self._extra.values())

    def _note_keys(self, keys: Sequence[str | None]) -> None:
        """Remember which keys are later passages of an event."""
        if not any(key is not None and PASSAGE_SEP in key for key in keys):
            return
        for key in keys:
            if key is not None and PASSAGE_SEP in key:
                event_id, passage = event_of(key)
                if passage:
                    extra = self._extra.setdefault(event_id, [])
                    if key not in extra:
                        extra.append(key)

    def _with_passages(self, ids: Iterable[str]) -> list[str]:
        """``ids`` and the keys of their later passages."""
        ids = list(ids)
        if not self._extra:
            return ids
        return ids + [key for event_id in ids for key in self._extra.get(event_id, ())]

    def ids_after(self, rows: int) -> list[str]:
        """The live ids of the rows after the first ``rows``, in row order."""
        with self._lock:
            return [i for i in self._ids[rows : self._size] if i is not None]

    def holds(self, event_id: str) -> bool:
        """Whether the index has a live row for ``event_id``."""
        pos = self._pos.get(event_id)
        return pos is not None and bool(self._alive[pos])

    def prepare_lookups(self) -> None:
        """Make the id dictionary on a thread if ids were looked up without it."""
        self._pos.start_making()

    # -- building ---------------------------------------------------------------------
    def rebuild(
        self,
        ids: Sequence[str],
        namespaces: Sequence[str] | pa.Array,
        vectors: np.ndarray,
        *,
        normalised: bool = False,
    ) -> None:
        """Replace the content with these rows (from a full read of the table).

        ``normalised=True`` takes ``vectors`` as they are (unit rows, float32): no copy.
        """
        with self._lock:
            matrix = (
                np.ascontiguousarray(vectors, dtype=np.float32)
                if normalised
                else normalise_rows(np.asarray(vectors, dtype=np.float32))
            )
            self.dim = matrix.shape[1] if matrix.size else self.dim
            self._matrix = matrix
            self._ids = list(ids)
            self._extra = {}
            self._note_keys(self._ids)
            self._pos, self._live = IdRows.of(self._ids), len(self._ids)
            self._alive = np.ones(len(self._ids), dtype=bool)
            codes, names = codes_of(namespaces)
            self._ns = {name: code for code, name in enumerate(names)}
            self._ns_codes = codes
            self._size = len(self._ids)
            self.stale = False
            self.rebuilds += 1

    def load(
        self,
        ids: list[str],
        namespaces: list[str],
        codes: np.ndarray,
        matrix: np.ndarray,
        order: np.ndarray | None = None,
        saved_ids: pa.Array | None = None,
    ) -> None:
        """Replace the content with a saved copy: unit rows, ``matrix`` possibly longer
        than ``ids`` (room for new rows) and memory-mapped; ``order``, the rows of the
        ids in ascending id order, when the copy holds it (``saved_ids``: the same ids
        as Arrow strings, to sort them faster)."""
        with self._lock:
            n = len(ids)
            self.dim = int(matrix.shape[1])
            self._matrix = matrix
            self._ids = list(ids)
            self._extra = {}
            self._note_keys(self._ids)
            self._pos, self._live = IdRows(self._ids, order, saved_ids), n
            self._alive = np.zeros(len(matrix), dtype=bool)
            self._alive[:n] = True
            self._ns = {name: code for code, name in enumerate(namespaces)}
            self._ns_codes = np.zeros(len(matrix), dtype=np.int32)
            self._ns_codes[:n] = codes
            self._size = n
            self.stale = False
            self.loads += 1

    def state(self) -> tuple[list[str], list[str], np.ndarray, np.ndarray]:
        """(ids, namespaces by code, each row's namespace code, matrix) of the live rows,
        in order, to save; compacts first."""
        with self._lock:
            if self._live != self._size:
                self.compact()
            n = self._size
            names = sorted(self._ns, key=self._ns.__getitem__)
            ids = [event_id for event_id in self._ids[:n] if event_id is not None]
            return ids, names, self._ns_codes[:n], self._matrix[:n]

    def upsert(self, ids: Sequence[str], namespaces: Sequence[str], vectors: np.ndarray) -> int:
        """Add or replace rows (``ids``: the rows' keys); returns how many rows were
        replaced (not added)."""
        vectors = normalise_rows(np.asarray(vectors, dtype=np.float32))
        if not len(ids):
            return 0
        if self.dim is None:
            self.dim = dim = int(vectors.shape[1])
            self._matrix = np.zeros((0, dim), dtype=np.float32)
        if vectors.shape[1] != self.dim:
            self.stale = True  # cannot hold it: force a rebuild, which skips odd rows
            return 0
        fresh = []
        positions = self._pos
        for row, (event_id, ns) in enumerate(zip(ids, namespaces, strict=True)):
            pos = positions.get(event_id)
            code = self._ns.setdefault(ns, len(self._ns))
            if pos is not None:
                self._matrix[pos] = vectors[row]
                self._ns_codes[pos] = code
                self._alive[pos] = True
            else:
                fresh.append((event_id, code, row))
        if fresh:
            self._grow(len(fresh))
            start = self._size
            for offset, (event_id, code, row) in enumerate(fresh):
                pos = start + offset
                self._matrix[pos] = vectors[row]
                self._ns_codes[pos] = code
                self._alive[pos] = True
                self._ids.append(event_id)
                positions[event_id] = pos
            self._size += len(fresh)
            self._live += len(fresh)
        self._note_keys(ids)
        return len(ids) - len(fresh)

    def remove(self, ids: Iterable[str]) -> None:
        """Forget the rows of these events (every passage); compacts when half the rows
        are dead."""
        positions = self._pos
        ids = list(ids)
        if self._extra:
            ids += [key for event_id in ids for key in self._extra.pop(event_id, ())]
        for event_id in ids:
            pos = positions.pop(event_id, None)
            if pos is not None:
                self._alive[pos] = False
                self._ids[pos] = None
                self._live -= 1
        dead = self._size - self._live
        if dead > 1024 and dead * 2 > self._size:
            self.compact()

    def compact(self) -> None:
        """Drop dead rows, so memory follows the live rows, not every row ever added."""
        keep = np.flatnonzero(self._alive[: self._size])
        self._matrix = np.ascontiguousarray(self._matrix[keep])
        self._ns_codes = self._ns_codes[keep].copy()
        self._alive = np.ones(len(keep), dtype=bool)
        self._ids = [self._ids[i] for i in keep]
        self._pos, self._live = IdRows.of(self._ids), len(keep)
        self._size = len(keep)

    def _grow(self, extra: int) -> None:
        needed = self._size + extra
        capacity = self._matrix.shape[0]
        if needed <= capacity:
            return
        new_capacity = max(needed, capacity * 2, 1024)
        assert self.dim is not None  # set by the first upsert
        matrix = np.zeros((new_capacity, self.dim), dtype=np.float32)
        matrix[: self._size] = self._matrix[: self._size]
        self._matrix = matrix
        alive = np.zeros(new_capacity, dtype=bool)
        alive[: self._size] = self._alive[: self._size]
        self._alive = alive
        codes = np.zeros(new_capacity, dtype=np.int32)
        codes[: self._size] = self._ns_codes[: self._size]
        self._ns_codes = codes

    # -- querying ---------------------------------------------------------------------
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
        """Exact top-``limit`` (id, cosine similarity), best first; an event scores by
        its best passage.

        Events tied with the ``limit``-th score are all returned (so the caller can
        break ties as SQL does); otherwise at most ``limit``.  ``allowed``
        restricts the search to those ids; ``score_range``, when given, receives
        the lowest and highest similarity among the searched rows (for fusion);
        ``matched``, when given, receives each returned event's best passage number.
        """
        with self._lock:
            if not self._extra:
                hits = self._search_rows(
                    query, limit, namespace, threshold, strict, exclude_ids, allowed, score_range
                )
                if matched is not None:
                    matched.update((event_id, 0) for event_id, _ in hits)
                return hits
            if allowed is not None:
                allowed = set(self._with_passages(allowed))
            rows = self._search_rows(
                query,
                limit + self.passage_rows,  # enough rows for ``limit`` distinct events
                namespace,
                threshold,
                strict,
                self._with_passages(exclude_ids),
                allowed,
                score_range,
            )
            return best_per_event(rows, limit, matched)

    def _search_rows(
        self,
        query: np.ndarray,
        limit: int,
        namespace: str | None,
        threshold: float | None,
        strict: bool,
        exclude_ids: Iterable[str],
        allowed: AbstractSet[str] | None,
        score_range: list[float] | None,
    ) -> list[tuple[str, float]]:
        """Exact top-``limit`` rows (key, cosine similarity), best first (see :meth:`search`)."""
        with self._lock:
            if self._size == 0 or limit <= 0:
                return []
            q = np.asarray(query, dtype=np.float32).reshape(-1)
            if self.dim is not None and q.shape[0] != self.dim:
                return []
            norm = unit_norm(q)
            if norm == 0:
                return []
            unit = (q.astype(np.float64) / norm).astype(np.float32)
            positions = self._positions(namespace, allowed)
            if positions is None:  # every row: one matrix-vector product
                n = self._size
                with one_thread(n * unit.size):
                    scores = self._matrix[:n] @ unit
                if not self._every_row(namespace, n):
                    positions = np.flatnonzero(self._valid(namespace, n))
                    scores = scores[positions]
            else:  # a few rows (a filter): score only those
                with one_thread(positions.size * unit.size):
                    scores = self._matrix[positions] @ unit
            if score_range is not None and scores.size:
                score_range[:] = [float(scores.min()), float(scores.max())]
            keep = None
            left_out = list(exclude_ids)
            excluded = [row for row in self._pos.rows(left_out) if row is not None]
            if excluded:
                keep = np.ones(scores.size, dtype=bool)
                if positions is None:  # scores are by position
                    keep[excluded] = False
                else:
                    keep &= ~np.isin(positions, excluded)
            if threshold is not None:
                passing = scores > threshold if strict else scores >= threshold
                keep = passing if keep is None else keep & passing
            if keep is not None:
                positions = np.flatnonzero(keep) if positions is None else positions[keep]
                scores = scores[keep]
            if scores.size == 0:
                return []
            if scores.size > limit:
                part = np.argpartition(-scores, limit - 1)[:limit]
                # keep every candidate tied with the k-th score: the caller breaks
                # ties like the SQL path (newest first, then id)
                chosen = np.flatnonzero(scores >= scores[part].min())
                positions = chosen if positions is None else positions[chosen]
                scores = scores[chosen]
            elif positions is None:  # scores are by position
                positions = np.arange(scores.size)
            order = np.argsort(-scores, kind="stable")
            return [(self._ids[positions[i]], float(min(1.0, max(-1.0, scores[i])))) for i in order]

    def _every_row(self, namespace: str | None, n: int) -> bool:
        """Whether every one of the first ``n`` rows is live and of the namespace."""
        if self._live != n:
            return False
        return namespace is None or (len(self._ns) == 1 and namespace in self._ns)

    def _valid(self, namespace: str | None, n: int) -> np.ndarray:
        """Live rows of the namespace (all namespaces when None), as a mask."""
        valid = self._alive[:n].copy()
        if namespace is not None:
            code = self._ns.get(namespace)
            if code is None:
                return np.zeros(n, dtype=bool)
            if len(self._ns) > 1:
                valid &= self._ns_codes[:n] == code
        return valid

    def _positions(
        self, namespace: str | None, allowed: AbstractSet[str] | None
    ) -> np.ndarray | None:
        """Positions of the allowed live rows of the namespace, sorted; None for all rows
        (no filter, or one too wide for scoring a subset to pay)."""
        if allowed is None or len(allowed) * 4 > self._size:
            if allowed is None:
                return None
            return np.flatnonzero(
                self._valid(namespace, self._size) & positions_mask(self._pos, allowed, self._size)
            )
        got = self._pos.rows(allowed)  # one look-up each (cache misses dominate)
        if None in got:  # events without a vector of this model
            got = [pos for pos in got if pos is not None]
        found = np.array(got, dtype=np.int64)
        found.sort()
        if namespace is not None:
            code = self._ns.get(namespace)
            if code is None:
                return found[:0]
            found = found[self._ns_codes[found] == code]
        return found[self._alive[found]]

    def similarities(
        self, query: np.ndarray, ids: Iterable[str], matched: dict[str, int] | None = None
    ) -> dict[str, float]:
        """Cosine similarity of ``query`` to each of ``ids`` that has a vector here (its
        best passage's; ``matched``, when given, receives which passage that was)."""
        with self._lock:
            q = np.asarray(query, dtype=np.float32).reshape(-1)
            norm = unit_norm(q)
            if norm == 0 or (self.dim is not None and q.shape[0] != self.dim):
                return {}
            wanted = self._with_passages(ids)
            rows = self._pos.rows(wanted)
            found = [(i, row) for i, row in zip(wanted, rows, strict=True) if row is not None]
            if not found:
                return {}
            unit = (q.astype(np.float64) / norm).astype(np.float32)
            with one_thread(len(found) * unit.size):
                scores = self._matrix[[pos for _, pos in found]] @ unit
            best: dict[str, float] = {}
            for (key, _), score in zip(found, scores, strict=True):
                event_id, passage = event_of(key) if self._extra else (key, 0)
                value = float(min(1.0, max(-1.0, score)))
                if event_id not in best or value > best[event_id]:
                    best[event_id] = value
                    if matched is not None:
                        matched[event_id] = passage
            return best


def best_per_event(
    rows: list[tuple[str, float]], limit: int, matched: dict[str, int] | None
) -> list[tuple[str, float]]:
    """Rows (key, score), best first, as events by their best row: the first ``limit``
    and every event tied with the last of them."""
    hits: list[tuple[str, float]] = []
    seen: set[str] = set()
    for key, score in rows:
        event_id, passage = event_of(key)
        if event_id in seen:
            continue
        if len(hits) >= limit and score < hits[limit - 1][1]:
            break
        seen.add(event_id)
        hits.append((event_id, score))
        if matched is not None:
            matched[event_id] = passage
    return hits


def positions_mask(positions: IdRows, ids: Iterable[str], size: int) -> np.ndarray:
    """A boolean array of ``size``, true at the positions of ``ids`` (unknown ids ignored)."""
    mask = np.zeros(size, dtype=bool)
    mask[[row for row in positions.rows(ids) if row is not None]] = True
    return mask


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, as a new float32 matrix; zero rows stay zero
    (see :func:`normalise_in_place`)."""
    if matrix.ndim != 2 or matrix.size == 0:
        return matrix.reshape(len(matrix), -1) if matrix.ndim == 1 else matrix
    out = np.array(matrix, dtype=np.float32, order="C")
    normalise_in_place(out, source=matrix)
    return out


def normalise_in_place(out: np.ndarray, *, source: np.ndarray | None = None) -> None:
    """Scale the rows of the float32 matrix ``out`` to unit length; zero rows stay zero.

    Squared norms are summed in float64 from ``source`` (``out`` itself by
    default): a vector with values near 1e38 has a norm float32 cannot hold.  Rows
    already of unit length within float32 rounding (what embedding models give,
    and what the store keeps) are left bit for bit, so the index scores exactly
    the stored vectors; the others are divided in float64, a block at a time.
    """
    source = out if source is None else source
    squares = np.einsum("ij,ij->i", source, source, dtype=np.float64)
    scale = np.flatnonzero(np.abs(squares - 1.0) > _UNIT_TOLERANCE)
    for start in range(0, len(scale), 65536):
        rows = scale[start : start + 65536]
        norms = np.sqrt(squares[rows])[:, None]
        norms[norms == 0] = 1.0
        out[rows] = np.asarray(source[rows], dtype=np.float64) / norms


#: How far from 1 a squared norm may be for the row to count as unit length: float32
#: rounding of a normalised 384-d vector stays within ~3e-7.
_UNIT_TOLERANCE = 1e-6


def unit_norm(vector: np.ndarray) -> float:
    """The Euclidean norm of one vector, safe from float32 overflow."""
    return float(np.linalg.norm(np.asarray(vector, dtype=np.float64)))
