"""The lake's fence: a purge runs between other writers' transactions, never during one.

``purge`` on a lake flushes the rows inlined in the catalog into Parquet,
rewrites every data file that holds deleted rows, and expires every older
snapshot (:func:`.maintenance.erase`).  Measured on DuckDB 1.5.5's ducklake
extension, none of the three is safe beside another writer's open transaction:

* a small delete (up to ten rows of a file) is recorded as *inlined* deletions
  of that file, and DuckLake's commit check does not compare those with a
  rewrite: a delete whose transaction began before the rewrite committed and
  commits after it is silently lost (the row is back), and an update leaves the
  old row beside the new one;
* a commit checks conflicts against the changes recorded for the snapshots made
  since its transaction began, and expiring snapshots deletes those records: a
  transaction older than the expired snapshots sees nothing to conflict with;
* the flush conflicts with every append to the same table, so under a steady
  stream of ``add_event`` calls it never commits (30 of 30 tries failed while one
  process added events in a loop).

So every write transaction on a lake holds this fence **shared**, from before
its first statement (its snapshot is taken after it) until it has committed,
and a purge holds it **exclusively** from before its flush until its cleanup is
done.  Writers do not hold each other up; a purge waits for the transactions in
flight, and the writers that begin meanwhile wait for the purge (up to
:data:`FENCE_TIMEOUT` seconds, then a one-line :class:`~nbmemory.errors.StoreError`
says nothing was stored).  Reads take no fence.

It is a PostgreSQL advisory lock, transaction-level (``pg_advisory_xact_lock``),
taken in a DuckDB transaction of its own on a cursor beside the lake's, through
the catalog database attached as :data:`SIDE` (DuckDB's postgres extension pins
one PostgreSQL connection to a DuckDB transaction; see :mod:`.first_open`);
PostgreSQL lets it go if the process dies.  A writer *tries* the shared lock
(one round trip when no purge is running or waiting: PostgreSQL refuses it while
an exclusive request waits, so a purge is never starved) and tries again after
a short pause; the purge waits for its exclusive lock in PostgreSQL's queue.
Catalogs other than PostgreSQL have no fence (only PostgreSQL is tested as a
lake's catalog).

**Writers may take turns** (``NBMEMORY_LAKE_TURNS=1``; off by default).  DuckLake
commits optimistically: of two commits racing for the next snapshot, the loser's
insert into ``ducklake_snapshot`` fails, and it checks for conflicts and tries
again (``ducklake_retry_wait_ms``, in :mod:`.tuning`).  With many small commits
at once most tries lose: 4 writer processes x 2,000 ``add_event`` lost 20,807
races in one CI run, each costing a commit's CPU in the writer, a failed
transaction in PostgreSQL and an error in its log.  With turns on, a write
transaction that takes the fence (the outermost one) also waits for the lake's
*turn*, a second advisory lock, exclusive, in PostgreSQL's queue on the same
holder, before its snapshot is taken: the writers commit one after the other and
lose no race.  Waiting costs no CPU, and a writer that dies lets its turn go with
its connection.  A writer that stops without dying (a host asleep mid-transaction)
must not stop the team: after :data:`TURN_TIMEOUT` s a writer commits without a
turn, as DuckLake allows, and its process does so for :data:`TURN_PAUSE` s before
queueing again.  A transaction that adds more than :data:`TURN_ROWS` events takes
no turn: DuckLake writes those rows to a Parquet file rather than into the
catalog, which takes long enough that writers overlapping it beat writers
waiting for it, and a lost race redoes only the commit, not the file.

Why off by default (``docs/lake.md``, "Writers may take turns", has the
figures): turns saved a third of the writers' CPU per ``add_event``, but where
the writers share a busy machine the one holding the turn runs on a slice of a
core while the others wait, so the lake took fewer events per second; in CI the
4 x 2,000 test took 774 s with turns against 585 s racing.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
import zlib
from collections.abc import Callable

import duckdb

from ...errors import StoreError
from .url import LakeUrl, sql_literal

#: The first key of the fence's advisory lock ("nbmf"; the first-open lock is "nbml").
FENCE_CLASS = 0x6E626D66
#: The first key of the lock whose holder has the lake's turn to write ("nbmt").
TURN_CLASS = 0x6E626D74
#: How long a writer waits for a running purge, and a purge for the writers in flight (s).
FENCE_TIMEOUT = 60
#: How long a writer waits for its turn before it commits without one (s).
TURN_TIMEOUT = 5.0
#: After a wait for a turn that timed out, how long this process writes without turns (s).
TURN_PAUSE = 60.0
#: The most events a transaction may add and still take a turn: DuckLake's default
#: ``data_inlining_row_limit`` (larger inserts are written to Parquet files).
TURN_ROWS = 10
#: The environment variable that turns the turns on (``1``).
ENV_TURNS = "NBMEMORY_LAKE_TURNS"
#: The longest pause between two tries of a writer waiting for a purge (s).
RETRY_PAUSE = 0.1
#: The name the catalog database is attached under, beside the lake.
SIDE = "nbmemory_fence"
_PG_PREFIX = "ducklake:postgres:"


def fence_key(address: LakeUrl, classid: int = FENCE_CLASS) -> tuple[int, int]:
    """The fence's advisory lock (or the turn's, ``classid``): the lock's class, the
    lake's metadata schema."""
    objid = zlib.crc32((address.metadata_schema or "").encode())
    return classid, objid - (1 << 32) if objid >= 1 << 31 else objid


