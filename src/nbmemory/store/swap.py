"""Rewriting a store file in place (``purge``) while other stores of this process have
it open: every one of them lets go of the old file and opens the new one.

DuckDB gives every connection a process opens on one file the same database: one
instance, which keeps the file open until its last connection closes.  A rewrite
copies the live rows into a new file and puts it in place of the old one.  Until
2026-12-07 the purging store closed only its own connection for that: with another
``Memory`` of the file open in the process, the database stayed up on the old file,
the purging store's new connection joined it again, and every write after the purge,
by either object, went to the old file (by then without a name) and to a write-ahead
log the next open did not replay.  Each call returned and every read in the process
saw its rows; once the process ended none of them was in the file
(``tests/test_purge_with_open_objects.py``).

So a rewrite now (:meth:`FileSwap.rewriting`, then :meth:`FileSwap.rewrite`):

1. holds the file's opening lock (:func:`.peers.opening_lock`: no store of the process
   opens the file meanwhile) and the rewriting store's own locks;
2. holds every other store of the file in this process *still*: its locks, so no
   statement, transaction or write beside runs on it (a shared store has no connection
   outside a turn, and is kept from taking one), waiting at most
   ``$NBMEMORY_LOCK_TIMEOUT`` seconds (30) for what they run to end;
3. counts the connections of the file's database: more than those stores hold means
   a connection nbmemory did not make (``duckdb.connect`` of the file, with the same
   settings, in the caller's code), which would keep the old file open;
4. copies the live rows (:func:`.files.copy_live_rows`), closes every connection of
   those stores, puts the new file in place (:func:`.files.replace_file`), and
   connects again each store that had a connection: to the new file.  Each also
   trades the descriptor it keeps of the file (:func:`.files.hold`) for one of the
   new file: open, the old one kept the erased bytes on the disk.

A refusal at 2 or 3 is one :class:`~nbmemory.errors.StoreError` before anything is
changed (``purge`` erases facts' history inside :meth:`FileSwap.rewriting` too).
Other processes are not in the way: a store opened without ``shared=True`` keeps
every other process off the file (:mod:`.openers`), and a shared store rewrites in
its turn, when no other process has the file open; they open it again at their next
turn, and find the new file (and trade their descriptor then:
:meth:`.shared.SharedStore.note_external_change`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import duckdb

from ..errors import StoreError
from . import files, peers
from .side import Side
from .turns import default_lock_timeout

log = logging.getLogger(__name__)

#: Held while a store trades the descriptor it keeps of its file (:meth:`FileSwap.hold_file_again`).
_trading = threading.Lock()


@contextlib.contextmanager
def held(path: str, deadline: float, *locks: Any) -> Iterator[None]:
    """Hold ``locks`` in order while the block runs, each taken by ``deadline`` (a
    :func:`time.monotonic` time); a :class:`StoreError` naming ``path`` if one is not."""
    taken: list[Any] = []
    try:
        for lock in locks:
            if not lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
                raise StoreError(
                    f"another Memory of the store {path} in this process stayed busy, so the "
                    "file was not rewritten; nothing was changed. Call purge again once it is "
                    "idle, or close the other Memory objects of this file (mem.close())"
                )
            taken.append(lock)
        yield
    finally:
        for lock in reversed(taken):
            lock.release()


class FileSwap:
    """Rewriting the store's file in place, the other stores of the process held still
    meanwhile: mixed into :class:`~.connection.Store` (a lake overrides :meth:`rewrite`)."""

    path: str
    read_only: bool
    #: Whether the connection stays open between calls (False: a shared store's turns).
    holds_file: bool
    con: duckdb.DuckDBPyConnection | None
    _lock: Any
    _rows_lock: Any
    _side: Side
    _reopen: bool
    _peer_key: str | None
    _let_go_file: Callable[[], Any]
    #: Set by another store of the file after it committed a write (:mod:`.peers`).
    peer_wrote: bool
    #: The other stores held still while this one rewrites the file (None: it does not).
    _swapping_with: list[FileSwap] | None = None

    @property
    def on_disk(self) -> bool:
        raise NotImplementedError

    @property
    def in_transaction(self) -> bool:
        raise NotImplementedError

    @property
    def closed(self) -> bool:
        raise NotImplementedError

    def _connect(self) -> duckdb.DuckDBPyConnection:
        raise NotImplementedError

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        raise NotImplementedError

    def mark_stale(self) -> None:
        raise NotImplementedError

    @contextlib.contextmanager
    def rewriting(self) -> Iterator[None]:
        """Hold the file alone while the block rewrites it (:meth:`rewrite`): every other
        store of this process on the file held still, and no connection nbmemory did not
        make open on it.  Raises :class:`StoreError` before the block, having changed
        nothing, when another store stays busy or such a connection is open.  Reentrant;
        nothing is held for a store that is not a file here, or is read-only."""
        if not self.on_disk or self.read_only:
            yield
            return
        deadline = time.monotonic() + default_lock_timeout()
        opening = peers.opening_lock(self.path)
        with held(self.path, deadline, opening), self._rows_lock, self._lock:
            if self._swapping_with is not None:  # this thread rewrites already
                yield
                return
            with contextlib.ExitStack() as still:
                others: list[FileSwap] = []
                for peer in peers.others(self, self._peer_key):
                    if isinstance(peer, FileSwap):
                        # a shared store rewriting holds the file's turn, which keeps every
                        # other shared store of the file off it, in this process too
                        still.enter_context(peer.held_still(deadline, turn=not self.holds_file))
                        if not peer.closed:  # (it may have closed while this waited)
                            others.append(peer)
                self._check_alone(others)
                self._swapping_with = others
                try:
                    yield
                finally:
                    self._swapping_with = None

    def held_still(self, deadline: float, *, turn: bool) -> contextlib.AbstractContextManager[Any]:
        """Keep this store from running anything on its file while another store of the
        process rewrites it: its locks, taken by ``deadline``.  ``turn``: the rewriting
        store holds the shared file's turn (which matters to a shared store only)."""
        return held(self.path, deadline, self._rows_lock, self._lock)

    def _connections(self) -> int:
        """How many connections this store has open on its file's database."""
        return (self.con is not None) + (self._side.cursor is not None)

    def _check_alone(self, others: list[FileSwap]) -> None:
        """Refuse a rewrite while the file's database has a connection that neither this
        store nor ``others`` holds: closing theirs would not close the database, and
        whoever connects after the swap would join it, on the old file."""
        ours = self._connections() + sum(other._connections() for other in others)
        found = self._cursor().execute("SELECT count FROM duckdb_connection_count()").fetchall()
        if int(found[0][0]) > ours:
            raise StoreError(
                f"the store {self.path} is also open through a DuckDB connection nbmemory did "
                f"not make (duckdb.connect({self.path!r}) in this process), which would keep "
                "the old file; nothing was changed. Close that connection and purge again"
            )

    def rewrite(self, *, expire_snapshots: bool = False) -> dict[str, int]:
        """Rewrite the file from its live rows, so freed blocks are gone from its bytes.

        DuckDB reuses the space of deleted rows but leaves their old bytes in the file
        until something overwrites them: a deleted or changed text can still be read with
        a hex editor.  This copies every table into a new file (``COPY FROM DATABASE``)
        and puts it in place of the old one atomically, every store of this process on
        the file letting go of the old one and opening the new one (see the module).
        Returns counts of what was done besides (none for a file).
        """
        if not self.on_disk or self.read_only:
            return {}
        with self.rewriting():
            if self.in_transaction:
                raise StoreError("internal: a file cannot be rewritten inside a transaction")
            stores = [self, *(self._swapping_with or [])]
            fresh = files.copy_live_rows(self._cursor(), self.path)
            connected = [store._let_go() for store in stores]
            try:
                files.replace_file(fresh, self.path)
            finally:  # whichever file is in place now, each store opens it again
                for store, had in zip(stores, connected, strict=True):
                    store._take_back(had)
        self.mark_stale()
        return {}

    def hold_file_again(self) -> None:
        """Keep a descriptor of the file now at the store's path (:func:`.files.hold`: reads
        of it never drop DuckDB's lock) and let go of the one of the file it replaced:
        the old bytes are freed on the disk only once nothing has them open."""
        with _trading:  # a shared store may trade at its next turn, on another thread
            let_go_old, self._let_go_file = self._let_go_file, files.hold(self, self.path)
        let_go_old()

    def _let_go(self) -> bool:
        """Close this store's connections to the file (it is being swapped); whether it
        had one."""
        self._side.drop()
        con, self.con = self.con, None
        if con is not None:
            with contextlib.suppress(duckdb.Error):  # checkpointed by the copy already
                con.close()
        return con is not None

    def _take_back(self, connected: bool) -> None:
        """After the swap: hold the file now in place, and connect again if this store was
        connected (else it opens the file at its next call, or turn)."""
        self.hold_file_again()
        if not connected:
            return
        try:
            self.con = self._connect()
        except (StoreError, duckdb.Error):
            log.warning("nbmemory: reopening the rewritten store failed", exc_info=True)
            self._reopen = True  # the next call opens it, or says why it cannot
