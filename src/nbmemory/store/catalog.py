"""``store.catalog``: which tables a store holds, and the schema version it records.

The same questions on every backend, asked of DuckDB's ``information_schema``
of one database: the file's own, or the lake's (a lake's connection also holds
an in-memory database with the ``events`` view, which is not the store).
Whose file it is (:mod:`.ownership`) also asks what else the database holds, in
every schema: DuckDB's ``duckdb_*`` functions list what users made.
"""

from __future__ import annotations

from typing import Any

from .backend import MigratingStore
from .migrations import recorded_version

#: Everything a user made in one database, in any schema: ``(kind, schema, name)``.
#: DuckDB's own objects are ``internal``; temporary ones live in the ``temp`` database.
_OBJECTS = """
    SELECT 'table', schema_name, table_name FROM duckdb_tables()
     WHERE database_name = coalesce($db, current_database()) AND NOT internal
    UNION ALL SELECT 'view', schema_name, view_name FROM duckdb_views()
     WHERE database_name = coalesce($db, current_database()) AND NOT internal
    UNION ALL SELECT 'sequence', schema_name, sequence_name FROM duckdb_sequences()
     WHERE database_name = coalesce($db, current_database())
    UNION ALL SELECT 'macro', schema_name, function_name FROM duckdb_functions()
     WHERE database_name = coalesce($db, current_database()) AND NOT internal
       AND function_type IN ('macro', 'table_macro')
    UNION ALL SELECT 'type', schema_name, type_name FROM duckdb_types()
     WHERE database_name = coalesce($db, current_database()) AND NOT internal
    UNION ALL SELECT 'schema', schema_name, schema_name FROM duckdb_schemas()
     WHERE database_name = coalesce($db, current_database()) AND NOT internal
    ORDER BY 2, 1, 3
"""
#: The columns of one table of the main schema, in order.
_COLUMNS = """
    SELECT column_name FROM information_schema.columns
     WHERE table_catalog = coalesce($db, current_database()) AND table_schema = 'main'
       AND table_name = $table ORDER BY ordinal_position
"""
#: The primary key of one table of the main schema.
_PRIMARY_KEY = """
    SELECT constraint_column_names FROM duckdb_constraints()
     WHERE database_name = coalesce($db, current_database()) AND schema_name = 'main'
       AND table_name = $table AND constraint_type = 'PRIMARY KEY'
"""


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

    def objects(self) -> list[tuple[str, str, str]]:
        """``(kind, schema, name)`` of every table, view, sequence, macro, type and schema
        a user made in the database, in any schema (``main`` itself is DuckDB's).  A file
        DuckDB just made holds none: what tells a new file from another application's."""
        rows = self.store.run(_OBJECTS, {"db": self.database})
        return [(str(kind), str(schema), str(name)) for kind, schema, name in rows]

    def columns(self, table: str) -> list[str]:
        """The columns of the main schema's ``table``, in order (none: no such table)."""
        return [row[0] for row in self._about(_COLUMNS, table)]

    def primary_key(self, table: str) -> list[str]:
        """The columns of the primary key of the main schema's ``table`` (none: no key)."""
        rows = self._about(_PRIMARY_KEY, table)
        return list(rows[0][0]) if rows else []

    def _about(self, sql: str, table: str) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self.store.run(sql, {"db": self.database, "table": table})
        return rows

    def schema_version(self) -> int:
        """The version ``nbmemory_meta`` records (0 before there is one); a value that is
        not a whole number means the file was damaged: :class:`StoreError` says so."""
        return recorded_version(self.store)
