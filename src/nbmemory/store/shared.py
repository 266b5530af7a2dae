"""Shared mode: several processes (kernels) using one store file, taking turns.

DuckDB lets one process open a file read-write, and then refuses every other
process, even read-only.  The default ``Memory(path)`` keeps its connection for
its whole life (fast; a second kernel gets :class:`~nbmemory.errors.StoreLocked`
naming the holder's PID).  ``Memory(path, shared=True)`` instead holds the file
only while a store operation runs:

* every store operation takes a *lease*: an exclusive lock on a sidecar file
  (``<store>.nbmemory-lock``), then opens the DuckDB file, runs, closes it (DuckDB
  checkpoints on close) and releases the sidecar lock.  Other shared processes
  wait their turn (up to ``lock_timeout`` seconds), granted in the order they
  asked (:mod:`.turns`); a non-shared holder makes them retry until the timeout,
  then they get the same one-line :class:`StoreLocked`.  One call of the API is
  one lease: its rows, audit row and session touch commit together or not at all.
* threads of one process share the open connection of the current lease (a
  reference count), so the embedding worker and the caller don't reopen twice.
* what a process keeps in memory is checked against the file at each lease and
  at every working-memory read (:meth:`SharedStore.refresh`): when the file
  changed since this process last closed it (another process wrote), the store
  announces an unknown change, so the in-memory indexes rebuild and the
  per-session working memory is dropped.
* ``add_event`` takes no turn: it appends its row to this process's journal
  (fsync'd) and returns; the next turn of any process on the file writes every
  journal's rows in one transaction first (group commit, :mod:`.journal`), so a
  read sees every event whose ``add_event`` returned, and ``close()`` and
  ``flush()`` write what is left.  An ``add_event`` writes the journal itself
  once it holds 64 rows or its oldest is 0.25 s old, and a thread writes it
  0.25 s after the last one (its caches hear of it at the next call).

Costs, measured on this machine (2 cores, duckdb 2.0): every turn opens and
closes the file, ~15-20 ms; ``add_event`` costs an fsync'd append (well under a
ms) plus its share of a turn every 64 rows (``benchmarks/bench_shared_rate.py``:
hundreds per second per writer with two writers and a reader); a search after
another process wrote rebuilds the in-memory index from the table.  Use it for
a few kernels sharing a project's memory, not for bulk loads (use the default
mode, or ``add_events`` which is one turn per call).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import duckdb

from ..errors import StoreError, StoreLocked
from . import journal, openers, swap
from .changes import Change
from .connection import Store
from .files import check_store_path
from .turns import FairLock, Timeout, default_lock_timeout

log = logging.getLogger(__name__)

#: Environment variable: ``1`` makes ``Memory(path)`` shared unless ``shared=`` is given.
ENV_SHARED = "NBMEMORY_SHARED"


def shared_from_env() -> bool:
    """``$NBMEMORY_SHARED`` as a bool (unset or empty: False), so magics and the CLI can share."""
    raw = os.environ.get(ENV_SHARED, "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise StoreError(f"{ENV_SHARED}={raw!r} must be 1 or 0 (true/false)")


Stamp = tuple[Any, ...]


def _file_stamp(path: str) -> Stamp:
    """What changes when another process writes the store: size and mtime of file and WAL."""
    parts: list[Any] = []
    for name in (path, path + ".wal"):
        try:
            st = os.stat(name)
        except FileNotFoundError:
            parts.append(None)
        else:
            parts.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(parts)


def _inode(stamp: Stamp | None) -> int | None:
    """The store file's inode in ``stamp``: another when the file was replaced (purge)."""
    return stamp[0][0] if stamp and stamp[0] else None


class _Lease:
    """Process-wide reference count on the open connection of a shared store."""

    def __init__(self, store: SharedStore) -> None:
        self.store = store
        self.count = 0
        self._cond = threading.Condition(threading.Lock())

    def enter(self) -> bool:
        """Take a reference; whether this opened the file (the first one)."""
        with self._cond:
            opened = self.count == 0
            if opened:
                self.store._open_for_lease()
            self.count += 1
            return opened

    def __exit__(self, *exc: Any) -> None:
        with self._cond:
            self.count -= 1
            if self.count == 0:
                self.store._close_after_lease()


