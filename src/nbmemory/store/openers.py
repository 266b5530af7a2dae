"""Who has a store file open: one rule for shared and private openers, that no
opener can break, kept by locks that die with their process.

DuckDB lets one process hold a file read-write, or several hold it read-only.  A
shared store (:mod:`.shared`) lets go of the file between calls so that the other
shared processes can take their turn.  A process that opened the file *without*
``shared=True`` in such a gap used to keep it for its whole life, and the shared
processes waited out their lock timeout and failed.  So every process that opens a
store file first *joins its openers*: for as long as it has the store open it holds
a POSIX record lock on the sidecar ``<store>.nbmemory-openers``:

==============================================  ====================================
opener                                          holds, until its last store closes
==============================================  ====================================
shared (``shared=True``, read-only or not)      a read lock on byte 0
private reader (``read_only=True``, not shared)  a read lock on byte 1
private writer (the default ``Memory(path)``)   a write lock on bytes 0 and 1
==============================================  ====================================

Shared openers keep each other company, so do private readers (DuckDB lets several
processes read a file), and nothing else does: a private writer's write lock
conflicts with every other lock; a shared opener, once it holds byte 0, looks
whether any other process holds byte 1 (``F_GETLK``: a look, not a lock, so two
openers looking at once never refuse each other), and a private reader the other
way round.  Of a shared opener and a private reader that race, at least one sees
the other (each looks only after taking its own byte): both may be refused, never
both let in.  A refused opener gets :class:`~nbmemory.errors.StoreLocked` at once,
naming a holder's PID (which ``F_GETLK`` reports), before it touches the DuckDB
file.  A process that dies loses its locks in the kernel: nothing stale remains.

Why record locks (``fcntl``) rather than ``flock``: byte ranges put the three
kinds in one file; ``F_GETLK`` names the holder and looks without locking; a forked
child does not inherit them (a worker forked by a kernel would otherwise keep a
dead kernel's place); and they work on NFS, where Linux emulates ``flock`` with
them anyway.  Their catch — a process loses every record lock it holds on a file
when it closes *any* descriptor of that file — is kept away: only this module
opens the sidecar, with one descriptor per process, kept until the last store of
the file in the process has closed.  Stores of one process share that descriptor
(a count per kind), so a process may open a file twice in any mix of modes (DuckDB
decides what it allows within one process).  The last one out removes the sidecar
while it holds a write lock; an opener checks, once it holds its lock, that the
file it locked is still the one at the path (else it starts again).

Where the sidecar cannot be made (a folder nobody may write: then no process can
write the store either), or on a platform without ``fcntl`` record locks of a known
layout (Windows), the rule is not kept and opening works as before.
"""

from __future__ import annotations

import contextlib
import errno
import os
import struct
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import StoreLocked
from .files import check_store_path, remove_stale_rewrite

try:  # not on Windows
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

#: The sidecar every opener of ``<store>`` locks, beside it.
SUFFIX = ".nbmemory-openers"

SHARED, READER, WRITER = "shared", "reader", "writer"
KINDS = (SHARED, READER, WRITER)

#: ``struct flock`` as ``F_GETLK`` reads and writes it: (format, field order).
_LAYOUTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "linux": ("@hhqqi4x", ("type", "whence", "start", "len", "pid")),
    "darwin": ("@qqihh", ("start", "len", "pid", "type", "whence")),
    "freebsd": ("@qqihhi", ("start", "len", "pid", "type", "whence", "sysid")),
}


def _layout() -> tuple[str, tuple[str, ...]] | None:
    if fcntl is None or struct.calcsize("P") != 8:
        return None
    for name, layout in _LAYOUTS.items():
        if sys.platform.startswith(name):
            return layout
    return None


_LAYOUT = _layout()


class _Entry:
    """This process's descriptor of one sidecar and how many stores of each kind use it."""

    def __init__(self, path: str, fd: int, writable: bool) -> None:
        self.path = path
        self.fd = fd
        self.writable = writable
        self.counts = dict.fromkeys(KINDS, 0)

    def idle(self) -> bool:
        return not any(self.counts.values())


#: Real sidecar path -> its entry, for the stores this process has open.
_entries: dict[str, _Entry] = {}
_lock = threading.Lock()
#: Leaves of stores collected without being closed: run by whoever holds ``_lock`` next
#: (a collection may run inside this module, while ``_lock`` is held).
_pending: list[tuple[str, str]] = []


def _forget_after_fork() -> None:
    """A forked child holds none of its parent's record locks: it starts with none."""
    global _lock
    _lock = threading.Lock()
    for entry in _entries.values():
        with contextlib.suppress(OSError):
            os.close(entry.fd)  # closes the child's copy only; the parent keeps its locks
    _entries.clear()
    _pending.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def kind_of(store: Any) -> str | None:
    """Which opener ``store`` is (None: one the rule does not concern, a lake or ``:memory:``)."""
    if getattr(store, "backend", "file") != "file" or store.path == ":memory:":
        return None
    if not store.holds_file:
        return SHARED
    return READER if store.read_only else WRITER


