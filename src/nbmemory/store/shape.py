"""The shape of a store's tables checked against :mod:`.schema` when it opens.

A file marked as nbmemory's (``nbmemory_meta``) whose tables lack columns nbmemory
reads was changed by something else (a table dropped and made again by hand,
another tool writing the same names): every query on it would fail with a raw
DuckDB error.  It is refused at open instead, naming the table and the columns
it lacks, before anything is written.
"""

from __future__ import annotations

from ..errors import StoreError
from .backend import MigratingStore
from .schema import EVENT_SEQ, TABLES

#: Columns a table has that :mod:`.schema` keeps apart from its declared ones.
_EXTRA: dict[str, tuple[str, ...]] = {"events": (EVENT_SEQ,)}


def missing_columns(store: MigratingStore) -> dict[str, list[str]]:
    """table -> the columns it lacks, for each of nbmemory's tables (an empty list: the
    table is missing); empty when every table has what :mod:`.schema` declares."""
    rows = store.run(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = 'main' AND table_name IN (SELECT unnest(?::VARCHAR[]))",
        [list(TABLES)],
    )
    present: dict[str, set[str]] = {}
    for table, column in rows:
        present.setdefault(table, set()).add(column)
    missing: dict[str, list[str]] = {}
    for name, table in TABLES.items():
        if name not in present:
            missing[name] = []
            continue
        wanted = [*table.names, *_EXTRA.get(name, ())]
        lacking = [c for c in wanted if c not in present[name]]
        if lacking:
            missing[name] = lacking
    return missing


def check_columns(store: MigratingStore) -> None:
    """Refuse (:class:`StoreError`) a store whose tables lack columns nbmemory reads."""
    missing = missing_columns(store)
    if not missing:
        return
    parts = []
    for table, columns in missing.items():
        if not columns:
            parts.append(f"no {table} table")
            continue
        more = f" and {len(columns) - 6} more" if len(columns) > 6 else ""
        parts.append(f"{table} lacks {', '.join(columns[:6])}{more}")
    raise StoreError(
        f"{store.path} says it is an nbmemory store, but its tables are not nbmemory's: "
        f"{'; '.join(parts)}; nothing was changed. Something else changed these tables: "
        "restore the file from a backup, or pass another path."
    )
