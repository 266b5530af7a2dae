"""A lake's first open, one process at a time: a PostgreSQL advisory lock per catalog.

Processes that open a brand-new lake at the same moment (a team's first morning)
would each make DuckLake's catalog tables, and then nbmemory's tables, at once.
PostgreSQL lets one ``CREATE`` win and fails the others with ``duplicate key value
violates unique constraint "pg_type_typname_nsp_index"`` (or ``"pg_namespace_nspname_index"``,
``"ducklake_snapshot_pkey"``): without a lock, 4 of 5 processes started together failed
to open (every round of ``tests/test_lake_first_open.py``).

So :class:`~.store.LakeStore` first attaches without letting DuckLake create anything
(``CREATE_IF_NOT_EXISTS false``); only when the lake, or nbmemory's tables in it, are
missing does it take :func:`creation_lock` and, holding it, look again and make what
is still missing.  An open of a lake that exists never takes the lock.

The lock is transaction-level (``pg_advisory_xact_lock``), taken in a DuckDB transaction
of its own on a cursor beside the lake: DuckDB's postgres extension pins one PostgreSQL
connection to a DuckDB transaction, and a session-level lock taken outside one was
already gone at the next statement (the extension pools its connections).  It is
released when that transaction ends, and by PostgreSQL if the process dies holding it.  Advisory locks belong to one database, so
the key is nbmemory's class and the lake's metadata schema.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Iterator

import duckdb

from ...errors import StoreError
from .url import LakeUrl, sql_literal

#: The first key of nbmemory's advisory locks ("nbml").
LOCK_CLASS = 0x6E626D6C
#: How long an open waits for another process that is making the lake (s).
LOCK_TIMEOUT = 60
#: Attempts to make the catalog when another creator that took no lock (another tool,
#: an nbmemory before this lock) made part of it at the same moment.
CREATE_ATTEMPTS = 3
#: Names in PostgreSQL's unique-violation message that mark a concurrent creation:
#: its catalog's indexes (a schema, a table, a type made twice) and DuckLake's keys.
CREATION_CONFLICTS = (
    "pg_namespace_nspname_index",
    "pg_type_typname_nsp_index",
    "pg_class_relname_nsp_index",
    '"ducklake_',
)
_PG_PREFIX = "ducklake:postgres:"
_SIDE = "nbmemory_first_open"


def lock_key(address: LakeUrl) -> tuple[int, int]:
    """The advisory lock of ``address``'s lake: nbmemory's class, its metadata schema."""
    schema = (address.metadata_schema or "").encode()
    objid = zlib.crc32(schema)
    return LOCK_CLASS, objid - (1 << 32) if objid >= 1 << 31 else objid


def is_creation_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is PostgreSQL refusing a second creation of the same catalog object."""
    text = str(exc)
    return any(name in text for name in CREATION_CONFLICTS) and (
        "duplicate key" in text.lower() or "unique" in text.lower()
    )


class CreationLock:
    """The lake's first-open lock, held from :func:`creation_lock` until :meth:`release`."""

    def __init__(
        self,
        address: LakeUrl,
        con: duckdb.DuckDBPyConnection | None,
        side: duckdb.DuckDBPyConnection | None,
    ) -> None:
        self.address = address
        self._parent = con
        self._con = side

    def made(self) -> bool:
        """Whether the lake and nbmemory's tables exist (made while this process waited).

        Asked of PostgreSQL directly (DuckLake's catalog tables, as its
        specification names them), which takes milliseconds where attaching the
        lake takes a catalog load; False when it cannot tell (the caller then looks
        through DuckLake, holding the lock).  Asked on a connection of its own: the
        lock's transaction took its snapshot before it waited, and does not see
        what the process it waited for made.
        """
        if self._con is None or self._parent is None:
            return False
        check = self._parent.cursor()
        schema = (self.address.metadata_schema or "public").replace('"', '""')
        table = f'"{schema}".ducklake_table'  # DuckLake's catalog of tables
        try:
            [[exists]] = check.execute(
                "SELECT * FROM postgres_query(?, ?)",
                [_SIDE, f"SELECT (to_regclass({sql_literal(table)}) IS NOT NULL)::text"],
            ).fetchall()
            if exists != "true":
                return False
            [[count]] = check.execute(
                "SELECT * FROM postgres_query(?, ?)",
                [
                    _SIDE,
                    f"SELECT count(*)::text FROM {table}"
                    " WHERE table_name = 'nbmemory_meta' AND end_snapshot IS NULL",
                ],
            ).fetchall()
        except duckdb.Error:
            return False
        finally:
            check.close()
        return count != "0"

    def release(self) -> None:
        """End the lock's transaction (which lets the lock go) and detach its database."""
        con, self._con = self._con, None
        if con is not None:
            with contextlib.suppress(duckdb.Error):
                con.execute("ROLLBACK")
            with contextlib.suppress(duckdb.Error):
                con.execute(f"DETACH DATABASE IF EXISTS {_SIDE}")
            with contextlib.suppress(duckdb.Error):
                con.close()


@contextlib.contextmanager
def creation_lock(address: LakeUrl, con: duckdb.DuckDBPyConnection) -> Iterator[CreationLock]:
    """Hold the lake's first-open lock (PostgreSQL catalogs; others: nothing to hold).

    ``con`` is the DuckDB the lake is (or will be) attached to, with the postgres
    extension loaded; the lock is taken on a cursor of it, through the catalog
    database attached beside the lake.  Waits up to :data:`LOCK_TIMEOUT` seconds
    for a process that holds it, then raises a one-line :class:`StoreError`;
    DuckDB's error when the catalog cannot be reached (the caller words it, as for
    the lake's own ATTACH).  Released on leaving, or earlier by
    :meth:`CreationLock.release`.
    """
    if not address.attach.startswith(_PG_PREFIX):
        yield CreationLock(address, None, None)  # SQLite and DuckDB catalogs: no lock
        return
    side = con.cursor()
    lock = CreationLock(address, con, side)
    try:
        side.execute(
            f"ATTACH {sql_literal(address.attach[len(_PG_PREFIX) :])} AS {_SIDE} (TYPE postgres)"
        )
        side.execute("BEGIN TRANSACTION")
        side.execute(
            "CALL postgres_execute(?, ?)", [_SIDE, f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}s'"]
        )
        classid, objid = lock_key(address)
        side.execute(
            "SELECT * FROM postgres_query(?, ?)",
            [_SIDE, f"SELECT pg_advisory_xact_lock({classid}, {objid})::text"],
        ).fetchall()
    except duckdb.Error as exc:
        lock.release()
        if "lock timeout" in str(exc).lower():
            raise StoreError(
                f"another process has been making the lake {address.shown} for over "
                f"{LOCK_TIMEOUT} s (it holds nbmemory's first-open lock); nothing was stored: "
                "check that process, then open the lake again"
            ) from None
        raise
    except BaseException:
        lock.release()
        raise
    try:
        yield lock
    finally:
        lock.release()