class Place:
    """A store's place among its file's openers; calling it leaves (once).  A store
    collected without being closed leaves too."""

    def __init__(self, store: Any, key: str, kind: str) -> None:
        self.key, self.kind = key, kind
        self._collected = weakref.finalize(store, _leave_later, key, kind)

    @property
    def alive(self) -> bool:
        return self._collected.alive

    def __call__(self) -> None:
        if self._collected.detach() is not None:  # not left yet: leave now
            with _lock:
                _leave(self.key, self.kind)
            _drain()


def join(store: Any) -> Callable[[], Any]:
    """Make ``store`` one of its file's openers; what is returned leaves (idempotent,
    also run when ``store`` is collected).  Joining twice returns the same leave.

    Raises :class:`StoreLocked` at once when the rule keeps this opener out.
    """
    kind = kind_of(store)
    if kind is None or _LAYOUT is None:
        return _nothing
    joined = _joined.get(store)
    if joined is not None and joined.alive:
        return joined
    check_store_path(store.path, read_only=store.read_only)  # no sidecar beside a bad path
    key = _enter(store.path, kind, read_only=store.read_only)
    if key is None:
        return _nothing
    place = _joined[store] = Place(store, key, kind)
    return place


@contextlib.contextmanager
def claim(path: str) -> Iterator[None]:
    """Hold ``path`` as a private writer while the block runs: no other process has it
    open, and none opens it, until the block ends (:class:`StoreLocked` otherwise).

    For removing a store this process made and no other has used: the stores of this
    process may still be open (a shared one of them becomes a private writer's).
    """
    key = _enter(path, WRITER, read_only=False) if _LAYOUT is not None else None
    try:
        yield
    finally:
        if key is not None:
            with _lock:
                _leave(key, WRITER)
            _drain()


def _nothing() -> None:
    return None


_joined: weakref.WeakKeyDictionary[Any, Place] = weakref.WeakKeyDictionary()


def _leave_later(key: str, kind: str) -> None:
    """The leave of a collected store: now if no one holds ``_lock``, else by its holder."""
    _pending.append((key, kind))
    _drain()


def _drain() -> None:
    """Run the pending leaves (after ``_lock`` is let go: one queued meanwhile is not lost)."""
    while _pending:
        if not _lock.acquire(blocking=False):
            return  # its holder drains after letting go
        try:
            while _pending:
                _leave(*_pending.pop())
        finally:
            _lock.release()


def _enter(path: str, kind: str, *, read_only: bool) -> str | None:
    """Count one more opener of ``kind`` in this process, taking its lock; the key of
    the entry, or None where no sidecar can be made."""
    assert fcntl is not None
    sidecar = path + SUFFIX
    key = os.path.realpath(sidecar)
    try:
        with _lock:
            entry = _entries.get(key)
            if entry is None:
                entry = _open(key, read_only=read_only)
                if entry is None:
                    return None
                _entries[key] = entry
            entry.counts[kind] += 1
            try:
                _admit(entry, kind, path)
            except BaseException:
                entry.counts[kind] -= 1
                if entry.idle():
                    _close(key, entry)
                raise
            return key
    finally:
        _drain()


def _open(path: str, *, read_only: bool) -> _Entry | None:
    """A descriptor of the sidecar at ``path`` that is still the file at ``path`` once
    locked (the last opener of another process may remove it meanwhile)."""
    for _ in range(100):
        writable = True
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        except OSError as exc:
            if not read_only or exc.errno not in (errno.EACCES, errno.EROFS, errno.EPERM):
                return None  # no sidecar here: the store cannot be written either
            try:  # a reader in a folder it may not write: the sidecar as it is, if any
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except OSError:
                return None
            writable = False
        entry = _Entry(path, fd, writable)
        if _same_file(entry):
            return entry
        os.close(fd)  # removed, or replaced, between our open and now
    return None


def _same_file(entry: _Entry) -> bool:
    try:
        mine, there = os.fstat(entry.fd), os.stat(entry.path)
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)


def _admit(entry: _Entry, kind: str, path: str) -> None:
    """Take the locks ``kind`` needs now that ``entry.counts`` includes it."""
    counts = entry.counts
    if counts[WRITER] > (1 if kind == WRITER else 0):
        return  # this process writes the file already: it holds every byte
    if kind == WRITER:
        _take_or_refuse(entry, fcntl.LOCK_EX, 0, 2, path)
        if not _same_file(entry):  # a last opener removed it before we locked: again
            _retry(entry, path, kind)
        # the file is this process's alone now: a purge killed in another leaves its copy
        remove_stale_rewrite(path)
        return
    mine, theirs = (0, 1) if kind == SHARED else (1, 0)
    if counts[kind] > 1:
        return  # another store of this process has this kind's byte already
    _take_or_refuse(entry, fcntl.LOCK_SH, mine, 1, path)
    if not _same_file(entry):
        _retry(entry, path, kind)
        return
    holder = _holder(entry, theirs, 1)
    if holder is not None:
        _untake(entry, mine)
        raise _locked(path, holder)