def turns_wanted() -> bool:
    """Whether writers take turns (:data:`ENV_TURNS` is ``1``; off by default)."""
    return os.environ.get(ENV_TURNS, "0").strip().lower() in {"1", "true", "yes", "on"}


class Fence:
    """One process's hold on a lake's fence (see the module's docstring).

    ``cursor`` gives the DuckDB connection the lake is attached to (a new one
    after a reconnection).  Shared holds nest: a side transaction that claims ids
    while the caller's transaction holds the fence shares that hold.  The store
    calls it under its own lock, one thread at a time.
    """

    def __init__(self, address: LakeUrl, cursor: Callable[[], duckdb.DuckDBPyConnection]) -> None:
        self.address = address
        self._parent = cursor
        self._attached_to: int | None = None
        self._holder: duckdb.DuckDBPyConnection | None = None
        self._depth = 0
        #: "shared" or "exclusive" while held, else None.
        self.mode: str | None = None
        #: Until when (``time.monotonic``) this process writes without turns.
        self._no_turns_until = 0.0

    @property
    def applies(self) -> bool:
        """Whether the lake's catalog is PostgreSQL (other catalogs have no fence)."""
        return self.address.attach.startswith(_PG_PREFIX)

    def _begin(self) -> duckdb.DuckDBPyConnection:
        """A cursor in a transaction of its own, on the lake's DuckDB with the catalog
        database attached as :data:`SIDE`."""
        con = self._parent()
        if self._attached_to != id(con):
            con.execute(
                f"ATTACH IF NOT EXISTS {sql_literal(self.address.attach[len(_PG_PREFIX) :])}"
                f" AS {SIDE} (TYPE postgres)"
            )
            self._attached_to = id(con)
        holder = con.cursor()
        try:
            holder.execute("BEGIN TRANSACTION")
        except BaseException:
            _end(holder)
            raise
        return holder

    def _begin_or_forget(self) -> duckdb.DuckDBPyConnection:
        try:
            return self._begin()
        except duckdb.Error:
            self._forget_side()
            raise

    def _forget_side(self) -> None:
        """After an error from the catalog: attach it again next time (a PostgreSQL
        that was restarted is reached through new connections)."""
        con, self._attached_to = self._parent(), None
        with contextlib.suppress(duckdb.Error):
            con.execute(f"DETACH DATABASE IF EXISTS {SIDE}")

    def _ask(self, holder: duckdb.DuckDBPyConnection, function: str) -> str:
        classid, objid = fence_key(self.address)
        [[answer]] = holder.execute(
            "SELECT * FROM postgres_query(?, ?)",
            [SIDE, f"SELECT {function}({classid}, {objid})::text"],
        ).fetchall()
        return str(answer)

    def share(self, *, turn: bool = False) -> None:
        """Hold the fence shared until :meth:`release` (a write transaction is about to
        begin); waits while a purge runs or waits, up to :data:`FENCE_TIMEOUT` s.

        ``turn``: also wait for the lake's turn to write (the module's docstring), when
        this is the outermost hold.
        """
        if not self.applies:
            return
        if self._depth:
            self._depth += 1
            return
        holder = self._begin_or_forget()
        try:
            deadline = time.monotonic() + FENCE_TIMEOUT
            pause = 0.005
            while self._ask(holder, "pg_try_advisory_xact_lock_shared") != "true":
                if time.monotonic() > deadline:
                    raise StoreError(
                        f"a purge of the lake {self.address.shown} has been running for over "
                        f"{FENCE_TIMEOUT} s; nothing of this call was stored: call again once "
                        "it is done"
                    )
                time.sleep(random.uniform(pause / 2, pause))  # a purge runs: wait for it
                pause = min(RETRY_PAUSE, pause * 2)
        except duckdb.Error:
            _end(holder)
            self._forget_side()
            raise
        except BaseException:
            _end(holder)
            raise
        self._holder, self._depth, self.mode = holder, 1, "shared"
        if turn and turns_wanted() and time.monotonic() >= self._no_turns_until:
            self._wait_for_turn(holder)

    def _wait_for_turn(self, holder: duckdb.DuckDBPyConnection) -> None:
        """Take the turn's lock on the fence's holder, waiting in PostgreSQL's queue up
        to :data:`TURN_TIMEOUT` s; past that, hold the fence again without a turn."""
        classid, objid = fence_key(self.address, TURN_CLASS)
        try:
            holder.execute(
                "SELECT * FROM postgres_query(?, ?)",
                [
                    SIDE,
                    f"SELECT set_config('lock_timeout', '{int(TURN_TIMEOUT * 1000)}ms', true),"
                    f" pg_advisory_xact_lock({classid}, {objid})::text",
                ],
            ).fetchall()
        except duckdb.Error as exc:
            # The holder's transaction is aborted, and the fence's lock went with it.
            self.release()
            if "lock timeout" not in str(exc).lower():
                self._forget_side()
                raise
            self._no_turns_until = time.monotonic() + TURN_PAUSE
            self.share()

    def take_exclusive(self) -> None:
        """Hold the fence alone until :meth:`release` (a purge): waits in PostgreSQL's
        queue for the write transactions in flight, up to :data:`FENCE_TIMEOUT` s."""
        if not self.applies:
            return
        if self._depth:
            raise StoreError("internal: a lake cannot be maintained inside a transaction")
        holder = self._begin_or_forget()
        try:
            holder.execute(
                "CALL postgres_execute(?, ?)",
                [SIDE, f"SET LOCAL lock_timeout = '{FENCE_TIMEOUT}s'"],
            )
            self._ask(holder, "pg_advisory_xact_lock")
        except duckdb.Error as exc:
            _end(holder)
            self._forget_side()
            if "lock timeout" in str(exc).lower():
                raise StoreError(
                    f"other writers of the lake {self.address.shown} kept a transaction open "
                    f"for over {FENCE_TIMEOUT} s; nothing was changed: call again"
                ) from None
            raise
        except BaseException:
            _end(holder)
            raise
        self._holder, self._depth, self.mode = holder, 1, "exclusive"

    def release(self) -> None:
        """Let one hold go; the lock itself goes with the last."""
        if self._depth == 0:
            return
        self._depth -= 1
        if self._depth == 0:
            holder, self._holder, self.mode = self._holder, None, None
            if holder is not None:
                _end(holder)


def _end(holder: duckdb.DuckDBPyConnection) -> None:
    """End the holder's transaction (which lets the lock go) and close it."""
    with contextlib.suppress(duckdb.Error):
        holder.execute("ROLLBACK")
    with contextlib.suppress(duckdb.Error):
        holder.close()
