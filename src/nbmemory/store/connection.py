"""The store: one DuckDB connection, its lock, transactions, and change announcements.

One connection per store per process, every statement under one lock, so the
caller's threads never interleave statements on it (DuckDB's optimistic
concurrency between connections can turn a transaction's UPDATE of a row another
thread just committed into a silent no-op; a memory layer must not lose writes).
Results are always fetched whole: an unfinished result keeps the connection busy.

One exception, for speed: the embedding worker writes vectors on a cursor of its
own (:meth:`Store.beside`) while the caller appends new events.  Only appends run
beside it: every other write transaction, and the worker's, hold the *rows lock*
for their whole length, so no two transactions that could touch the same
existing row ever overlap.

Every statement is parameterised; the only names formatted into SQL are table
and column names from :mod:`.schema`.  The SQL itself lives in the table objects
(``store.events``, ``store.facts`` ...); nothing outside this package writes SQL.

After a transaction commits, the store announces what it changed (a
:class:`~.changes.Change`) to its listeners: that is how in-memory caches stay in
step.  Plain SQL run through the escape hatch (:meth:`Store.execute` and
friends) is announced as an unknown change unless DuckDB parses it as a
``SELECT``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import duckdb
import pyarrow as pa

from ..errors import StoreError
from . import files, journal, journal_view, migrations, openers, peers
from .archive import EventArchive
from .audit import AuditTable, MetaTable
from .catalog import Catalog
from .changes import Change, Listener
from .events import EventsTable
from .facts import FactsTable, advance_sequence
from .files import CHECKPOINT_THRESHOLD, DISABLED_COMPRESSION
from .lean_scan import LEAN_SCAN_MEMORY, LeanScans
from .macros import MacrosTable
from .plain_sql import PlainSQL, fetched
from .sessions import SessionsTable
from .side import Side
from .statements import FileStatements, Statements
from .swap import FileSwap
from .tasks import PrefixesTable, TasksTable
from .vectors import EventVectors

log = logging.getLogger(__name__)

T = TypeVar("T")


Params = Sequence[Any] | dict[str, Any] | None


class Store(PlainSQL, FileSwap):
    """One open DuckDB file (or ``:memory:``) with nbmemory's schema."""

    #: Where the rows live: ``"file"`` (a DuckDB file) or ``"ducklake"`` (:mod:`.lake`).
    backend = "file"
    #: The database of the connection whose tables are the store's (None: the default one).
    catalog_database: str | None = None
    #: Seconds the embedding worker waits for more texts before a batch (one write each).
    embed_linger = 0.05
    #: The table object of ``event_vectors`` (a lake keeps vector state apart from rows).
    vectors_class: type[EventVectors] = EventVectors
    #: DuckDB's memory limit while a scan is read into a cache of ours (:mod:`.lean_scan`).
    lean_scan_memory = LEAN_SCAN_MEMORY
    #: Whether :meth:`beside` runs on a cursor of its own (else it is a plain transaction).
    writes_beside = True
    #: Whether the connection stays open from open to close (a shared store lets go of
    #: the file between calls: other processes write it meanwhile).
    holds_file = True

    def __init__(
        self, path: str | os.PathLike[str], *, read_only: bool = False, adopt: bool = False
    ) -> None:
        self.path = str(path)
        self.read_only = read_only
        #: Held by every statement and transaction (a read-modify-write holds it throughout).
        self._lock: Any = threading.RLock()
        #: Held, before ``_lock``, by every write transaction but an append's, and by the
        #: transaction :meth:`beside` runs (its statements do not take ``_lock``).  One
        #: for all the stores of this process on the file (:func:`.peers.rows_lock`).
        self._rows_lock = peers.rows_lock(self.path if self.backend == "file" else ":memory:")
        #: The cursor :meth:`beside` writes on, the thread in it and its change record.
        self._side = Side()
        #: ``.on`` while the current thread opens transactions that only append.
        self._appending = threading.local()
        #: Who writes (set by the writer; a lake puts it in each commit message).
        self.actor = "api"
        #: Number of statements run; tests use it to prove a read touched no SQL.
        self.statements_run = 0
        #: Rows of a legacy ``messages`` table copied into ``events`` when this store opened.
        self.migrated_messages = 0
        self._lean_scans = LeanScans(self.lean_scan_memory)
        self._listeners: list[Listener] = []
        #: Removes secrets from user text before it is stored: ``text -> (text, count)``.
        self.redactor: Callable[[str], tuple[str, int]] | None = None
        #: Which texts of a batch the redactor must see, ascending (the others hold
        #: nothing it removes); None: every text.
        self.redaction_suspects: Callable[[list[str]], list[int]] | None = None
        self._tx_owner: int | None = None
        #: Set when the connection was let go after a file error: the next call reopens.
        self._reopen = False
        #: Closes the descriptor that keeps reads of the file from dropping DuckDB's lock.
        self._let_go_file: Callable[[], Any] = lambda: None
        self._pending: Change | None = None
        #: Set when another store of this process committed a write to the same file.
        self.peer_wrote = False
        self._peer_key: str | None = None
        #: The writes whose SQL differs between backends (:mod:`.statements`).
        self.statements: Statements = self._statements()
        self.events = EventsTable(self)
        self.archive = EventArchive(self)
        self.vectors = self.vectors_class(self)
        self.facts = FactsTable(self)
        self.macros = MacrosTable(self)
        self.tasks = TasksTable(self)
        self.prefixes = PrefixesTable(self)
        self.sessions = SessionsTable(self)
        self.audit = AuditTable(self)
        self.meta = MetaTable(self)
        #: Which tables the store holds, and its schema version.
        self.catalog = Catalog(self, self.catalog_database)
        #: Leaves the processes that have the file open (:mod:`.openers`): joined before
        #: DuckDB sees the file, so an opener the rule keeps out never touches it.
        self._leave_openers = openers.join(self)
        with peers.opening(self.path if self.backend == "file" else ":memory:"):
            try:
                self.con: duckdb.DuckDBPyConnection | None = self._connect()
            except BaseException:
                self._leave_openers()
                raise
            try:
                self._open_schema(read_only=read_only, adopt=adopt)
                self._show_journals()
            except BaseException:
                self.close()  # a refused file is let go at once
                raise
            if self.backend == "file":  # still opening: a rewrite of the file sees this store
                self._peer_key = peers.join(self, self.path)
        if self.on_disk:
            self._let_go_file = files.hold(self, self.path)

    def _open_schema(self, *, read_only: bool, adopt: bool) -> None:
        """Check the file is ours and bring its tables up to this version."""
        assert self.con is not None
        if self.on_disk:
            files.check_blocks(self.con, self.path)
        if read_only:
            migrations.check_readable(self)
        else:
            migrations.migrate(self, adopt=adopt)

    def _show_journals(self) -> None:
        """A reader shows the rows shared processes acknowledged and left in their
        journals (:mod:`.journal_view`); a writer writes them in instead."""
        if self.read_only and self.on_disk and journal.SUPPORTED:
            assert self.con is not None
            try:
                journal_view.show_journal_rows(self.con, self.path)
            except (duckdb.Error, OSError, ValueError):  # the file's rows are still read
                log.warning("nbmemory: could not read the shared journals", exc_info=True)

    @contextlib.contextmanager
    def schema_changes(self) -> Iterator[None]:
        """Run the block's schema statements (a migration) so that they are written into
        the file itself when they commit, never left in the write-ahead log.

        DuckDB 1.x cannot replay a WAL that holds an ``ALTER TABLE`` of a table whose
        column defaults to ``nextval(...)`` (``events.seq``): "INTERNAL Error: Failure
        while replaying WAL file ... GetDefaultDatabase with no default database set";
        every write of that session is then unreachable to it (2.0 replays it).  With
        the checkpoint threshold at zero, DuckDB checkpoints as part of the COMMIT and
        writes no WAL for it: a kill before the new header is written leaves the file
        as it was before the migration, a kill after leaves it migrated.  The explicit
        ``CHECKPOINT`` after covers a commit that could not checkpoint.
        """
        if self.read_only or not self.on_disk:
            yield
            return
        cursor = self._cursor()  # SET takes no parameters: the values are our constants
        cursor.execute("SET checkpoint_threshold = '0KB'")
        try:
            yield
        finally:
            if self.con is not None:
                self._cursor().execute(f"SET checkpoint_threshold = '{CHECKPOINT_THRESHOLD}'")
        self.run("CHECKPOINT")

    def _statements(self) -> Statements:
        """This backend's :class:`~.statements.Statements`: DuckDB's own SQL."""
        return FileStatements(self.run, self.registered)

    def advance_ids(self, sequence: str, at_least: int) -> None:
        """Move ``sequence`` past ``at_least`` so later inserts never reuse an imported id."""
        advance_sequence(self, sequence, at_least)

    def claim(self) -> None:
        """Before a read-then-insert (an upsert): nothing to do where keys are enforced."""

    def begin_call(self) -> int:
        """How many transactions committed so far (a lake retries a call that made none)."""
        return 0

    # -- connection -------------------------------------------------------------------
    def _connect(self) -> duckdb.DuckDBPyConnection:
        con = files.connect(self.path, read_only=self.read_only)
        if not self.read_only:  # SET takes no parameters: the value is our constant
            con.execute(f"SET checkpoint_threshold = '{CHECKPOINT_THRESHOLD}'")
            con.execute(f"SET disabled_compression_methods = '{DISABLED_COMPRESSION}'")
        return con

    def sole_writer(self) -> bool:
        """Whether nothing but this store can write the file until it closes: DuckDB
        keeps other processes out, and no other store of this process has it open."""
        return (
            self.holds_file
            and self.backend == "file"
            and not self.read_only
            and not self.closed
            and peers.count(self._peer_key) == 1
        )

    def close_after(self, last: Callable[[], T]) -> T | None:
        """Run ``last()`` under the locks, with nothing else running, then close (once
        DuckDB has checkpointed, the file holds everything ``last`` saw).  The store
        closes even when ``last`` fails (None then; the failure is logged)."""
        with self._rows_held(), self._lock:
            try:
                return last()
            except Exception:
                log.warning("nbmemory: the last step before closing failed", exc_info=True)
                return None
            finally:
                self.close()

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._rows_held(), self._lock:
            peers.leave(self, self._peer_key)
            self._reopen = False
            self._side.drop()
            if self.con is not None:
                con, self.con = self.con, None
                with contextlib.suppress(duckdb.Error):  # a full disk cannot checkpoint
                    con.close()
            self._let_go_file()  # DuckDB's lock is gone with the connection
            self._leave_openers()

    @property
    def closed(self) -> bool:
        return self.con is None

    @property
    def on_disk(self) -> bool:
        """Whether the rows are in a DuckDB file of this machine (not ``:memory:``, not
        another backend's): what checks of the file's bytes, WAL and size apply to."""
        return self.backend == "file" and self.path != ":memory:"

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        if self._side.here():
            assert self._side.cursor is not None
            return self._side.cursor
        if self.con is None and self._reopen:  # after a full disk or an invalidation
            self.con = self._connect()
            self._reopen = False
            self._show_journals()
        if self.con is None:
            raise StoreError("this store is closed; open a new Memory(path)")
        return self.con

    def locked(self) -> contextlib.AbstractContextManager[Any]:
        """Hold the store's lock while the block runs: no statement of another thread,
        no commit and no announcement of a change slips in between (caches read the
        table and follow its changes under it).  Reentrant; a shared store holds the
        file meanwhile."""
        return self._lock

    def turn(self) -> contextlib.AbstractContextManager[Any]:
        """Hold the file for a whole call (shared mode); a no-op for a store this process owns."""
        return contextlib.nullcontext()

    def journal_for(self, writer: Any) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
        """Where ``add_event`` appends its built row instead of a transaction (shared
        mode's journal, :mod:`.journal`), returning the stored record; None: nowhere.
        Here, rows a killed shared process journalled are written first."""
        if self.on_disk and not self.read_only and journal.SUPPORTED:
            journal.replay(self, writer)
        return None

    def refresh(self) -> None:
        """Notice writes the caches did not follow: here, those of another store this
        process opened on the same file (see :mod:`.peers`)."""
        self._note_peer_writes()

    def _note_peer_writes(self) -> None:
        """Tell the caches anything may have changed when another store of this process
        wrote the same file since (not inside a transaction: at the next call)."""
        if self.peer_wrote and not self.in_transaction:
            with self._lock:
                if self.peer_wrote:
                    self.peer_wrote = False
                    self._announce(Change(unknown=True))

    # -- running statements -------------------------------------------------------------
    def run(self, sql: str, params: Params = None, fetch: str = "rows") -> Any:
        """Run one parameterised statement under the lock and fetch its result whole.

        ``fetch`` is ``"rows"`` (tuples), ``"records"`` (dicts), ``"df"`` (pandas) or
        ``"arrow"``.  Outside a transaction, a write-write conflict is retried.
        """
        with self._guard():
            attempts = 1 if self.in_transaction else 5
            for attempt in range(attempts):
                self.statements_run += 1
                try:
                    if fetch == "arrow":  # a relation hands Arrow over without a copy
                        return self._cursor().sql(sql, params=params or None).to_arrow_table()
                    return fetched(self._cursor().execute(sql, params or []), fetch)
                except duckdb.TransactionException as exc:
                    if "invalidated" in str(exc) or attempt == attempts - 1:
                        self._failed(exc)
                        raise
                except duckdb.Error as exc:
                    self._failed(exc)
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _failed(self, exc: duckdb.Error) -> None:
        """After an error about the file itself (a full disk, a damaged block, a database
        DuckDB invalidated): let the connection go, raise a one-line error; the next
        call opens the file again.  Any other error is the caller's to see."""
        translated = files.translate(exc, self.path)
        if translated is None and not (
            isinstance(exc, duckdb.FatalException) or "invalidated" in str(exc)
        ):
            return
        with self._lock:
            self._side.drop()
            con, self.con = self.con, None
            self._reopen = True
            if con is not None:
                with contextlib.suppress(duckdb.Error):
                    con.close()
            self._announce(Change(unknown=True))  # what the caches hold may be gone
        raise translated or StoreError(
            f"the store {self.path} stopped working ({files.first_line(str(exc))[:160]}); "
            "call again: it reopens by itself"
        ) from None

    def stream(
        self, sql: str, params: Params, rows: int, *, lean: bool | str = False
    ) -> Iterator[pa.RecordBatch]:
        """The result of one statement as Arrow record batches of ``rows`` rows, read
        under the lock (consume it fully: the connection is busy until then).

        ``lean=True`` is for a scan read once into a cache of our own (the vector
        index): DuckDB's buffer pool would otherwise keep the blocks it read, up to
        80% of RAM (at 1M vectors, 1 GB more peak RSS for nothing), so its memory
        limit is lowered to :data:`.lean_scan.LEAN_SCAN_MEMORY` (or to ``lean`` given as a
        limit) for the scan and put back after.
        """
        with self._guard():
            self.statements_run += 1
            try:
                with (
                    self._lean_scans.lean(
                        self._cursor,
                        lambda: self.con is not None,
                        lean if isinstance(lean, str) else None,
                    )
                    if lean
                    else contextlib.nullcontext()
                ):
                    reader = self._cursor().sql(sql, params=params or None).to_arrow_reader(rows)
                    yield from reader
            except duckdb.Error as exc:
                self._failed(exc)
                raise

    @contextlib.contextmanager
    def registered(self, name: str, data: pa.Table) -> Iterator[str]:
        """``data`` visible to SQL as the view ``name`` while the block runs (lock held)."""
        with self._guard():
            cursor = self._cursor()
            cursor.register(name, data)
            try:
                yield name
            except BaseException:
                # in a transaction DuckDB aborted, unregistering fails too: the error
                # that aborted it is the one to raise
                with contextlib.suppress(duckdb.Error):
                    cursor.unregister(name)
                raise
            cursor.unregister(name)

    # -- transactions and announcements -------------------------------------------------
    @property
    def in_transaction(self) -> bool:
        """True on the thread that holds an open transaction."""
        me = threading.get_ident()
        return self._tx_owner == me or self._side.owner == me

    def _on_side(self) -> bool:
        """Whether the current thread is in the transaction :meth:`beside` runs."""
        return self._side.here()

    def _guard(self) -> contextlib.AbstractContextManager[Any]:
        """The lock a statement takes: ``_lock``, or none inside :meth:`beside`."""
        return contextlib.nullcontext() if self._on_side() else self._lock

    def _open_change(self) -> Change | None:
        """The change record of the current thread's open transaction, if any."""
        if self._side.here():
            return self._side.pending
        if self._pending is not None and self._tx_owner == threading.get_ident():
            return self._pending
        return None

    def _rows_held(self) -> contextlib.AbstractContextManager[Any]:
        """The rows lock, for a write transaction that may change existing rows (none
        where nothing is written beside, or for an append: see :meth:`appending`)."""
        if not self.writes_beside or getattr(self._appending, "on", False):
            return contextlib.nullcontext()
        return self._rows_lock

    @contextlib.contextmanager
    def appending(self, rows: int = 1) -> Iterator[None]:
        """Transactions opened in the block only add rows (events, their audit rows) and
        touch sessions, so they may run while :meth:`beside` writes vectors.  ``rows``:
        how many events they add (a lake's large writes take no turn)."""
        before = getattr(self._appending, "on", False), getattr(self._appending, "rows", 0)
        self._appending.on, self._appending.rows = True, rows
        try:
            yield
        finally:
            self._appending.on, self._appending.rows = before

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Change]:
        """Run the block's statements atomically under the lock; yields the change record.

        Changes recorded with :meth:`changed` are announced once, after COMMIT; a
        rollback announces nothing.  A transaction opened inside another on the
        same thread joins it.
        """
        if self._side.here():  # joins the transaction beside
            assert self._side.pending is not None
            yield self._side.pending
            return
        with self._rows_held(), self._lock:
            if self.in_transaction:
                assert self._pending is not None
                yield self._pending
                return
            self._note_peer_writes()  # a cache this transaction reads may be behind
            try:
                self._cursor().execute("BEGIN TRANSACTION")
            except duckdb.Error as exc:
                self._failed(exc)
                raise
            self._tx_owner = threading.get_ident()
            self._pending = Change()
            try:
                yield self._pending
            except BaseException:
                self._end_transaction("ROLLBACK")
                raise
            pending = self._end_transaction("COMMIT")
            if pending:
                peers.wrote(self, self._peer_key)
                self._announce(pending)

    def beside(self, block: Callable[[Change], T]) -> T:
        """Run ``block(change)`` as one transaction on a cursor of its own, beside the
        caller's appends: the embedding worker's vector writes.

        Its statements do not take the store's lock, so a caller adding events is not
        held up by them (with a fast embedder the two used to take turns: most of
        ingest's time).  It holds the rows lock instead, which every other write
        transaction takes too: only appends of new rows overlap it, and DuckDB never
        sees two transactions touch one row.  The commit and the announcement of what
        changed happen under the store's lock, like any other transaction's.  Where
        that cannot hold (a shared or lake store, a transaction already open on this
        thread, a write conflict after all) it is an ordinary transaction.
        """
        if not self.writes_beside or self.in_transaction:
            with self.transaction() as change:
                return block(change)
        with self._rows_lock:
            cursor, change = self._begin_side()
            try:
                result = block(change)
                with self._lock:
                    pending = self._side.end(cursor, "COMMIT")
                    if pending:
                        peers.wrote(self, self._peer_key)
                        self._announce(pending)
                return result
            except duckdb.TransactionException as exc:  # not expected under the rows lock
                self._side.end(cursor, "ROLLBACK")
                if "invalidated" in str(exc):
                    self._failed(exc)
                    raise
                log.warning("nbmemory: a write beside the caller's conflicted; writing it again")
            except duckdb.Error as exc:
                self._side.end(cursor, "ROLLBACK")
                self._failed(exc)
                raise
            except BaseException:
                self._side.end(cursor, "ROLLBACK")
                raise
            with self.transaction() as again:
                return block(again)

    def _begin_side(self) -> tuple[duckdb.DuckDBPyConnection, Change]:
        """Open the transaction :meth:`beside` runs, on its cursor (made on first use)."""
        with self._lock:
            try:
                return self._side.begin(lambda: self._cursor().cursor())
            except duckdb.Error as exc:
                self._failed(exc)
                raise

    def _end_transaction(self, verb: str) -> Change:
        pending, self._pending = self._pending or Change(), None
        self._tx_owner = None
        if self.con is not None:
            try:
                self.con.execute(verb)
            except duckdb.Error as exc:
                if verb == "COMMIT":
                    if self.con is not None:
                        with contextlib.suppress(duckdb.Error):
                            self.con.execute("ROLLBACK")
                    self._failed(exc)
                    raise
        return pending

    def changed(self, change: Change) -> None:
        """Record what a statement changed: announced at commit (at once outside one)."""
        with self._guard():
            pending = self._open_change()
            if pending is not None:
                pending.merge(change)
            else:  # committed already (a statement outside a transaction)
                peers.wrote(self, self._peer_key)
                self._announce(change)

    def count_redactions(self, namespace: str | None, count: int) -> None:
        """Note secrets removed by a write of the open transaction (its audit row says so)."""
        pending = self._open_change()
        if pending is not None:
            redacted = pending.redacted
            redacted[namespace] = redacted.get(namespace, 0) + count

    def listen(self, listener: Listener) -> None:
        """Call ``listener(change)`` after every committed change (under the store lock)."""
        self._listeners.append(listener)

    def _announce(self, change: Change) -> None:
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:  # a cache that cannot follow rebuilds instead
                log.exception("nbmemory: a cache failed to follow a change; rebuilding it")
                with contextlib.suppress(Exception):
                    listener(Change(unknown=True))

    def mark_stale(self) -> None:
        """Tell every cache that anything may have changed (another writer, plain SQL)."""
        self.changed(Change(unknown=True))

    def check_rewritable(self, *, expire_snapshots: bool = False) -> None:
        """Raise, before anything is deleted, when :meth:`rewrite` cannot do its job here.

        ``expire_snapshots`` is the caller's consent to losing older snapshots (a
        lake's time travel); a file keeps none, so here it changes nothing.
        """

    def stored_bytes(self) -> int:
        """Bytes the store takes on disk (0 in memory): what :meth:`rewrite` shrinks."""
        return os.path.getsize(self.path) if self.on_disk else 0