class _LeaseLock:
    """The store's ``_lock`` in shared mode: the usual RLock that also holds a lease.

    Transactions and callers taking ``store._lock`` for a multi-statement operation
    then keep the file open for all of it.  A caller's thread taking it (not from
    inside its own hold) first writes the rows pending in the journals
    (:mod:`.journal`), whether it opened the file or joined a lease the embedding
    worker opened: what it reads then holds every event whose ``add_event`` returned.
    """

    def __init__(self, lease: _Lease) -> None:
        self._rlock = threading.RLock()
        self._lease = lease
        self._depth = threading.local()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not self._rlock.acquire(blocking, timeout):
            return False
        try:
            self._lease.enter()
        except BaseException:
            self._rlock.release()
            raise
        depth = self._depth.n = getattr(self._depth, "n", 0) + 1
        if depth == 1:
            try:
                self._lease.store._catch_up()
                self._lease.store._drain()
            except BaseException:
                self.release()
                raise
        return True

    def release(self) -> None:
        self._depth.n -= 1
        try:
            self._lease.__exit__(None, None, None)
        finally:
            self._rlock.release()

    def held_here(self) -> bool:
        """Whether the current thread holds the lock (its outermost taking drained)."""
        return getattr(self._depth, "n", 0) > 0

    @property
    def turnless(self) -> Any:
        """The lock every taking of this one takes first, alone: held, no other thread of
        the store can take a lease (open the file) until it is released."""
        return self._rlock

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _caller_thread() -> bool:
    """Whether this thread is a caller's, not one of nbmemory's (all named ``nbmemory-``)."""
    return not threading.current_thread().name.startswith("nbmemory-")


