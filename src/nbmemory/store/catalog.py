"""``store.catalog``: which tables a store holds, and the schema version it records.

The same questions on every backend, asked of DuckDB's ``information_schema``
of one database: the file's own, or the lake's (a lake's connection also holds
an in-memory database with the ``events`` view, which is not the store).
"""

from __future__ import annotations

from .backend import MigratingStore
from .migrations import recorded_version


class Catalog:
    """The tables of one database of a store's connection (``database=None``: the default)."""

    def __init__(self, store: MigratingStore, database: str | None = None) -> None:
        self.store = store
        self.database = database

    def tables(self) -> list[str]:
        """Names of the tables of the store's main schema."""
        rows = self.store.run(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_catalog = coalesce(?, current_database()) AND table_schema = 'main'",
            [self.database],
        )
        return [row[0] for row in rows]

    def table_exists(self, name: str) -> bool:
        """Whether the main schema has a table (or view) called ``name``."""
        return name in self.tables()

    def schema_version(self) -> int:
        """The version ``nbmemory_meta`` records (0 before there is one); a value that is
        not a whole number means the file was damaged: :class:`StoreError` says so."""
        return recorded_version(self.store)
