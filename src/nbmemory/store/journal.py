"""Group commit for shared mode: ``add_event`` appends to a journal, one turn writes them all.

Opening and closing the DuckDB file for every call is what made shared mode slow
(~16 ms of each ~30 ms ``add_event`` alone, and with two writers and a reader
each call also waited for the others' turns: 6 ``add_event``/s per writer).  So
in shared mode ``add_event`` builds and redacts its row, appends it as one JSON
line to this process's journal (``<store>.nbmemory-journal/<pid>-<n>-<r>.jsonl``),
``fsync``-s it and returns: once it returned, the event survives a kill -9 and
a power cut.  The rows reach the DuckDB file at the next turn on it of *any*
process (:func:`drain`): a caller's thread taking the file first writes the
pending rows of every journal, in one transaction, before doing its own work.
So a read sees every event whose ``add_event`` returned, in this process or
another.  An ``add_event`` takes a turn and writes the journal itself once it
holds :data:`BATCH` rows or its oldest is :data:`LINGER` seconds old, a thread
of the store writes it :data:`LINGER` seconds after the last one, ``flush()``
and ``close()`` write the rest; an open without shared mode writes what killed
shared processes left (:func:`replay`).

Exactly once: a row is inserted only if its id is not in the table yet (ids are
made by the writer, :func:`~nbmemory.event_rows.new_id`), and a journal is
emptied only after the transaction that wrote its rows committed.  A kill between
the two leaves rows that the next drain finds stored and skips.  A journal is
locked (``flock``) while its owner appends and while a drain reads and empties
it, so no line is read half-written nor emptied unread; a last line cut short (a
power cut inside the write) was never acknowledged and is dropped.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import itertools
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..errors import DiskFull, StoreError
from . import processes

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock, so no journal (one turn per call)
    fcntl = None  # type: ignore[assignment]

#: Whether journals can be used here: a drain must lock out an append it would empty.
SUPPORTED = fcntl is not None
log = logging.getLogger(__name__)

#: Rows in this process's journal at which the ``add_event`` that appends the last
#: one also writes them all to the store (in its turn on the file).
BATCH = 64
#: Seconds after which an ``add_event`` writes the journal out whatever its length.
LINGER = 0.25
_DATES = "__datetime__"
_counter = itertools.count()


def folder_of(store_path: str) -> str:
    return store_path + ".nbmemory-journal"


def _encode(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return {_DATES: value.isoformat()}
    raise TypeError(f"not journalled: {type(value).__name__}")


def _decode(obj: dict[str, Any]) -> Any:
    if len(obj) == 1 and _DATES in obj:
        return dt.datetime.fromisoformat(obj[_DATES])
    return obj


def encode(row: dict[str, Any], redacted: int) -> bytes:
    line = json.dumps({"row": row, "redacted": redacted}, default=_encode, ensure_ascii=False)
    return (line + "\n").encode("utf-8")


def decode(data: bytes) -> list[dict[str, Any]]:
    """The entries of a journal's bytes; a last line without its newline is dropped."""
    entries = []
    for line in data.split(b"\n")[:-1]:  # the part after the last newline is unfinished
        if not line.strip():
            continue
        try:
            entries.append(json.loads(line, object_hook=_decode))
        except ValueError:  # a damaged line cannot be told apart: the others still count
            log.warning("nbmemory: skipped a damaged line of a shared-mode journal")
    return entries


def _flock(fd: int, how: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, how)


def _exclusive(fd: int) -> None:
    if fcntl is not None:
        _flock(fd, fcntl.LOCK_EX)


def shared_lock(fd: int) -> None:
    """Wait for a journal's appends and drains to finish, and keep them out while held
    (a reader's lock: readers do not keep each other out)."""
    if fcntl is not None:
        _flock(fd, fcntl.LOCK_SH)


def _unlock(fd: int) -> None:
    if fcntl is not None:
        _flock(fd, fcntl.LOCK_UN)