class SharedStore(Store):
    """A :class:`Store` that holds the DuckDB file only while an operation runs."""

    #: The file is let go between operations: no cursor can be kept beside the caller's.
    writes_beside = False
    holds_file = False

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        read_only: bool = False,
        lock_timeout: float | None = None,
        adopt: bool = False,
    ) -> None:
        path = str(path)
        if path == ":memory:":
            raise StoreError("shared=True needs a store file; ':memory:' is private to a process")
        self.path = path  # named by StoreLocked if the first turn times out
        self.lock_timeout = default_lock_timeout() if lock_timeout is None else float(lock_timeout)
        #: Bumped whenever another process is seen to have changed the file.
        self.external_changes = 0
        self._stamp: Stamp | None = None
        self._stamp_lock = threading.Lock()
        self._sidecar = FairLock(path + ".nbmemory-lock")
        #: This process's journal (created by :meth:`journal_for`) and who writes it out.
        self.journal: journal.Journal | None = None
        self._journal_folder = journal.folder_of(path)
        self._journal_lock = threading.Lock()
        self._writer: Any = None
        self._draining = threading.local()
        #: The idle writer (:meth:`_write_when_idle`) and the changes it left untold.
        self._idle_writer: threading.Thread | None = None
        self._stop_idle = threading.Event()
        self._deferring = threading.local()
        #: ``.on`` while a thread takes the file's turn only if it is free at once.
        self._at_once = threading.local()
        self._deferred: list[Change] = []
        self._lease = _Lease(self)
        self._is_closed = False
        check_store_path(path, read_only=read_only)  # before creating the sidecar beside it
        self.read_only = read_only
        # one of the file's openers first: beside a process that opened the file without
        # shared=True this is refused at once, before waiting for a turn it cannot get
        self._leave_openers = openers.join(self)
        sidecar_existed = os.path.exists(self._sidecar.lock_file)
        tickets_existed = os.path.exists(self._sidecar.folder)
        self._take_sidecar()
        try:
            self._lease.count = 1  # the connection Store.__init__ opens is this first lease
            super().__init__(path, read_only=read_only, adopt=adopt)  # connects, migrates
            self._lease.count = 0
            self._close_after_lease(release_sidecar=False)
        except BaseException:
            con, self.con = getattr(self, "con", None), None
            if con is not None:  # opened, then failed (a migration): let go of the file
                with contextlib.suppress(duckdb.Error):
                    con.close()
            self._sidecar.release()
            self._leave_openers()
            if not sidecar_existed:  # leave nothing behind beside a file we refused
                with contextlib.suppress(OSError):
                    os.remove(self._sidecar.lock_file)
            if not tickets_existed:
                with contextlib.suppress(OSError):
                    os.rmdir(self._sidecar.folder)
            raise
        self._sidecar.release()
        self._lock = _LeaseLock(self._lease)

    # -- the lease -----------------------------------------------------------------------
    def _wait_limit(self) -> float:
        """How long this thread waits for the file: the lock timeout, or not at all."""
        return 0.0 if getattr(self._at_once, "on", False) else self.lock_timeout

    def _take_sidecar(self) -> None:
        try:
            self._sidecar.acquire(timeout=self._wait_limit())
        except Timeout:
            raise StoreLocked(self.path, waited=self.lock_timeout) from None
        except OSError as exc:
            raise StoreError(
                f"cannot create the lock file {self._sidecar.lock_file} beside the store "
                f"({exc.strerror}); shared=True needs a writable directory"
            ) from None

    def _open_for_lease(self) -> None:
        if self._is_closed:
            raise StoreError("this store is closed; open a new Memory(path)")
        self._take_sidecar()
        try:
            self.note_external_change()
            deadline = time.monotonic() + self._wait_limit()
            delay = 0.005
            while True:
                try:
                    self.con = self._connect()
                    self._show_journals()  # a reader: what no turn wrote in yet
                    return
                except StoreLocked:  # a non-shared process holds the file: wait, then give up
                    if time.monotonic() + delay > deadline:
                        raise
                    time.sleep(delay * (0.5 + random.random()))  # jitter, not synchronisation
                    delay = min(delay * 2, 0.2)
        except BaseException:
            self._sidecar.release()
            raise

    def _close_after_lease(self, release_sidecar: bool = True) -> None:
        try:
            con, self.con = self.con, None
            if con is not None:
                con.close()
            with self._stamp_lock:
                self._stamp = _file_stamp(self.path)
        finally:
            if release_sidecar:
                self._sidecar.release()

    def note_external_change(self) -> bool:
        """True (and caches marked stale) when the file changed since this process closed it."""
        now = _file_stamp(self.path)
        with self._stamp_lock:
            before = self._stamp
            changed = before is not None and now != before
            if changed:
                self._stamp = now
                self.external_changes += 1
        if changed and _inode(before) != _inode(now) and not self._is_closed:
            # another process rewrote the file (purge): the descriptor this process keeps
            # is of the old file, whose bytes stay on the disk while it is open
            self.hold_file_again()
        if changed:  # caches rebuild on their next use; announced directly: this runs
            self._announce(Change(unknown=True))  # inside the lease's open, not under it
        return changed

    def written_elsewhere(self) -> bool:
        """Whether another process wrote the file while this store had it open, or since
        its last turn (True too when that cannot be told)."""
        with self._stamp_lock:
            return self.external_changes > 0 or _file_stamp(self.path) != self._stamp

    def turn(self) -> contextlib.AbstractContextManager[Any]:
        """One turn on the file for a whole call: its statements wait in the queue once."""
        return self._lock

    def held_still(self, deadline: float, *, turn: bool) -> contextlib.AbstractContextManager[Any]:
        """Keep this store off the file while another store of the process rewrites it.

        It has the file open only during a lease.  With ``turn`` (the rewriting store is
        shared and holds the file's turn) it cannot have one: turns exclude each other,
        between the stores of one process too, so there is nothing to hold (holding its
        lock could wait forever for a thread of it that waits for that turn).  Otherwise
        its lock is held without a lease, so none of its threads opens the file meanwhile.
        """
        lock = self._lock
        if turn:
            return contextlib.nullcontext()
        if not isinstance(lock, _LeaseLock):  # still opening
            return super().held_still(deadline, turn=turn)
        return swap.held(self.path, deadline, lock.turnless)

    def refresh(self) -> None:
        """Notice whether another process wrote the file since this one last held it,
        after writing the rows pending in the journals (a read sees every event whose
        ``add_event`` returned)."""
        lock = self._lock
        if (
            isinstance(lock, _LeaseLock)
            and not lock.held_here()  # else its taking drained already
            and self._writer is not None
            and _caller_thread()
            and (self._deferred or journal.any_pending(self._journal_folder, self.journal))
        ):
            with lock:  # taking it drains
                pass
        self.note_external_change()

    # -- the journal (group commit) -------------------------------------------------------
    def journal_for(self, writer: Any) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
        """Where ``add_event`` puts its row: this process's journal (:mod:`.journal`),
        written to the file at the next turn; ``writer`` writes the journalled rows."""
        if self.read_only or not journal.SUPPORTED:
            return None
        with self._journal_lock:
            self._writer = writer
            if self.journal is None:
                journal.sweep(self._journal_folder)
                self.journal = journal.Journal(self.path)
                self._idle_writer = threading.Thread(
                    target=self._write_when_idle, name="nbmemory-journal", daemon=True
                )
                self._idle_writer.start()
        if journal.any_pending(self._journal_folder, None):  # left by a killed process
            with self._lock:
                self._drain(force=True)
        return self._journal_add

    def _journal_add(self, row: dict[str, Any]) -> dict[str, Any]:
        """Append one built row (redacted first) to the journal; returns the stored record."""
        if self._is_closed:
            raise StoreError("this store is closed; open a new Memory(path)")
        redactor, count = self.redactor, 0
        if redactor is not None:
            row = dict(row)
            for name in self.events.table.user_text:
                value = row.get(name)
                if isinstance(value, str):
                    row[name], found = redactor(value)
                    count += found
        assert self.journal is not None
        if self.journal.append(row, count):  # due: written now if the turn is free
            self._write_out_at_once()
        return row

    def _write_out_at_once(self) -> None:
        """Write the journals if the file's turn is free now; else leave them to a later
        turn (the next call's, or the idle writer's).  The rows are stored already (the
        journal): an ``add_event`` waited up to twice the lock timeout while another
        process held a long turn (a purge, an import), for nothing it needed."""
        self._at_once.on = True
        try:
            if self._lock.acquire(blocking=False):
                try:
                    self._drain(force=True)
                finally:
                    self._lock.release()
        except Exception:  # busy, or failed: raising would invite a retry of a stored row
            log.info("nbmemory: the journal waits for a later turn", exc_info=True)
        finally:
            self._at_once.on = False

    def _drain(self, *, force: bool = False) -> None:
        """Write the rows pending in every journal, in one transaction (under a lease).

        Only a caller's thread drains, not nbmemory's own background threads (the
        embedding worker, consolidation, prefetch): the commit announces the rows to
        the caches, whose locks a background thread must not wait for while the
        caller's thread, holding one of them, waits for the file.
        """
        if (
            not (force or _caller_thread())
            or self._writer is None
            or self.read_only
            or self.in_transaction
            or getattr(self._draining, "on", False)
            or not journal.any_pending(self._journal_folder, self.journal)
        ):
            return
        self._draining.on = True
        try:
            journal.drain(
                self._journal_folder,
                self.journal,
                lambda entries: journal.write_rows(self, self._writer, entries),
            )
        finally:
            self._draining.on = False

    def _write_when_idle(self) -> None:
        """Write this process's journal out once no ``add_event`` came for a while (a
        kernel that stops writing leaves nothing waiting).  What the commit changed
        is told to the caches at this process's next call (:meth:`_catch_up`), on the
        caller's thread: this thread must not wait for a cache's lock."""
        own = self.journal
        assert own is not None
        while not self._stop_idle.wait(journal.LINGER):
            if not own.idle_rows():
                continue
            self._deferring.on = True
            try:
                with self._lock:
                    self._drain(force=True)
            except Exception:  # the rows stay in the journal: a later turn writes them
                log.info("nbmemory: the journal waits for a later turn", exc_info=True)
            finally:
                self._deferring.on = False

    def _announce(self, change: Change) -> None:
        if getattr(self._deferring, "on", False):
            with self._stamp_lock:
                self._deferred.append(change)
            return
        super()._announce(change)

    def _catch_up(self) -> None:
        """Tell the caches what the idle writer committed (on a caller's thread)."""
        if not self._deferred or not _caller_thread():
            return
        with self._stamp_lock:
            changes, self._deferred = self._deferred, []
        for change in changes:
            super()._announce(change)

    def close(self) -> None:
        """Write what the journals hold, then close for good (idempotent): later
        operations raise StoreError."""
        own = self.journal
        self._stop_idle.set()
        if self._idle_writer is not None and self._idle_writer is not threading.current_thread():
            self._idle_writer.join(timeout=self.lock_timeout + 5)
        if own is not None and not self._is_closed:
            try:
                with self._lock:
                    self._drain(force=True)
            except Exception:  # kept in the journal: the next turn of any process writes it
                log.warning("nbmemory: writing the journal at close failed", exc_info=True)
            own.close()
        with self._lease._cond:
            self._is_closed = True
            if self.con is not None and self._lease.count == 0:
                self._close_after_lease()
        self._leave_openers()

    @property
    def closed(self) -> bool:
        return self._is_closed

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        if self._lease.count == 0:
            raise StoreError("internal: a shared store was used outside a lease")
        return super()._cursor()
