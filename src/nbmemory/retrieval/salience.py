"""The salient memories of a namespace (importance at or above a threshold), kept in
memory and in step with the store.

The context's salience strategy, ranked by the query, starts from these ids every
call; reading them is a scan of ``events``.
They change only when events are added, deleted or rewritten, which the store
announces: added events join the sets they qualify for, deleted ones leave them,
and anything the store cannot describe (other columns updated, plain SQL,
another process) drops every set, to be read again on next use.
"""

from __future__ import annotations

from ..store import Store
from ..store.changes import Change

#: How many (namespace, threshold) sets are kept; past it the oldest is dropped.
MAX_SETS = 16


class SalientIds:
    """``get(namespace, threshold)``: ids of the events with importance >= threshold."""

    def __init__(self, store: Store) -> None:
        self.store = store
        #: Never changed in place (a change replaces the set), so a caller may keep one.
        self._sets: dict[tuple[str, float], frozenset[str]] = {}
        store.listen(self.follow)

    def get(self, namespace: str, threshold: float) -> frozenset[str]:
        """The salient ids of ``namespace`` at ``threshold``."""
        self.store.refresh()  # another process may have written: then the sets are dropped
        key = (namespace, float(threshold))
        with self.store.locked():  # changes are announced under it: none slips in between
            if self.store.in_transaction:  # uncommitted rows are seen by SQL, not announced yet
                return frozenset(self.store.events.ids_at_least(namespace, threshold))
            ids = self._sets.get(key)
            if ids is None:
                ids = frozenset(self.store.events.ids_at_least(namespace, threshold))
                if len(self._sets) >= MAX_SETS:
                    del self._sets[next(iter(self._sets))]
                self._sets[key] = ids
            return ids

    def follow(self, change: Change) -> None:
        """Apply one committed change (the store calls this under its lock)."""
        if not self._sets:
            return
        if change.unknown or change.updated or change.retexted:
            self._sets.clear()
            return
        deleted = set(change.deleted)
        for (namespace, threshold), ids in self._sets.items():
            joining = {
                r["id"]
                for r in change.added
                if r["namespace"] == namespace and r["importance"] >= threshold
            }
            if joining or not deleted.isdisjoint(ids):
                self._sets[(namespace, threshold)] = (ids - deleted) | joining
