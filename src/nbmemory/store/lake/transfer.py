"""Copying a whole store between a DuckDB file and a lake: every row, field and vector bit.

* :func:`push` copies a file store into a lake that holds nothing yet;
* :func:`pull` copies a lake into a new file.

Both go table by table over the declarations of :data:`..schema.TABLES` (plus
``events.seq``): the source, opened read-only, is read as Arrow record batches
and each batch is inserted into the target as it is, so ids, sequence numbers,
timestamps, metadata and the float32 vectors arrive unchanged.  The whole copy
is one transaction of the target: a failure leaves a lake as empty as it was
(and a half-made file is deleted).  Nothing is audited or re-embedded: a copy
is the same store, and a round trip file -> lake -> file gives the same rows.

The target's id counters are moved past every id the source used, so later
inserts never reuse one: a lake's ``small_ids`` counter (facts and macros) with
:meth:`LakeStore.advance_ids`; a new file's sequences (facts, macros, audit ids
and ``events.seq``) are created starting past them before its migrations run
(their ``CREATE SEQUENCE IF NOT EXISTS`` keeps them): a lake's sequence numbers
are far beyond what stepping a DuckDB sequence one value at a time can reach.

Only what identifies the store itself stays the target's own: a lake's
``backend`` and ``lake_id`` rows of ``nbmemory_meta``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import duckdb
import pyarrow as pa

from ...errors import StoreError
from ...validation import store_address
from .. import files
from ..connection import Store
from ..schema import EVENT_SEQ, EVENTS, META, TABLES, Table
from .store import LakeStore
from .url import is_lake_url, parse_lake_url

S = TypeVar("S", bound=Store)

#: Rows read from the source and inserted into the target at a time.
BATCH_ROWS = 20_000
#: Rows of ``nbmemory_meta`` that name the store itself, never copied.
IDENTITY_KEYS = ("backend", "lake_id")
#: A file's sequences: which ids each hands out.
SEQUENCES = {
    "facts_id_seq": (("facts", "id"), ("fact_history", "fact_id")),
    "macros_id_seq": (("macros", "id"),),
    "audit_id_seq": (("audit_log", "id"),),
    "events_seq": (("events", EVENT_SEQ),),
}
#: The lake's counter of facts and macros ids (see :mod:`.tables`).
SMALL_IDS = "small_ids"
#: The name an Arrow batch is visible under while it is inserted.


@dataclass
class Copied:
    """What a copy did: rows per table, and the source's snapshot (a lake)."""

    source: str
    target: str
    rows: dict[str, int] = field(default_factory=dict)
    #: The lake snapshot that was read (pull) or made (push).
    snapshot: int | None = None

    @property
    def total(self) -> int:
        return sum(self.rows.values())


def push(file: str | os.PathLike[str], url: str) -> Copied:
    """Copy the file store ``file`` into the lake ``url``, which must hold nothing yet.

    A lake that already holds rows is refused (merging two stores is not a copy:
    ids and counters would clash); so is a file or a lake that is not nbmemory's.
    """
    path = store_address(file)  # a leading ~ expanded, as DuckDB would
    if is_lake_url(path):
        raise StoreError(
            f"push copies a DuckDB file into a lake, and {_shown(path)} is a lake; "
            "name the file first, then the lake"
        )
    if not is_lake_url(url):
        raise StoreError(f"push copies into a lake: {url!r} is not a ducklake: URL")
    with _source_file(path) as source:
        used = _used_ids(source)
        with _closing(LakeStore(url)) as target:
            target.actor = "lake push"
            _refuse_filled(target)
            small = max(used["facts_id_seq"], used["macros_id_seq"])
            if small:
                target.advance_ids("facts_id_seq", small)  # facts and macros share the counter
            copied = Copied(path, target.path)
            _copy(source, target, copied)
            copied.snapshot = target.current_snapshot()
            return copied


def pull(url: str, file: str | os.PathLike[str]) -> Copied:
    """Copy the lake ``url`` into ``file``, a new DuckDB file (an existing one is refused).

    The lake is read in one transaction, so the copy is the lake as of one
    snapshot even while other processes write to it.
    """
    path = store_address(file)  # a leading ~ expanded, as DuckDB would
    if not is_lake_url(url):
        raise StoreError(
            f"pull copies a lake into a new file: {url!r} is not a ducklake: URL; "
            "name the lake first, then the file"
        )
    if is_lake_url(path):
        raise StoreError(f"pull writes a new DuckDB file, and {_shown(path)} is a lake")
    for existing in (path, path + ".wal"):
        if os.path.lexists(existing):
            raise StoreError(
                f"{existing} already exists; pull makes a new file and never overwrites one: "
                "pass a new file name (or move that one away)"
            )
    files.check_store_path(path)
    with _closing(LakeStore(url, read_only=True)) as source, _reading(source):
        snapshot = source.current_snapshot()
        used = _used_ids(source)
        try:
            _new_file(path, used)
            with _closing(Store(path)) as target:
                copied = Copied(source.path, path, snapshot=snapshot)
                _copy(source, target, copied)
                return copied
        except BaseException:
            for made in (path, path + ".wal"):
                with contextlib.suppress(OSError):
                    os.remove(made)
            raise


# -- opening ---------------------------------------------------------------------------
@contextlib.contextmanager
def _closing(store: S) -> Iterator[S]:
    try:
        yield store
    finally:
        store.close()


