"""What a reader sees of the rows shared processes acknowledged and never wrote.

A shared process's ``add_event`` returns once its row is in its journal
(:mod:`.journal`); the row reaches the DuckDB file at the next turn of any shared
writer, or at the next writable open when its process was killed first.  A reader
(``Memory(path, read_only=True)``, shared or not, ``nbmemory logs``, ``state
list``, ``health``) cannot write those rows in, and it saw none of them: a shared
writer killed after ten acknowledged ``add_event`` calls left a reader with 0
events until someone opened the store writable.

So a reader reads the journals in memory when it connects (a shared one at each
turn): the rows not in the file go into a temporary table, and a temporary view
``events`` (DuckDB binds an unqualified name, and ``main.events``, to the temporary
one first) shows the file's rows and those together, so every read of the events (search and its indexes,
counts, sessions' turns, exports) sees what was acknowledged.  Nothing is written:
the file, the journals and their locks are only read.  The rows have no vector until
a writer stores them, so cosine search does not find them yet; keywords do.  While a
private reader has the file open no shared process and no writer can have it
(:mod:`.openers`), so the journals cannot change under it; a shared reader reads
them again at its next turn.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from . import journal
from .schema import EVENTS

#: The temporary table of the journals' rows (the view ``events`` reads it).
PENDING = "nbmemory_journal_rows"


def journal_rows(store_path: str) -> list[dict[str, Any]]:
    """Every row the journals beside ``store_path`` hold, once per id (read under a
    shared lock, so no line is read half-written)."""
    folder = journal.folder_of(store_path)
    try:
        names = sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    rows: dict[str, dict[str, Any]] = {}
    for name in names:
        if not name.endswith(".jsonl"):
            continue
        try:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            continue
        try:
            journal.shared_lock(fd)
            data = journal.read_all(fd)
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)  # closing lets the lock go
        for entry in journal.decode(data):
            row = entry.get("row") if isinstance(entry, dict) else None
            if isinstance(row, dict) and isinstance(row.get("id"), str):
                rows.setdefault(row["id"], row)
    return list(rows.values())


def show_journal_rows(con: Any, store_path: str) -> int:
    """On a read-only connection ``con`` of the store at ``store_path``: the journals'
    rows not in the file, shown by a temporary view ``events`` over both; returns how
    many (0: nothing is made, the file's table is read as it is)."""
    rows = journal_rows(store_path)
    if not rows:
        return 0
    ((database,),) = con.execute("SELECT current_database()").fetchall()
    stored = '"' + str(database).replace('"', '""') + '".main.events'
    con.register("nbmemory_journal_arrow", EVENTS.to_arrow(rows))
    try:
        # the seq after the file's last, in time order: the indexes follow rows by it
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {PENDING} AS "
            f"SELECT j.*, top.seq + row_number() OVER (ORDER BY j.created_at, j.id) AS seq "
            f"FROM nbmemory_journal_arrow AS j, "
            f"(SELECT coalesce(max(seq), 0) AS seq FROM {stored}) AS top "
            f"WHERE j.id NOT IN (SELECT id FROM {stored})"
        )
    finally:
        con.unregister("nbmemory_journal_arrow")
    ((count,),) = con.execute(f"SELECT count(*) FROM temp.{PENDING}").fetchall()
    if count:
        con.execute(
            f"CREATE OR REPLACE TEMP VIEW events AS SELECT * FROM {stored} "
            f"UNION ALL BY NAME SELECT * FROM temp.{PENDING}"
        )
    else:
        con.execute(f"DROP TABLE temp.{PENDING}")
    return int(count)
