""":class:`LakeStore`: the store on DuckLake: many processes, on many hosts, at once.

One in-memory DuckDB per process attaches the lake (catalog in PostgreSQL, data
as Parquet under a shared path) and uses it as its default database, so the
table objects' SQL runs unchanged, with these differences, all kept here:

* **Append-only where writers meet.**  DuckLake commits optimistically and
  treats an update or delete of a table as conflicting with any concurrent
  insert into it.  So nothing that every writer does updates a shared table:
  events and their vectors are only appended; an event's vector model is read
  from ``event_vectors`` through a view named ``events`` (:data:`EVENTS_VIEW`)
  instead of being written on the row.  Rarer changes (a text edited, a fact
  upserted, a session closed) are updates; if another writer touched the same
  table meanwhile the commit fails with :class:`~nbmemory.errors.WriteConflict`,
  and ``Memory`` runs the call again.
* **No keys, sequences or RETURNING** in DuckLake: :mod:`.keyed_writes` runs the
  table objects' writes by key; ids come from :meth:`LakeStore.next_seq` and a counter.
* **Other processes' writes** arrive through the lake's change feed:
  :meth:`LakeStore.refresh` (called before every search and context read) asks
  the catalog for snapshots made since the last one it saw by other writers and
  announces exactly those rows to the caches — never a reload of the table.
* **Purge** (:meth:`LakeStore.rewrite`) rewrites the data files and expires every
  older snapshot (:func:`.maintenance.erase`), holding the lake's fence
  (:mod:`.fence`) alone; every write transaction holds it shared, so none
  straddles a purge (nor ``compact`` or ``expire``, which hold it alone too).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import random
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import duckdb
import pyarrow as pa

try:
    from duckdb.sqltypes import BIGINT
except ImportError:  # pragma: no cover - DuckDB before 1.4
    from duckdb.typing import BIGINT  # type: ignore[no-redef]

from ...errors import InvalidInput, StoreError, WriteConflict
from ..changes import Change
from ..connection import Params, Store
from ..lean_scan import LAKE_SCAN_MEMORY
from ..migrations import SCHEMA_VERSION
from ..ownership import FORMAT
from ..statements import Statements
from . import extensions, feed, fence, first_open, lake_errors, maintenance, tables, tuning
from .keyed_writes import LakeStatements
from .url import LAKE, LakeUrl, parse_lake_url, sql_literal
from .vector_marks import LakeEventVectors

#: ``events`` as the table objects read it: each row with the model of its vector.
EVENTS_VIEW = (
    f"CREATE OR REPLACE TEMP VIEW events AS SELECT e.* REPLACE (v.model AS embedding_model)"
    f" FROM {LAKE}.main.events e LEFT JOIN (SELECT id, min(model) AS model"
    f" FROM {LAKE}.main.event_vectors GROUP BY id) v ON v.id = e.id"
)
#: Within one call the feed is read once, unless the call runs longer than this (s).
REFRESH_REUSE = 1.0
#: The file in a data path that names the lake writing there.
MARKER = "nbmemory-lake.json"
#: Ids handed out per claim on the ``small_ids`` counter (facts and macros).
SMALL_ID_BLOCK = 64


class LakeStore(Store):
    """A :class:`~nbmemory.store.Store` on a DuckLake catalog and data path."""

    backend = "ducklake"
    catalog_database = LAKE
    vectors_class = LakeEventVectors
    lean_scan_memory = LAKE_SCAN_MEMORY
    #: Every write is a snapshot of the catalog of its own: vectors take the usual path.
    writes_beside = False
    #: Each vector write is a commit of its own (a catalog round trip, and a
    #: conflict window with the other writers): a stream of add_event calls is
    #: embedded and written in batches of up to half a second.
    embed_linger = 0.5

    def __init__(
        self,
        url: str,
        *,
        data_path: str | os.PathLike[str] | None = None,
        read_only: bool = False,
        adopt: bool = False,
        snapshot: int | dt.datetime | None = None,
    ) -> None:
        self.address: LakeUrl = parse_lake_url(url, data_path)
        if snapshot is not None and (
            isinstance(snapshot, bool) or not isinstance(snapshot, (int, dt.datetime))
        ):
            raise InvalidInput(
                f"snapshot= takes a snapshot id (int) or a datetime, not {snapshot!r}"
            )
        #: Read the lake as it was at this snapshot id or time (time travel; read-only).
        self.snapshot = snapshot
        #: Marks this process's commits in the lake's snapshots (and so in its feed).
        self.author = f"nbmemory:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        #: Snapshots of other writers seen so far through the change feed.
        self.foreign_snapshots = 0
        self._seen: int | None = None
        self._tables = feed.TableNames(self.run)
        self._snapshots = feed.Snapshots(
            self.run, self.address.catalog, self.address.metadata_schema
        )
        self._seq_lock = threading.Lock()
        self._seq_last = 0
        self._seq_salt = random.getrandbits(12)
        self._small_ids: list[int] = []
        #: Commits made by each thread (a call is retried only if its thread made none).
        self._commits: dict[int, int] = {}
        self._refreshed_in_call = False
        self._refreshed_at = 0.0
        #: Set by :meth:`_connect` when the lake's catalog does not exist yet.
        self._absent = False
        #: Set once the lake was found or made: a reconnection never makes one.
        self._opened = False
        #: The lake's tables when :meth:`_connect` attached it.
        self._found: set[str] = set()
        #: The lake's fence between a purge and other writers' transactions (:mod:`.fence`).
        self._fence = fence.Fence(self.address, self._cursor)
        super().__init__(self.address.shown, read_only=read_only or snapshot is not None)

    # -- connection ------------------------------------------------------------------
    def _connect(self) -> duckdb.DuckDBPyConnection:
        """A DuckDB with the lake attached; never makes a lake (see :meth:`_open_schema`).

        A writable first open of a lake that does not exist yet returns the
        connection without the lake (:attr:`_absent`); ``_open_schema`` makes it
        under the first-open lock.
        """
        con = extensions.connect()
        try:
            extensions.load(con, self.address.catalog)
            con.create_function("nbm_seq", self.next_seq, [], BIGINT, side_effects=True)
            tuning.apply(con)  # one thread, short commit retries (:mod:`.tuning`)
            try:
                self._attach(con, create=False)
            except duckdb.Error as exc:
                if self.read_only or self._opened or not lake_errors.is_missing(exc):
                    raise
                self._absent = True
                return con
        except duckdb.Error as exc:
            with contextlib.suppress(duckdb.Error):
                con.close()
            raise lake_errors.translate(exc, self.address) or StoreError(str(exc)) from None
        except BaseException:
            with contextlib.suppress(duckdb.Error):
                con.close()
            raise
        self._absent = False
        self._found = self._view_events(con)
        return con

    def _view_events(self, con: duckdb.DuckDBPyConnection | None = None) -> set[str]:
        """The lake's tables; when ``events`` is one, :data:`EVENTS_VIEW` made on ``con``."""
        con = con or self._cursor()
        rows = con.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_catalog = ? AND table_schema = 'main'",
            [LAKE],
        ).fetchall()
        present = {row[0] for row in rows}
        if "events" in present:
            con.execute(EVENTS_VIEW)
        return present

    def _attach(self, con: duckdb.DuckDBPyConnection, *, create: bool) -> None:
        """Attach the lake as ``LAKE`` and use it; ``create``: make its catalog if missing."""
        options = [] if create else ["CREATE_IF_NOT_EXISTS false"]
        if self.address.data_path:
            options.append(f"DATA_PATH {sql_literal(self.address.data_path)}")
        if self.address.metadata_schema:
            options.append(f"METADATA_SCHEMA {sql_literal(self.address.metadata_schema)}")
        if self.read_only:
            options.append("READ_ONLY")
        if isinstance(self.snapshot, dt.datetime):
            options.append(f"SNAPSHOT_TIME {sql_literal(_utc_text(self.snapshot))}")
        elif self.snapshot is not None:
            options.append(f"SNAPSHOT_VERSION {int(self.snapshot)}")
        con.execute(f"ATTACH {sql_literal(self.address.attach)} AS {LAKE} ({', '.join(options)})")
        con.execute(f"USE {LAKE}")

    def _open_schema(self, *, read_only: bool, adopt: bool) -> None:
        """Check the lake is an nbmemory store; a writable open makes what is missing.

        A lake that exists with nbmemory's tables is opened without a lock.  When
        the catalog or the tables are missing, the first-open lock
        (:func:`.first_open.creation_lock`) is taken and the lake looked at again:
        of several processes opening a brand-new lake at once, the first makes it
        and the others find it made.
        """
        present = set() if self._absent else self._found
        if not present and read_only:
            raise StoreError(f"the lake {self.path} holds no nbmemory store yet; nothing to read")
        if not present:
            try:
                with first_open.creation_lock(self.address, self._cursor()) as lock:
                    if lock.made():  # by another process while this one waited
                        lock.release()  # attach as every later open does, unlocked
                        if self._absent:
                            self._attach(self._cursor(), create=False)
                            self._absent = False
                        present = self._view_events()
                    else:
                        made = self._make_under_lock()
                        if made is None:
                            return  # made here, with the lake's id and the data path's marker
                        present = made
            except duckdb.Error as exc:
                raise lake_errors.translate(exc, self.address) or StoreError(str(exc)) from None
        self._opened = True
        if "nbmemory_meta" not in present:
            raise StoreError(
                f"the lake {self.path} belongs to another application (tables: "
                f"{', '.join(sorted(present)[:6])}); nothing was changed. Use another catalog "
                "database or another METADATA schema for nbmemory"
            )
        version = self.catalog.schema_version()
        if self.meta.get("format") != FORMAT or version > SCHEMA_VERSION:
            raise StoreError(
                f"the lake {self.path} was written by a newer nbmemory (schema version "
                f"{version}; this one reads {SCHEMA_VERSION}); nothing was changed. "
                "Upgrade nbmemory (pip install -U nbmemory)"
            )
        if version < SCHEMA_VERSION and not read_only:  # made by an older nbmemory
            with self.transaction():
                for sql, params in tables.upgrade_statements(version):
                    self.run(sql, params)
        if not read_only:
            self._claim_data_path()

    def _make_under_lock(self) -> set[str] | None:
        """Holding the first-open lock: make the catalog and nbmemory's tables if they
        are still missing.  Returns the tables found (None: this process made them).

        The retries below are for creators that take no lock (another tool, an
        nbmemory before the lock): PostgreSQL reports a unique violation only once
        the other creation has committed, so the next attempt finds what it made.
        """
        con = self._cursor()
        for attempt in range(first_open.CREATE_ATTEMPTS):
            if not self._absent:
                break
            try:
                self._attach(con, create=True)
                self._absent = False
            except duckdb.Error as exc:
                if not first_open.is_creation_conflict(exc):
                    raise
                if attempt + 1 == first_open.CREATE_ATTEMPTS:
                    raise StoreError(
                        f"could not make the lake {self.path}: other processes kept making "
                        "it at the same moment without nbmemory's first-open lock; nothing "
                        "was stored: open it again"
                    ) from None
        self._opened = True
        present = self._view_events()
        if present:
            return present  # made by a process that took no lock
        try:
            with self.transaction():
                for sql, params in tables.create_statements(uuid.uuid4().hex):
                    self.run(sql, params)
        except (WriteConflict, duckdb.TransactionException):
            present = self._view_events()  # made at once by a creator that took no lock
            if not present:
                raise
            return present
        self._cursor().execute(EVENTS_VIEW)
        self._claim_data_path()
        return None

    def _claim_data_path(self) -> None:
        """One data path, one lake: a marker file names the lake that writes there.

        Two catalogs sharing a folder would each see the other's Parquet files as
        orphans, and ``compact``/``expire`` of one would delete the other's data.
        """
        root = maintenance.data_path(self)
        lake_id = self.meta.get("lake_id")
        if not root or "://" in root or not lake_id:
            return
        marker = os.path.join(root, MARKER)
        try:
            with open(marker, encoding="utf-8") as file:
                owner = json.load(file).get("lake_id")
        except FileNotFoundError:
            owner = None
        except (OSError, ValueError):
            owner = "unreadable"
        if owner is None:
            try:
                os.makedirs(root, exist_ok=True)
                partial = f"{marker}.{os.getpid()}.part"
                with open(partial, "w", encoding="utf-8") as file:
                    json.dump({"lake_id": lake_id, "catalog": self.path}, file)
                os.replace(partial, marker)
            except OSError as exc:
                raise StoreError(
                    f"the lake's data path {root} cannot be written ({exc.strerror}); make "
                    "it writable"
                ) from None
        elif owner != lake_id:
            raise StoreError(
                f"the data path {root} belongs to another lake (its {MARKER} names lake "
                f"{owner}); nothing was changed. Give each lake its own data path"
            )

    # -- ids ---------------------------------------------------------------------------
    def next_seq(self) -> int:
        """A BIGINT that grows with time in this process: ``events.seq`` and audit ids.

        Microseconds since the epoch, shifted left 12 bits, plus this process's
        random salt; two processes collide only in the same microsecond with the
        same salt (1 in 4096), and then only tie on ordering.
        """
        with self._seq_lock:
            value = max(self._seq_last + 1, (time.time_ns() // 1000 << 12) | self._seq_salt)
            self._seq_last = value
            return value

    def small_id(self) -> int:
        """A new ``facts``/``macros`` id, unique across every writer of the lake.

        Claimed in blocks from the ``small_ids`` counter by a side connection in a
        transaction of its own: two processes claiming at once conflict, and the
        loser claims again.
        """
        with self._lock:
            if not self._small_ids:
                self._small_ids = self._claim("small_ids", SMALL_ID_BLOCK)
            return self._small_ids.pop(0)

    def _claim(self, counter: str, count: int, at_least: int = 0) -> list[int]:
        self._share_fence()  # a transaction of its own: no purge may straddle it (and with
        # turns on it takes a turn, unless it runs inside a transaction that holds one)
        try:
            return self._claim_held(counter, count, at_least)
        finally:
            self._fence.release()

    def _claim_held(self, counter: str, count: int, at_least: int) -> list[int]:
        side = self._cursor().cursor()
        try:
            for attempt in range(50):
                try:
                    side.execute("BEGIN TRANSACTION")
                    side.execute(
                        f"CALL {LAKE}.set_commit_message(?, ?)", [self.author, "nbmemory ids"]
                    )
                    side.execute(
                        f"UPDATE {LAKE}.main.nbmemory_counters SET value = greatest(value, ?) + ?"
                        " WHERE name = ?",
                        [int(at_least), int(count), counter],
                    )
                    end = int(
                        side.execute(
                            f"SELECT value FROM {LAKE}.main.nbmemory_counters WHERE name = ?",
                            [counter],
                        ).fetchall()[0][0]
                    )
                    side.execute("COMMIT")
                    return list(range(end - count + 1, end + 1))
                except duckdb.TransactionException:
                    with contextlib.suppress(duckdb.Error):
                        side.execute("ROLLBACK")
                    time.sleep(0.01 * (attempt + 1) * random.random())
            raise WriteConflict(f"could not claim ids on the lake {self.path}; call again")
        finally:
            side.close()

    def claim(self) -> None:
        """Make concurrent upserts collide: a lake enforces no unique key, and two
        writers inserting the same fact at once would both succeed.  Each upsert
        first updates the one row of ``nbmemory_claims`` in its transaction; of two
        at once, DuckLake commits one and reports the other as a conflict (retried)."""
        self.run("UPDATE nbmemory_claims SET value = value + 1 WHERE name = ?", ["upserts"])

    def advance_ids(self, sequence: str, at_least: int) -> None:
        """Later ids of facts/macros stay above ``at_least`` (after an import with ids)."""
        self._claim("small_ids", 0, at_least)
        self._small_ids = [i for i in self._small_ids if i > at_least]

    def stream(
        self, sql: str, params: Params, rows: int, *, lean: bool | str = False
    ) -> Iterator[pa.RecordBatch]:
        """As :meth:`Store.stream`; a lean scan (into the vector index) on every thread."""
        with (
            self._guard(),
            (
                tuning.every_thread(self._cursor, lambda: self.con is not None)
                if lean
                else contextlib.nullcontext()
            ),
        ):
            yield from super().stream(sql, params, rows, lean=lean)

    # -- statements and transactions ------------------------------------------------------
    def _statements(self) -> Statements:
        """Writes by key, ids from the lake's counters (:mod:`.keyed_writes`)."""
        return LakeStatements(self.run, self.registered, LAKE, self.small_id, self.next_seq)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Change]:
        """A write transaction, holding the lake's fence shared from before its first
        statement until it has committed: no purge runs meanwhile; with turns on
        (``NBMEMORY_LAKE_TURNS=1``), and unless it adds more than
        :data:`.fence.TURN_ROWS` events, the lake's turn to write too (:mod:`.fence`)."""
        with self._lock:
            if self.in_transaction:
                with super().transaction() as joined:
                    yield joined
                return
            self._share_fence(turn=getattr(self._appending, "rows", 0) <= fence.TURN_ROWS)
            try:
                with self._labelled_transaction() as change:
                    yield change
            finally:
                self._fence.release()

    def _share_fence(self, *, turn: bool = True) -> None:
        try:
            self._fence.share(turn=turn)
        except duckdb.Error as exc:
            raise lake_errors.translate(exc, self.address, runtime=True) or StoreError(
                f"the lake {self.path} could not take its fence ({str(exc).splitlines()[0][:120]})"
                "; nothing of this call was stored: call again"
            ) from None

    @contextlib.contextmanager
    def _labelled_transaction(self) -> Iterator[Change]:
        with super().transaction() as change:
            if self._pending is change and not getattr(self, "_labelled", False):
                self._labelled = True
                try:
                    self._cursor().execute(
                        f"CALL {LAKE}.set_commit_message(?, ?)",
                        [self.author, f"nbmemory {self.actor}"],
                    )
                except duckdb.Error as exc:
                    self._failed(exc)
                    raise
            yield change

    def _end_transaction(self, verb: str) -> Change:
        self._labelled = False
        try:
            pending = super()._end_transaction(verb)
        except duckdb.TransactionException as exc:
            if "conflict" in str(exc).lower():
                raise WriteConflict(
                    f"another writer changed the same table of the lake {self.path} at once;"
                    " nothing of this call was stored: call again"
                ) from None
            raise
        if verb == "COMMIT":
            thread = threading.get_ident()
            self._commits[thread] = self._commits.get(thread, 0) + 1
        return pending

    def _failed(self, exc: duckdb.Error) -> None:
        """The catalog unreachable, a login refused, the data path unusable: one line.

        The connection is kept: DuckLake reconnects to the catalog by itself once
        it is back, and nothing of the failed call was committed.
        """
        translated = lake_errors.translate(exc, self.address, runtime=True)
        if translated is not None:
            raise translated from None
        super()._failed(exc)

    def check_rewritable(self, *, expire_snapshots: bool = False) -> None:
        """Purge on a lake expires every snapshot before now: only when asked to."""
        if not expire_snapshots:
            raise InvalidInput(
                "expire_snapshots: purge on a lake erases deleted text by rewriting its "
                "files and expiring every snapshot before now, which ends time travel to "
                "any earlier moment; pass expire_snapshots=True to do so (nbmemory memory "
                "purge --expire-snapshots); nothing was changed"
            )

    def stored_bytes(self) -> int:
        """Bytes of the lake's files (what purge reports before and after)."""
        return maintenance.stored_bytes(self)

    def rewrite(self, *, expire_snapshots: bool = False) -> dict[str, int]:
        """Erase deleted rows from the lake's files and catalog (:func:`.maintenance.erase`),
        holding the fence alone; returns what was flushed, rewritten, expired, deleted."""
        self.check_rewritable(expire_snapshots=expire_snapshots)
        if self.read_only:
            raise StoreError(f"the lake {self.path} is open read-only; nothing was purged")
        done = maintenance.erase(self)
        self.mark_stale()
        return done

    @contextlib.contextmanager
    def exclusively(self) -> Iterator[None]:
        """Hold the lake alone against every writer's transaction while the block runs
        (purge, compact, expire: :mod:`.fence`)."""
        with self._lock:
            if self.in_transaction:
                raise StoreError("internal: a lake cannot be maintained inside a transaction")
            try:
                self._fence.take_exclusive()
            except duckdb.Error as exc:
                raise lake_errors.translate(exc, self.address, runtime=True) or StoreError(
                    f"the lake {self.path} could not take its fence "
                    f"({str(exc).splitlines()[0][:120]}); nothing was changed: call again"
                ) from None
            try:
                yield
            finally:
                self._fence.release()

    # -- the change feed ----------------------------------------------------------------
    def current_snapshot(self) -> int:
        return int(self.run(f"SELECT id FROM {LAKE}.current_snapshot()")[0][0])

    def refresh(self) -> None:
        """Bring the caches up to date with what other writers committed since last time.

        One catalog round trip when nothing changed; otherwise the rows of the
        snapshots other writers made, read from ``ducklake_table_changes``.
        """
        if self.closed or self.in_transaction or self.snapshot is not None:
            return
        if self._refreshed_in_call and time.monotonic() - self._refreshed_at < REFRESH_REUSE:
            return  # checked already in this call (a search reads two indexes)
        with self._lock:
            now = self.current_snapshot()
            self._refreshed_in_call, self._refreshed_at = True, time.monotonic()
            if self._seen is None or now <= self._seen:
                self._seen = now if self._seen is None else max(self._seen, now)
                return
            first = self._seen + 1
            snapshots = self._snapshots.foreign(first, now, self.author)
            foreign = {r[0] for r in snapshots}
            self._seen = now
            if foreign:
                self.foreign_snapshots += len(foreign)
                try:
                    tables = feed.touched((r[1] for r in snapshots), self._tables)
                    change = feed.changes(self.run, first, now, foreign, tables)
                except duckdb.Error:  # snapshots expired meanwhile: read everything again
                    change = Change(unknown=True)
                self._announce(change)

    # -- maintenance -------------------------------------------------------------------
    lake_name = LAKE

    def fetch_lake(self, sql: str, params: Params = None, fetch: str = "rows") -> Any:
        """Run one of the lake's own functions (snapshots, compaction) and fetch it whole."""
        return self.run(sql, params, fetch)

    def commit_lake(self, sql: str, params: Params, message: str) -> list[tuple]:
        """Run one of the lake's maintenance calls as a commit of its own, its snapshot
        labelled with this process and ``message`` (``nbmemory lake snapshots``)."""
        with self._lock:
            con = self._cursor()
            try:
                con.execute("BEGIN TRANSACTION")
                con.execute(f"CALL {LAKE}.set_commit_message(?, ?)", [self.author, message])
                rows = con.execute(sql, params or []).fetchall()
                con.execute("COMMIT")
            except duckdb.Error as exc:
                with contextlib.suppress(duckdb.Error):
                    con.execute("ROLLBACK")
                self._failed(exc)
                raise
            return rows

    # -- calls -------------------------------------------------------------------------
    def begin_call(self) -> int:
        """A ``Memory`` call starts: its first read checks the feed again.  Returns the
        commits made so far (``Memory`` retries a call that conflicted before any)."""
        self._refreshed_in_call = False
        return self._commits.get(threading.get_ident(), 0)


def _utc_text(moment: dt.datetime) -> str:
    """A time as DuckLake's ``SNAPSHOT_TIME`` reads it (naive times are local)."""
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f+00")