def read_all(fd: int) -> bytes:
    """All bytes of the file open at ``fd``."""
    size = os.fstat(fd).st_size
    chunks, offset = [], 0
    while offset < size:
        chunk = os.pread(fd, size - offset, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _owner_alive(name: str) -> bool:
    try:
        pid = int(name.split("-", 1)[0])
    except ValueError:
        return False
    return processes.alive(pid)


class Journal:
    """This process's journal of one shared store: appends, and what is pending."""

    def __init__(self, store_path: str) -> None:
        self.folder = folder_of(store_path)
        self.name = f"{os.getpid()}-{next(_counter)}-{os.urandom(3).hex()}.jsonl"
        self.path = os.path.join(self.folder, self.name)
        self.store_path = store_path
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        for attempt in range(3):  # another process may remove the empty folder meanwhile
            try:
                os.makedirs(self.folder, exist_ok=True)
                self.fd = os.open(self.path, flags, 0o666)  # as the store: the umask decides
                break
            except FileNotFoundError:
                if attempt == 2:
                    raise
            except OSError as exc:  # a full disk, a folder that cannot be written
                raise _store_error(exc, store_path) from exc
        #: Held by an append and by a drain of this journal (threads of this process).
        self.lock = threading.Lock()
        #: Rows appended and not yet drained by this process (others may drain them).
        self.pending = 0
        self._since = self.last_append = time.monotonic()
        self.closed = False

    def append(self, row: dict[str, Any], redacted: int) -> bool:
        """Append one row durably; whether the journal is due to be written out
        (:data:`BATCH` rows, or the oldest :data:`LINGER` seconds old)."""
        line = encode(row, redacted)
        with self.lock:
            if self.closed:
                raise OSError("the journal is closed")
            _exclusive(self.fd)
            try:
                size = _append_whole(self.fd, line, self.store_path)
            finally:
                _unlock(self.fd)
            now = self.last_append = time.monotonic()
            if size == len(line):  # it was empty: drained (maybe by another process)
                self.pending, self._since = 0, now
            self.pending += 1
            return self.pending >= BATCH or now - self._since >= LINGER

    def idle_rows(self) -> bool:
        """Whether rows wait in the journal and none was appended for :data:`LINGER` s."""
        if self.closed or time.monotonic() - self.last_append < LINGER:
            return False
        try:
            return os.fstat(self.fd).st_size > 0
        except OSError:
            return False

    def close(self) -> None:
        """Stop appending; the file is removed when nothing is left in it."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            empty = os.fstat(self.fd).st_size == 0
            os.close(self.fd)
            if empty:
                with contextlib.suppress(OSError):
                    os.remove(self.path)
                with contextlib.suppress(OSError):
                    os.rmdir(self.folder)  # only when no other journal is in it


def _append_whole(fd: int, line: bytes, store_path: str) -> int:
    """Append ``line`` whole and ``fsync`` it; the journal's size after it.

    ``os.write`` may write part of a line (a disk filling up): the rest is written
    until it is all there, and if that fails the journal is cut back to where the
    line began, so no part of it stays to run into the next append's line (the two
    would read as one damaged line, and that next event would be lost too), and the
    call raises :class:`~nbmemory.errors.DiskFull` (or :class:`StoreError`) instead
    of returning as if the event were safe.
    """
    start = os.fstat(fd).st_size  # under the flock: appends land here (O_APPEND)
    try:
        view = memoryview(line)
        while view:
            written = os.write(fd, view)
            if written <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            view = view[written:]
        os.fsync(fd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, start)
            os.fsync(fd)
        raise _store_error(exc, store_path) from exc
    return start + len(line)


def _store_error(exc: OSError, store_path: str) -> StoreError:
    """An OS error of the journal as the one-line error a caller handles."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull(store_path)
    return StoreError(
        f"cannot write the shared-mode journal beside {store_path} ({exc.strerror or exc}); "
        "nothing of this call was stored: check the folder's permissions and space"
    )