@contextlib.contextmanager
def _source_file(path: str) -> Iterator[Store]:
    """The file store ``path``, read-only; one that does not exist or is not ours is refused."""
    if not Path(path).expanduser().is_file():
        raise StoreError(f"no store file at {path}; push copies an existing nbmemory file")
    with _closing(Store(path, read_only=True)) as source:
        if not source.catalog.table_exists(META.name):
            raise StoreError(
                f"{path} is not an nbmemory store (it has no {META.name} table); "
                "pass the path of an nbmemory file"
            )
        yield source


@contextlib.contextmanager
def _reading(source: Store) -> Iterator[None]:
    """Every read of the block sees one snapshot of the source.

    Plain ``BEGIN``/``ROLLBACK`` on the connection: a lake's own transactions
    label a commit, and a read-only copy commits nothing.
    """
    with source._lock:
        cursor = source._cursor()
        try:
            cursor.execute("BEGIN TRANSACTION")
        except duckdb.Error as exc:
            raise _error(exc, source, "read") from None
        try:
            yield
        finally:
            with contextlib.suppress(duckdb.Error):
                cursor.execute("ROLLBACK")


def _refuse_filled(target: LakeStore) -> None:
    """A lake that holds any row of ours is not a target for a copy."""
    held = {
        table.name: count
        for table in TABLES.values()
        if table is not META
        and (count := int(target.run(f"SELECT count(*) FROM {table.name}")[0][0]))
    }
    if held:
        listed = ", ".join(f"{name}: {count}" for name, count in held.items())
        raise StoreError(
            f"the lake {target.path} is not empty ({listed}); push copies into a new lake "
            "only: name a new one (another metadata_schema=... and data_path=...)"
        )


def _new_file(path: str, used: dict[str, int]) -> None:
    """Make ``path`` with its sequences starting past the ids the source used."""
    con = files.connect(path)
    try:
        for sequence, last in used.items():
            # DDL takes no parameters: the name is ours, the start an int
            con.execute(f"CREATE SEQUENCE {sequence} START {int(last) + 1}")
        con.execute("CHECKPOINT")
    finally:
        con.close()


# -- ids -------------------------------------------------------------------------------
def _used_ids(source: Store) -> dict[str, int]:
    """Per file sequence, the largest id the source has used (0: none).

    Rows hold most; a file's sequences and a lake's counter also remember ids of
    rows deleted since (a deleted fact's history keeps its id).
    """
    used: dict[str, int] = {}
    for sequence, columns in SEQUENCES.items():
        highest = 0
        for table, column in columns:
            value = source.run(f"SELECT max({column}) FROM {table}")[0][0]
            highest = max(highest, int(value or 0))
        used[sequence] = highest
    if isinstance(source, LakeStore):
        rows = source.run("SELECT value FROM nbmemory_counters WHERE name = ?", [SMALL_IDS])
        counter = int(rows[0][0] or 0) if rows else 0
        for sequence in ("facts_id_seq", "macros_id_seq"):
            used[sequence] = max(used[sequence], counter)
    else:
        rows = source.run(
            "SELECT sequence_name, last_value FROM duckdb_sequences()"
            " WHERE database_name = current_database() AND schema_name = 'main'"
            " AND sequence_name IN (SELECT unnest(?::VARCHAR[]))",
            [list(SEQUENCES)],
        )
        for sequence, last in rows:
            used[sequence] = max(used[sequence], int(last or 0))
    return used


# -- copying ---------------------------------------------------------------------------
def _columns(table: Table) -> tuple[str, ...]:
    return table.names + ((EVENT_SEQ,) if table is EVENTS else ())


def _copy(source: Store, target: Store, copied: Copied) -> None:
    """Every table of :data:`TABLES`, in one transaction of the target."""
    current = ""
    try:
        with target.transaction():
            for table in TABLES.values():
                current = table.name
                if table is META:
                    copied.rows[table.name] = _copy_meta(source, target)
                else:
                    copied.rows[table.name] = _copy_table(source, target, table)
    except duckdb.Error as exc:
        raise _error(exc, target, f"copy {current} into") from None


def _copy_table(source: Store, target: Store, table: Table) -> int:
    columns = ", ".join(_columns(table))
    rows = 0
    for batch in source.stream(f"SELECT {columns} FROM {table.name}", None, BATCH_ROWS):
        if not batch.num_rows:
            continue
        target.statements.insert_arrow(table.name, pa.Table.from_batches([batch]))
        rows += batch.num_rows
    return rows


def _copy_meta(source: Store, target: Store) -> int:
    """The source's ``nbmemory_meta`` rows replace the target's, but for its identity."""
    rows = [
        (key, value)
        for key, value in source.run(f"SELECT key, value FROM {META.name}")
        if key not in IDENTITY_KEYS
    ]
    target.statements.delete(
        META.name, "key IN (SELECT unnest(?::VARCHAR[]))", [[k for k, _ in rows]]
    )
    for key, value in rows:
        target.statements.insert(META.name, {"key": key, "value": value})
    return len(rows)


def _error(exc: duckdb.Error, store: Store, what: str) -> StoreError:
    first = files.first_line(str(exc))[:200]
    return StoreError(
        f"could not {what} {store.path} ({first}); nothing was copied: fix that and run it again"
    )


def _shown(url: str) -> str:
    """A lake URL for a message, its password hidden."""
    try:
        return parse_lake_url(url).shown
    except StoreError:
        return "a ducklake: address"