def _retry(entry: _Entry, path: str, kind: str) -> None:
    """The sidecar was removed before we locked it: take a fresh one in its place."""
    fresh = _open(entry.path, read_only=not entry.writable)
    if fresh is None:
        raise StoreLocked(path, None, "its lock file keeps being replaced")
    with contextlib.suppress(OSError):
        os.close(entry.fd)
    entry.fd, entry.writable = fresh.fd, fresh.writable
    _admit(entry, kind, path)


def _take(entry: _Entry, how: int, start: int, length: int) -> bool:
    try:
        fcntl.lockf(entry.fd, how | fcntl.LOCK_NB, length, start, os.SEEK_SET)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            return False
        if exc.errno == errno.EBADF and how == fcntl.LOCK_EX:
            return True  # a read-only sidecar: no writer can lock it either
        raise
    return True


def _untake(entry: _Entry, byte: int) -> None:
    fcntl.lockf(entry.fd, fcntl.LOCK_UN, 1, byte, os.SEEK_SET)


def _holder(entry: _Entry, start: int, length: int) -> tuple[int | None, str] | None:
    """(pid, kind) of a lock another process holds on the bytes, None if there is none."""
    assert _LAYOUT is not None
    layout, fields = _LAYOUT
    asked = dict.fromkeys(fields, 0)
    asked.update(type=fcntl.F_WRLCK, whence=os.SEEK_SET, start=start, len=length)
    packed = struct.pack(layout, *(asked[name] for name in fields))
    answer = struct.unpack(layout, fcntl.fcntl(entry.fd, fcntl.F_GETLK, packed))
    found = dict(zip(fields, answer, strict=True))
    if found["type"] == fcntl.F_UNLCK:
        return None
    kind = WRITER if found["type"] == fcntl.F_WRLCK else SHARED if found["start"] == 0 else READER
    return (found["pid"] if found["pid"] > 0 else None), kind


def _take_or_refuse(entry: _Entry, how: int, start: int, length: int, path: str) -> None:
    """Take the lock, or raise :class:`StoreLocked` naming the process that holds it."""
    for _ in range(100):
        if _take(entry, how, start, length):
            return
        holder = _holder(entry, start, length)
        if holder is not None:
            raise _locked(path, holder)
        # the holder let go between our try and our look: try again
    raise StoreLocked(path, None, "its openers keep changing")


def _locked(path: str, holder: tuple[int | None, str]) -> StoreLocked:
    """The refusal of an opener by ``holder`` (its pid and kind), in one line."""
    pid, held_as = holder
    exe = _executable(pid)
    if held_as == SHARED:
        return StoreLocked(path, pid, exe, shared=True)
    how = "read-only, without shared=True" if held_as == READER else "without shared=True"
    return StoreLocked(path, pid, f"{exe}, {how}" if exe else how)


def _executable(pid: int | None) -> str | None:
    """The holder's program, as DuckDB names it in its own lock message (Linux)."""
    if pid is None:
        return None
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def _leave(key: str, kind: str) -> None:
    """One opener of ``kind`` fewer in this process: keep only the locks still needed
    (``_lock`` held)."""
    entry = _entries.get(key)
    if entry is None:
        return
    entry.counts[kind] = max(0, entry.counts[kind] - 1)
    if entry.idle():
        _close(key, entry)
        return
    if entry.counts[WRITER]:
        return
    for byte, needed in ((0, entry.counts[SHARED]), (1, entry.counts[READER])):
        with contextlib.suppress(OSError):  # a downgrade or an unlock never waits
            if needed:
                fcntl.lockf(entry.fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, byte, os.SEEK_SET)
            else:
                _untake(entry, byte)


def _close(key: str, entry: _Entry) -> None:
    """The last opener of this process is gone: remove the sidecar if no other process
    has it (under a write lock, so no one is admitted by a file about to go), let go."""
    _entries.pop(key, None)
    removed = False
    try:
        removed = entry.writable and _remove_if_unheld(entry)
    finally:
        os.close(entry.fd)  # every record lock of this process on the sidecar goes with it
    if entry.writable and not removed:
        # Two last openers leaving at once each see the other's lock and keep the file:
        # once ours are gone, look again (the last to let go finds none held).
        try:
            fd = os.open(entry.path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return  # removed by the other
        try:
            _remove_if_unheld(_Entry(entry.path, fd, True))
        finally:
            os.close(fd)


def _remove_if_unheld(entry: _Entry) -> bool:
    """Remove the sidecar if no process holds a lock on it (under a write lock, so no
    one is admitted by a file about to go); whether it was removed."""
    try:
        if _take(entry, fcntl.LOCK_EX, 0, 2) and _same_file(entry):
            os.remove(entry.path)
            return True
    except OSError:
        pass
    return False
