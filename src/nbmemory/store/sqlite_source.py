"""Reading another agent's SQLite memory file (the Rust agent's schema), read-only."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from ..errors import InvalidInput

#: Tables of the Rust agent's SQLite schema that an import reads.
SOURCE_TABLES = (
    "events",
    "messages",
    "facts",
    "macros",
    "scheduled_tasks",
    "terminal_allowed_prefixes",
)


def read_sqlite(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """Every row of the known tables present in the file, by table (opened read-only)."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise InvalidInput(f"no SQLite database at {file}; pass the path of the agent's .db file")
    try:
        con = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.DatabaseError as exc:
        raise InvalidInput(f"{file} is not a readable SQLite database ({exc})") from None
    try:
        con.row_factory = sqlite3.Row
        try:
            present = {
                r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
        except sqlite3.DatabaseError as exc:
            raise InvalidInput(f"{file} is not a readable SQLite database ({exc})") from None
        # table names come from the fixed list above, never from the file
        return {
            table: [dict(r) for r in con.execute(f"SELECT * FROM {table}").fetchall()]
            for table in SOURCE_TABLES
            if table in present
        } | {"_tables": [{"name": name} for name in sorted(present)]}
    finally:
        con.close()
