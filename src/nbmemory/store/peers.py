"""Stores of one process open on the same file, telling each other when they write.

DuckDB gives every connection a process opens on one file the same database, so
SQL through any of them sees every committed row.  The caches nbmemory keeps in
memory do not: each follows the changes its own store announces.  A second
``Memory`` on the same file (a notebook cell that opens the store run again while
the first object lives, an agent and one of its tools) would otherwise answer
from before the other's writes.

So a store that commits a write marks the other stores of its file, and each
store, at its next read of a cache (:meth:`Store.refresh`) or its next write
transaction, announces an unknown change to its own caches: they rebuild from
the table (or the saved copies still valid for it), as after another process's
write.  The price is that rebuild, paid only while two objects write one file.

The same database is why a rewrite of the file (``purge``) must have every store
of the file let go of it, not only its own: :mod:`.swap` finds them here.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Iterator
from typing import Protocol


class Peer(Protocol):
    #: Set by another store of the same file after it committed a write.
    peer_wrote: bool


_lock = threading.Lock()
#: The file's real path -> the stores open on it in this process.
_open: dict[str, weakref.WeakSet[Peer]] = {}
#: The file's real path -> held while a store of this process opens it.
_opening: dict[str, threading.RLock] = {}
#: The file's real path -> the rows lock every store of this process on it shares.
_rows: dict[str, threading.RLock] = {}


@contextlib.contextmanager
def opening(path: str) -> Iterator[None]:
    """Hold while a store of this process opens the file at ``path`` (connects, checks
    and migrates its schema, joins the file's stores).  Stores of one process share
    DuckDB's database: two opening a new file at once ran the same migration in two
    transactions, and all but one failed with DuckDB's "Catalog write-write conflict".
    A rewrite of the file holds it too (:func:`opening_lock`)."""
    if path == ":memory:":
        yield
        return
    with opening_lock(path):
        yield


def opening_lock(path: str) -> threading.RLock:
    """The lock :func:`opening` holds for the file at ``path``.  A rewrite (``purge``,
    :mod:`.swap`) holds it while it swaps the file, so no store of this process
    opens the old file meanwhile, or joins the file's stores unseen."""
    key = os.path.realpath(path)
    with _lock:
        return _opening.setdefault(key, threading.RLock())


def rows_lock(path: str) -> threading.RLock:
    """The rows lock of the stores of this process on the file at ``path`` (a new one
    for a store in memory).  A store's write transactions that may change existing
    rows, and the embedding worker's vector writes beside them, hold it
    (:meth:`.connection.Store.beside`).  Stores of one file share DuckDB's database,
    so a lock of each store's own kept nothing apart: two ``Memory`` objects on one
    file both embedded the events the second found pending at open, and their two
    workers marked the same rows at once; DuckDB failed one with "Conflict on
    update" (its write beside and its retry alike), and the worker logged the error.
    Shared, the second write waits for the first and finds nothing left to mark."""
    try:
        key = None if path == ":memory:" else os.path.realpath(path)
    except (ValueError, OSError):  # not a path (a NUL byte): opening it fails, and says why
        key = None
    if key is None:
        return threading.RLock()
    with _lock:
        return _rows.setdefault(key, threading.RLock())


def join(store: Peer, path: str) -> str | None:
    """Count ``store`` among those open on the file at ``path``; returns the key the
    other calls take (None for a store in memory, which has no peers)."""
    if path == ":memory:":
        return None
    key = os.path.realpath(path)
    with _lock:
        _open.setdefault(key, weakref.WeakSet()).add(store)
    return key


def leave(store: Peer, key: str | None) -> None:
    """``store`` closed: it is told nothing more."""
    if key is None:
        return
    with _lock:
        group = _open.get(key)
        if group is not None:
            group.discard(store)
            if not group:
                del _open[key]


def wrote(store: Peer, key: str | None) -> None:
    """``store`` committed a write: mark every other store open on its file."""
    for peer in others(store, key):
        peer.peer_wrote = True


def others(store: Peer, key: str | None) -> list[Peer]:
    """The stores of this process open on the file of ``key``, ``store`` left out."""
    with _lock:
        group = _open.get(key) if key is not None else None
        return [peer for peer in group if peer is not store] if group else []


def count(key: str | None) -> int:
    """How many stores are open on the file of ``key`` in this process."""
    with _lock:
        group = _open.get(key) if key is not None else None
        return len(group) if group else 0