def sweep(folder: str) -> None:
    """Remove the empty journals of processes that are gone (killed with nothing pending)."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return
    for name in names:
        path = os.path.join(folder, name)
        with contextlib.suppress(OSError):
            if os.stat(path).st_size == 0 and not _owner_alive(name):
                os.remove(path)


def any_pending(folder: str, own: Journal | None) -> bool:
    """Whether some journal beside the store holds rows (cheap: one listdir, a stat each)."""
    if own is not None and own.pending:
        return True
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return False
    for name in names:
        with contextlib.suppress(OSError):
            if os.stat(os.path.join(folder, name)).st_size > 0:
                return True
    return False


@contextlib.contextmanager
def _held_journals(folder: str, own: Journal | None) -> Iterator[list[tuple[str, int, bytes]]]:
    """Every journal of the folder locked, with its bytes: (name, descriptor, data)."""
    held: list[tuple[str, int, bytes]] = []
    opened: list[int] = []
    own_locked = False
    try:
        try:
            names = sorted(os.listdir(folder))
        except FileNotFoundError:
            names = []
        for name in names:
            if not name.endswith(".jsonl"):
                continue
            if own is not None and name == own.name:
                own.lock.acquire()
                own_locked = True
                if own.closed:
                    continue
                fd = own.fd
            else:
                try:
                    fd = os.open(
                        os.path.join(folder, name), os.O_RDWR | getattr(os, "O_CLOEXEC", 0)
                    )
                except FileNotFoundError:
                    continue
                opened.append(fd)
            _exclusive(fd)
            held.append((name, fd, read_all(fd)))
        yield held
    finally:
        for _name, fd, _data in held:
            with contextlib.suppress(OSError):
                _unlock(fd)
        for fd in opened:
            with contextlib.suppress(OSError):
                os.close(fd)
        if own_locked and own is not None:
            own.lock.release()


def drain(
    folder: str,
    own: Journal | None,
    write: Callable[[Sequence[tuple[dict[str, Any], int]]], int],
) -> int:
    """Write the rows of every journal with ``write([(row, secrets redacted)])`` (one
    transaction, skipping ids already stored; returns how many it inserted), then
    empty the journals."""
    with _held_journals(folder, own) as held:
        entries: list[tuple[dict[str, Any], int]] = []
        seen: set[str] = set()
        for _name, _fd, data in held:
            for entry in decode(data):
                row = entry["row"]
                if row["id"] not in seen:
                    seen.add(row["id"])
                    entries.append((row, int(entry.get("redacted") or 0)))
        written = write(entries) if entries else 0
        for name, fd, data in held:  # committed: what was read is stored
            if data:
                os.ftruncate(fd, 0)
            if own is not None and name == own.name:
                own.pending = 0
            elif not _owner_alive(name):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(folder, name))
    return written


def write_rows(store: Any, writer: Any, entries: Sequence[tuple[dict[str, Any], int]]) -> int:
    """Insert the journalled rows not stored yet (a drain killed after its commit left
    them in the journal), with their audit rows and session touches, in one
    transaction of ``writer`` on ``store``; returns how many were inserted."""
    ids = [row["id"] for row, _ in entries]
    since = min(row["created_at"] for row, _ in entries)
    marks = ", ".join("?" for _ in ids)
    with store.appending(len(entries)), writer.transaction() as tx:
        stored = {
            found
            for (found,) in store.run(
                f"SELECT id FROM events WHERE created_at >= ? AND id IN ({marks})",
                [since, *ids],
            )
        }
        fresh = [row for row, _ in entries if row["id"] not in stored]
        redacted = tx.change.redacted
        for row, count in entries:
            if count and row["id"] not in stored:
                key = row.get("namespace")
                redacted[key] = redacted.get(key, 0) + count
        if fresh:
            _add_rows(tx, fresh)
    return len(fresh)


def _add_rows(tx: Any, rows: list[dict[str, Any]]) -> None:
    """What ``add_event`` does in one transaction, for many rows at once: the rows in
    one insert, one audit row per session (``count`` when more than one), the touches."""
    records = tx.events.insert(rows)
    sessions: dict[tuple[str, str], list[str]] = {}
    for record in records:
        sessions.setdefault((record["namespace"], record["session_id"]), []).append(record["id"])
    for (namespace, session_id), ids in sessions.items():
        details: dict[str, Any] = {"session_id": session_id}
        if len(ids) > 1:
            details["count"] = len(ids)
        tx.audit("add", ids, namespace, details)
        tx.touch(namespace, session_id)


def replay(store: Any, writer: Any) -> int:
    """At an open without shared mode: write what journals of killed shared processes
    hold (no live shared process can have the file then); returns the rows inserted."""
    folder = folder_of(store.path)
    if not any_pending(folder, None):
        sweep(folder)  # the empty journals of shared processes killed with nothing pending
        with contextlib.suppress(OSError):
            os.rmdir(folder)
        return 0
    with store.locked():
        written = drain(folder, None, lambda entries: write_rows(store, writer, entries))
    with contextlib.suppress(OSError):
        os.rmdir(folder)
    return written
