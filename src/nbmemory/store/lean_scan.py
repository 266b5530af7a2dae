"""DuckDB's memory limit lowered while a scan is read once into one of our caches.

A scan read into a cache of our own (the vector index) would otherwise leave its
blocks in DuckDB's buffer pool, up to 80% of RAM (at 1M vectors, 1 GB more peak
RSS for nothing).  :class:`LeanScans` lowers the limit to :data:`LEAN_SCAN_MEMORY`
(:data:`LAKE_SCAN_MEMORY` on a lake)
for the scan and puts back what was there: DuckDB's default, or a limit someone
set (remembered as it read before our first scan, so it does not drift).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import duckdb

#: DuckDB's memory limit while a scan of a store file is read into one of our caches.
#: 200k vectors read in a new process: peak RSS 1,064 MB at 256MB, 873 MB at 64MB
#: (the batches read in turn), no slower; 32MB gained only 27 MB more.
LEAN_SCAN_MEMORY = "64MB"
#: The same on a lake, whose Parquet row groups are decompressed whole: kept higher.
LAKE_SCAN_MEMORY = "256MB"
#: The same for a filtered scan (one namespace's vectors): DuckDB holds the batches
#: its threads filtered until their turn comes (insertion order), which ran out of
#: 64MB on a namespace of 250k vectors in a store of 1M.
FILTERED_SCAN_MEMORY = "256MB"


def _memory_limit(cursor: duckdb.DuckDBPyConnection) -> str:
    return str(cursor.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])


class LeanScans:
    """The memory limit of a store's connection, lowered for the length of a scan."""

    def __init__(self, limit: str = LEAN_SCAN_MEMORY) -> None:
        #: The limit a lean scan runs under (DuckDB's syntax: "64MB").
        self.limit = limit
        #: id(cursor) -> (a memory limit someone set, as read before our lean scans;
        #: what DuckDB showed once we had put it back)
        self._limits: dict[int, tuple[str, str | None]] = {}

    @contextlib.contextmanager
    def lean(
        self,
        cursor_of: Callable[[], duckdb.DuckDBPyConnection],
        is_open: Callable[[], bool],
        limit: str | None = None,
    ) -> Iterator[None]:
        cursor = cursor_of()
        shown = _memory_limit(cursor)
        cursor.execute("RESET memory_limit")
        default = _memory_limit(cursor) == shown
        # DuckDB shows a limit rounded down ("3GB" reads "2.7 GiB"): a limit someone set
        # is put back as it read before our first scan, and does not drift further.
        original, after = self._limits.get(id(cursor), (shown, None))
        if shown != after:
            original = shown
        # SET takes no parameters: the values are DuckDB's own setting and our constants
        cursor.execute(f"SET memory_limit = '{(limit or self.limit).replace(chr(39), '')}'")
        try:
            yield
        finally:
            if is_open():
                cursor = cursor_of()
                if default:
                    cursor.execute("RESET memory_limit")
                else:
                    cursor.execute(f"SET memory_limit = '{original.replace(chr(39), '')}'")
                    self._limits = {id(cursor): (original, _memory_limit(cursor))}
