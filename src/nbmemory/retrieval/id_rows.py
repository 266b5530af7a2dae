"""Each id's row in an in-memory index, without a dictionary of every id up front.

An index holds its ids as a list (``None`` where a row was removed) and needs the
row of a given id: to score the few hundred candidates of a query, to apply a
change.  A dictionary answers that, but at a million ids it takes half a second
to build, which a new process that loaded a saved index would pay before its
first answer.  A saved copy therefore also holds its ids' sort order; an id is
then found by binary search in the ids taken in that order (made from the saved
Arrow array at the first look-up, a fifth of the time), and ids added since live
in a small dictionary.  A binary search costs about ten dictionary look-ups, so
each one also adds the next :data:`STEP` ids to a dictionary being made, which
takes over once whole (after a few dozen queries at a million ids): the cost of
the dictionary is spread over the first queries instead of paid before them.  A
look-up of many ids at once, or an index with no saved order, makes it at once.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

#: A look-up of more ids than this at once makes the whole dictionary (one binary
#: search costs about twenty dictionary look-ups).
BULK = 20_000
#: Ids added to the dictionary being made at each binary search.
STEP = 32


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
        self._sorted: list[str] | None = None
        self._dict: dict[str, int] | None = None
        self._added: dict[str, int] = {}
        self._removed = 0  # rows of the saved order removed since
        # the dictionary being made, from the rows [0, _made) of the list
        self._partial: dict[str, int] = {}
        self._made = 0
        self._lock = threading.RLock()  # readers may look up outside the index's lock

    @classmethod
    def of(cls, ids: list[str | None]) -> IdRows:
        """Over ``ids`` with no saved order: the dictionary, made when first needed."""
        return cls(ids)

    # -- the mapping a dict would give --------------------------------------------------
    def get(self, event_id: str, default: int | None = None) -> int | None:
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
        found = self._as_dict()
        (self._added if found is None else found)[event_id] = row

    def pop(self, event_id: str, default: int | None = None) -> int | None:
        """Forget ``event_id`` (its row of the list becomes ``None``)."""
        if self._as_dict() is None:
            with self._lock:
                row = self._added.pop(event_id, None)
                if row is None:
                    row = self._search(event_id)
                    if row is not None and self._dict is None:
                        self._removed += 1
                if self._dict is None:  # still searching the saved order
                    if row is None:
                        return default
                    self._partial.pop(event_id, None)
                    self._ids[row] = None  # so the dictionary being made never takes it
                    return row
        assert self._dict is not None
        return self._dict.pop(event_id, default)

    def __len__(self) -> int:
        found = self._as_dict()
        if found is not None:
            return len(found)
        assert self._order is not None
        return len(self._order) - self._removed + len(self._added)

    def __iter__(self) -> Iterator[str]:
        return iter(self._make_dict() if self._dict is None else self._dict)

    def rows(self, ids: Iterable[str]) -> list[int | None]:
        """The row of each of ``ids`` (None where absent), making the dictionary first
        when they are many."""
        wanted = ids if isinstance(ids, list | tuple) else list(ids)
        if self._dict is None and len(wanted) > BULK:
            self._make_dict()
        return [self.get(event_id) for event_id in wanted]

    # -- inside ------------------------------------------------------------------------
    def _as_dict(self) -> dict[str, int] | None:
        """The dictionary, made now if there is no saved order to search instead."""
        if self._dict is None and self._order is None:
            return self._make_dict()
        return self._dict

    def _make_dict(self) -> dict[str, int]:
        self._dict = {event_id: i for i, event_id in enumerate(self._ids) if event_id is not None}
        self._drop_search()
        return self._dict

    def _drop_search(self) -> None:
        self._order, self._saved, self._sorted, self._added = None, None, None, {}
        self._partial, self._made = {}, 0

    def _advance(self) -> None:
        """Add the next :data:`STEP` rows to the dictionary being made; use it once whole."""
        with self._lock:
            if self._dict is not None:
                return
            ids, start = self._ids, self._made
            end = min(start + STEP, len(ids))
            partial = self._partial
            partial.update(zip(ids[start:end], range(start, end), strict=True))  # type: ignore[arg-type]
            partial.pop(None, None)  # type: ignore[call-overload]
            self._made = end
            if end == len(ids):
                self._dict = partial
                self._drop_search()

    def _search(self, event_id: str) -> int | None:
        """The row of ``event_id`` among the rows of the saved order, if still there.

        Reads its fields once: a reader outside the index's lock may meet another
        thread making the dictionary."""
        order = self._order
        if order is None:  # the dictionary was made meanwhile
            found = self._dict
            return (found if found is not None else self._make_dict()).get(event_id)
        ordered = self._sorted
        if ordered is None:
            saved = self._saved
            if saved is not None:  # new strings, in order: fewer cache misses
                taken = saved.take(pa.array(order)).to_pylist()
            else:
                taken = [self._ids[i] for i in order.tolist()]
            if None in taken:  # a row removed without pop(): its id is lost, so a dict
                return self._make_dict().get(event_id)
            ordered = taken
            self._sorted, self._saved = ordered, None  # the Arrow copy is not needed now
        self._advance()
        at = bisect.bisect_left(ordered, event_id)
        if at == len(ordered) or ordered[at] != event_id:
            return None
        row = int(order[at])
        return row if self._ids[row] == event_id else None  # None: removed since
