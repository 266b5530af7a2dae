"""Each id's row in an in-memory index, without a dictionary of every id up front.

An index holds its ids as a list (``None`` where a row was removed) and needs
the row of a given id: to score the few hundred candidates of a query, to apply
a change.  A dictionary answers that, but at a million ids it takes a large part
of a cold open to build, which a new process that loaded a saved index would pay
before its first answer (``benchmarks/bench_search.py`` times cold opens;
``docs/performance.md``, "Cold open", has the figures).  A saved copy therefore
also holds its ids' sort order; an id is then found by binary search in the ids
taken in that order, and ids added since live in a small dictionary.  When the
saved ids all have one length in bytes (the UUIDs made here do), the search
reads them as bytes straight from the saved Arrow buffer through the order, with
nothing made up front; otherwise a sorted list of them is made at the first
look-up.

A binary search costs about ten dictionary look-ups, so once an answer is made
(:meth:`IdRows.start_making`, which the retriever calls) a thread makes the
dictionary from a snapshot of the list while changes made meanwhile are logged;
the log is replayed onto it and it takes over.  In a notebook that happens while
the person reads the first answer; started during the answer, the thread would
slow it badly on two cores ("Cold open" again).  A look-up of many ids at once,
or an index with no saved order, makes the dictionary at once.
"""

from __future__ import annotations

import _thread
import bisect
import threading
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

#: A look-up of more ids than this at once makes the whole dictionary (one binary
#: search costs about ten dictionary look-ups).
BULK = 20_000


