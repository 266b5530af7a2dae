"""Whoever writes the rows pays for the index: the saved copies after a bulk ingest.

Once a bulk ingest has been embedded (``Memory.flush``), :meth:`Indexes.refresh_saved
<nbmemory.retrieval.indexes.Indexes.refresh_saved>` brings the saved copies up to
date on a thread, so that the next process to open the store loads them instead of
reading every row.  :class:`BulkRefresh` decides when: once the rows bulk writes
added since the last refresh reach both ``index_cache_min_rows`` and the rows the
table held then (a flush after each batch of a long ingest rebuilds a store that
has doubled: at most twice the work of one build).  Only the sole writer of a
file store refreshes: another writer's rows would make the copies stale as they
are written.  The indexes built stay in the process, ready for its searches.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..store import Change
from .index_cache import MAX_TAIL


class BulkRefresh:
    """The bulk rows added (in all and since the last refresh) and the refresh threads."""

    def __init__(self) -> None:
        self.total = 0
        self.since = 0
        #: The rows the keyword index held at the last refresh.
        self.rows_then = 0
        #: "keywords" or "vectors/<model>" -> ``total`` when that index was last built
        #: or loaded from its copy (what bulk rows it holds only by following).
        self.built_at: dict[str, int] = {}
        self.threads: list[threading.Thread] = []

    def note(self, change: Change) -> None:
        if change.bulk:
            self.since += len(change.added)
            self.total += len(change.added)

    def built(self, key: str) -> None:
        self.built_at[key] = self.total

    def behind(self, key: str, size: int) -> bool:
        """Whether an index of ``size`` rows followed more bulk rows since it was built
        than the share a load would add one by one (its rebuild is then saved)."""
        return self.total - self.built_at.get(key, 0) > size * MAX_TAIL

    def start_if_due(self, min_rows: int, target: Callable[..., Any], *args: Any) -> bool:
        if self.since < max(min_rows, self.rows_then):
            return False
        self.since = 0
        self.threads = [thread for thread in self.threads if thread.is_alive()]
        thread = threading.Thread(
            target=target, args=args, name="nbmemory-index-refresh", daemon=True
        )
        self.threads.append(thread)
        thread.start()
        return True

    def wait(self, timeout: float | None = None) -> None:
        for thread in list(self.threads):
            thread.join(timeout)
