"""What a file on disk is, told from its name and its first bytes: a database (DuckDB's
or SQLite's), a data file DuckDB reads as a table (CSV, JSON, Parquet), binary, text.

nbmemory never writes a file that is not its own (an export, AGENTS.md, ``nbmemory.toml``
write over whatever is at their path), and never hands DuckDB a path it would not open
as a database file: these facts are what its checks decide with.  Nothing here opens a
file for writing; the callers that may hold a store open pass their own reader of a
file's first bytes (closing a descriptor of a store file drops DuckDB's lock on it).
"""

from __future__ import annotations

import os
import re

#: A DuckDB database file has these bytes at offset 8 (after its checksum).
DUCKDB_MAGIC = b"DUCK"
#: Every SQLite 3 database file starts with these bytes.
SQLITE_MAGIC = b"SQLite format 3\x00"
#: Names a database file usually has: refused as a target for text even when empty
#: (an empty ``agent.duckdb`` is a new store to nbmemory and to DuckDB).
DATABASE_SUFFIXES = (".duckdb", ".ddb", ".db", ".sqlite", ".sqlite3", ".db3", ".wal")

#: The names DuckDB (1.5 and 2.x) opens, when the file exists and is not a DuckDB
#: database, as an in-memory database with a view of the file -- not as a database:
#: anything written there is lost at close.  Checked against DuckDB 2.0.1 and 1.5.5:
#: ``.csv``, ``.tsv``, ``.json``, ``.jsonl``, ``.ndjson``, ``.parquet``, each alone or
#: followed by ``.gz`` or ``.zst``, in any case (``.txt``, ``.psv``, ``.avro``,
#: ``.csv.bz2`` are refused as "not a valid DuckDB database" instead).  DuckDB looks at
#: the file a symlink points to.
_READ_AS_TABLE = re.compile(r"\.(csv|tsv|json|jsonl|ndjson|parquet)(\.(gz|zst))?$", re.IGNORECASE)

#: How many bytes tell a file's kind (the headers above, a NUL byte of a binary file).
HEAD_BYTES = 4096


def read_head(path: str | os.PathLike[str], size: int = HEAD_BYTES) -> bytes | None:
    """The first ``size`` bytes of the file at ``path``; None if it cannot be read (not
    for a store file this process may hold: ``store.files.read_span`` reads those)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(size)
    except OSError:
        return None


def database_kind(head: bytes | None) -> str | None:
    """``"DuckDB"`` or ``"SQLite"`` when ``head`` (a file's first bytes) is a database's."""
    if not head:
        return None
    if head[8:12] == DUCKDB_MAGIC:
        return "DuckDB"
    if head.startswith(SQLITE_MAGIC):
        return "SQLite"
    return None


def named_like_database(path: str | os.PathLike[str]) -> bool:
    """Whether the file name ends like a database's (``.duckdb``, ``.sqlite``, ``.db`` ...)."""
    return os.fspath(path).lower().endswith(DATABASE_SUFFIXES)


def read_as_table(path: str | os.PathLike[str]) -> str | None:
    """The suffix (``.csv``, ``.json.gz`` ...) for which DuckDB reads the file at
    ``path`` -- the file a symlink points to -- as a table, not as a database; None
    for any other name."""
    match = _READ_AS_TABLE.search(os.path.basename(os.path.realpath(path)))
    return match.group(0) if match else None


def is_binary(head: bytes | None) -> bool:
    """Whether ``head`` (a file's first bytes) is not text: a NUL byte, or not UTF-8."""
    if not head:
        return False
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:  # a character cut at the end of the head is text
        return exc.start < len(head) - 3
    return False