class IdRows:
    """``id -> row`` over an index's list of ids, which the index keeps appending to
    and sets to ``None`` where it removes a row (the list is shared, not copied)."""

    def __init__(
        self,
        ids: list[str | None],
        order: np.ndarray | None = None,
        saved: pa.Array | None = None,
    ) -> None:
        self._ids = ids
        #: The rows of the ids in ascending id order, from a saved copy (None: none).
        self._order = order
        #: The ids as the copy saved them (``ids`` before any change), as Arrow strings.
        self._saved = saved
        self._sorted: list[str] | _SortedBytes | None = None
        self._dict: dict[str, int] | None = None
        self._added: dict[str, int] = {}
        self._removed = 0  # rows of the saved order removed since
        #: Changes since the snapshot the thread makes the dictionary from (None: none).
        self._log: list[tuple[str, int | None]] | None = None
        #: Set once the thread making the dictionary is done (None: not started).
        self._maker: threading.Event | None = None
        self._lock = threading.RLock()  # changes, and the switch to the dictionary

    @classmethod
    def of(cls, ids: list[str | None]) -> IdRows:
        """Over ``ids`` with no saved order: the dictionary, made when first needed."""
        return cls(ids)

    # -- the mapping a dict would give --------------------------------------------------
    def get(self, event_id: str, default: int | None = None) -> int | None:
        made = self._dict  # the usual case once made: one attribute read, no call
        if made is not None:
            return made.get(event_id, default)
        found = self._as_dict()
        if found is not None:
            return found.get(event_id, default)
        row = self._added.get(event_id)
        if row is None:
            row = self._search(event_id)
        return default if row is None else row

    def __contains__(self, event_id: object) -> bool:
        return isinstance(event_id, str) and self.get(event_id) is not None

    def __getitem__(self, event_id: str) -> int:
        row = self.get(event_id)
        if row is None:
            raise KeyError(event_id)
        return row

    def __setitem__(self, event_id: str, row: int) -> None:
        with self._lock:
            found = self._as_dict()
            if found is not None:
                found[event_id] = row
                return
            self._added[event_id] = row
            if self._log is not None:
                self._log.append((event_id, row))

    def pop(self, event_id: str, default: int | None = None) -> int | None:
        """Forget ``event_id`` (its row of the list becomes ``None``)."""
        with self._lock:
            if self._as_dict() is None:
                row = self._added.pop(event_id, None)
                if row is None:
                    row = self._search(event_id)
                    if row is not None and self._dict is None:
                        self._removed += 1
                if self._dict is None:  # still searching the saved order
                    if row is None:
                        return default
                    self._ids[row] = None
                    if self._log is not None:
                        self._log.append((event_id, None))
                    return row
            assert self._dict is not None
            return self._dict.pop(event_id, default)

    def __len__(self) -> int:
        with self._lock:
            found = self._as_dict()
            if found is not None:
                return len(found)
            assert self._order is not None
            return len(self._order) - self._removed + len(self._added)

    def __iter__(self) -> Iterator[str]:
        return iter(self.make_dict())

    def rows(self, ids: Iterable[str]) -> list[int | None]:
        """The row of each of ``ids`` (None where absent), making the dictionary first
        when they are many."""
        wanted = ids if isinstance(ids, list | tuple) else list(ids)
        if self._dict is None and len(wanted) > BULK:
            self.make_dict()
        return [self.get(event_id) for event_id in wanted]

    def make_dict(self) -> dict[str, int]:
        """The dictionary, made now if it is not yet (a thread making it then drops its
        own: waiting for it under the lock could wait forever)."""
        with self._lock:
            if self._dict is None:
                self._dict = self._from(list(self._ids))
                self._drop_search()
            return self._dict

    # -- inside ------------------------------------------------------------------------
    def _as_dict(self) -> dict[str, int] | None:
        """The dictionary, made now if there is no saved order to search instead."""
        if self._dict is None and self._order is None:
            return self.make_dict()
        return self._dict

    @staticmethod
    def _from(ids: list[str | None]) -> dict[str, int]:
        return {event_id: i for i, event_id in enumerate(ids) if event_id is not None}

    def _drop_search(self) -> None:
        self._order, self._saved, self._sorted, self._added, self._log = None, None, None, {}, None

    def start_making(self) -> None:
        """Make the dictionary on a thread from a snapshot of the list, then replay the
        changes logged since onto it and switch to it (only once ids were looked up by
        binary search: an index nothing asks ids of never needs it).

        A bare thread (``_thread``): ``threading.Thread.start`` waits until the new
        thread runs, and on two cores that wait, taken at the end of an answer, was a
        visible part of it (``docs/performance.md``, "Cold open")."""
        with self._lock:
            if self._maker is not None or self._dict is not None or self._sorted is None:
                return
            self._maker = threading.Event()
        _thread.start_new_thread(self._make, (self._maker,))

    def _make(self, done: threading.Event) -> None:
        try:
            snapshot = self._snapshot()
            if snapshot is not None:
                self._switch(self._from(snapshot))
        finally:
            done.set()

    def _snapshot(self) -> list[str | None] | None:
        """The list now, logging every change from now on (None: a dictionary exists)."""
        with self._lock:
            if self._dict is not None:
                return None
            self._log = []
            return list(self._ids)

    def _switch(self, made: dict[str, int]) -> None:
        """Replay the changes logged since the snapshot ``made`` was made from, and use it."""
        with self._lock:
            if self._dict is not None or self._log is None:
                return  # made meanwhile (a bulk look-up)
            for event_id, row in self._log:
                if row is None:
                    made.pop(event_id, None)
                else:
                    made[event_id] = row
            self._dict = made
            self._drop_search()

    def _search(self, event_id: str) -> int | None:
        """The row of ``event_id`` among the rows of the saved order, if still there.

        Reads its fields once: another thread may switch to the dictionary meanwhile."""
        order = self._order
        if order is None:  # the dictionary took over meanwhile
            return self.make_dict().get(event_id)
        ordered = self._sorted
        if ordered is None:
            ordered = _fixed_width(self._saved, order)
            if ordered is None:
                saved = self._saved
                if saved is not None:  # new strings, in order: fewer cache misses
                    taken = saved.take(pa.array(order)).to_pylist()
                else:
                    taken = [self._ids[i] for i in order.tolist()]
                if None in taken:  # a row removed without pop(): its id is lost, so a dict
                    return self.make_dict().get(event_id)
                ordered = taken
            self._sorted, self._saved = ordered, None  # the Arrow copy is not needed now
        if isinstance(ordered, _SortedBytes):
            key: str | bytes = event_id.encode()
            if len(key) != ordered.width:
                return None
        else:
            key = event_id
        at = bisect.bisect_left(ordered, key)
        if at == len(ordered) or ordered[at] != key:
            return None
        row = int(order[at])
        return row if self._ids[row] == event_id else None  # None: removed since


class _SortedBytes:
    """The saved ids in ascending order, as the bytes of one buffer of fixed-width ids
    read through the sort order: a sequence :func:`bisect.bisect_left` can search,
    with no Python string per id made up front."""

    def __init__(self, data: np.ndarray, width: int, order: np.ndarray) -> None:
        self._data = data.data.cast("B")
        self.width = width
        self._order = order.data.cast("B").cast("q")  # Python ints when indexed

    def __len__(self) -> int:
        return len(self._order)

    def __getitem__(self, i: int) -> bytes:
        start = self._order[i] * self.width
        return bytes(self._data[start : start + self.width])


def _fixed_width(saved: pa.Array | None, order: np.ndarray) -> _SortedBytes | None:
    """The saved ids in ascending order without a Python string each, when they all
    have the same length in bytes (ids made here are UUIDs).  None otherwise."""
    if (
        saved is None
        or len(saved) == 0
        or saved.null_count
        or not pa.types.is_large_string(saved.type)
    ):
        return None
    offsets = np.frombuffer(saved.buffers()[1], dtype=np.int64)[
        saved.offset : saved.offset + len(saved) + 1
    ]
    width = int(offsets[1] - offsets[0])
    if width == 0 or not bool(np.all(np.diff(offsets) == width)):
        return None
    data = np.frombuffer(saved.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
    return _SortedBytes(data, width, np.ascontiguousarray(order, dtype=np.int64))
