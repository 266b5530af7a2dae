"""Where a store lives: checks on a path before DuckDB sees it, and DuckDB's errors
on opening a file turned into one-line messages that say what to do.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from ..errors import DiskFull, StoreDamaged, StoreError, StoreLocked, WalNotReplayable
from ..file_kinds import HEAD_BYTES, SQLITE_MAGIC, database_kind, read_as_table
from . import processes

_PID_RE = re.compile(r"PID (\d+)")


#: (device, inode) -> [descriptor, holders] of each store file this process has
#: open.  Closing *any* descriptor of a file drops every POSIX lock the process holds
#: on it, DuckDB's included: a plain ``open(path).read()`` of an open store would let
#: another process open it for writing beside this one.  So reads of an open store
#: go through a descriptor kept open until the last store of the file has closed.
_held: dict[tuple[int, int], list[Any]] = {}
_held_lock = threading.Lock()


def hold(owner: object, path: str) -> Callable[[], Any]:
    """Keep a descriptor of the store file at ``path`` open for ``owner`` (a store
    whose connection holds DuckDB's lock on it); call what is returned once that
    connection is closed (it is also called when ``owner`` is collected)."""
    try:
        key = _file_key(path)
        with _held_lock:
            entry = _held.get(key)
            if entry is None:
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                entry = _held[key] = [fd, 0]
            entry[1] += 1
    except OSError:
        return lambda: None
    return weakref.finalize(owner, _release, key)


def _release(key: tuple[int, int]) -> None:
    with _held_lock:
        entry = _held.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del _held[key]
            os.close(entry[0])  # no store of this process has the file open any more


def _file_key(path: str | os.PathLike[str]) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def read_span(path: str | os.PathLike[str], start: int, size: int) -> bytes | None:
    """``size`` bytes of the file at ``path`` from ``start`` (fewer at its end), read
    without closing a descriptor of a store this process has open; None if unreadable."""
    try:
        key = _file_key(path)
        with _held_lock:
            entry = _held.get(key)
            if entry is not None and hasattr(os, "pread"):  # (Windows locks stay put)
                return os.pread(entry[0], size, start)
        with open(path, "rb") as handle:  # no store of this process holds the file
            handle.seek(start)
            return handle.read(size)
    except OSError:
        return None


def first_line(message: str) -> str:
    return message.strip().splitlines()[0] if message.strip() else message


def check_store_path(path: str, *, read_only: bool = False) -> None:
    """Refuse, with a one-line :class:`StoreError`, a path that cannot be a store file.

    Checked before DuckDB sees the path: an empty path (DuckDB would silently open
    a private in-memory database: memories lost at exit), a NUL byte, a path that
    ends with a separator (DuckDB created the file, then failed on it), a missing or
    unwritable parent directory, a directory, a SQLite file (DuckDB would try to
    download its sqlite extension to open it), and a name DuckDB reads as a table
    (``data.csv``, ``export.json``: an existing file of that name that is not a DuckDB
    database is opened as an in-memory database with a view of it -- every write lost
    at close).  Nothing is created or changed.
    """
    if not path.strip():
        raise StoreError(
            "the store path is empty; pass a file name (Memory('agent.duckdb')), "
            "or ':memory:' for a store that is not kept"
        )
    if "\x00" in path:
        raise StoreError(f"the store path {path!r} contains a NUL byte; pass a valid file name")
    if path.endswith(("/", os.sep)) and not os.path.isdir(path):
        raise StoreError(
            f"the store path {path} ends with {path[-1]!r}, as a folder's would; "
            f"pass a file name ({path.rstrip('/' + os.sep) or 'nbmemory.duckdb'})"
        )
    try:
        target = Path(path)  # a leading ~ was expanded where the path came in
        parent = target.resolve().parent
        if parent.exists() and not parent.is_dir():
            raise StoreError(
                f"cannot create the store {path}: {parent} is a file, not a directory. "
                "Pass a path inside a directory."
            )
        if not parent.is_dir():
            raise StoreError(
                f"cannot create the store {path}: the directory {parent} does not exist. "
                "Create it first or pass another path."
            )
        if target.is_dir():
            raise StoreError(
                f"the store path {path} is a directory; pass a file inside it "
                f"({os.path.join(path, 'nbmemory.duckdb')})"
            )
        exists = target.exists()
        if not read_only and not exists and not os.access(parent, os.W_OK):
            raise StoreError(
                f"cannot create the store {path}: the directory {parent} is not writable. "
                "Pass a path in a writable directory (Memory('~/agent.duckdb'))."
            )
        if exists and target.is_file():
            head = read_span(target, 0, len(SQLITE_MAGIC))  # another Memory may hold it
            if head == SQLITE_MAGIC:
                raise StoreError(
                    f"{path} is a SQLite database, not a DuckDB store; nothing was changed. "
                    "Import it with Memory(...).import_sqlite(path) or `nbmemory import-sqlite`."
                )
        _check_not_a_table(path)
    except OSError as exc:
        raise StoreError(f"cannot use {path!r} as a store: {exc.strerror or exc}") from None


def _check_not_a_table(path: str) -> None:
    """Refuse a name DuckDB reads as a table (:func:`nbmemory.file_kinds.read_as_table`)
    unless the file is a DuckDB database already (DuckDB then opens it as one)."""
    suffix = read_as_table(path)
    if suffix is None or database_kind(read_span(path, 0, HEAD_BYTES)) == "DuckDB":
        return
    hint = "; load an export with import_json" if ".json" in suffix.lower() else ""
    raise StoreError(
        f"{path} is named *{suffix}, which DuckDB reads as a table, not as a database: "
        f"what the store keeps would be lost at close; nothing was changed. Pass a store "
        f"file name such as agent.duckdb{hint}"
    )


#: How much WAL a store lets grow before DuckDB checkpoints (DuckDB's default: 16 MB).
#: Each checkpoint rewrites the last, partly filled row group of ``event_vectors``
#: (122,880 rows, ~190 MB of 384-d vectors): checkpointing every 16 MB, bulk ingest
#: spent most of its time rewriting the same vectors (~50 µs a row at 300k rows, 60% of
#: ``add_events``).  The price: up to this much written data waits in memory and in the
#: WAL (replayed by the next open after a crash: ~1.7 s for 440 MB), and ``close``
#: checkpoints it.
CHECKPOINT_THRESHOLD = "512MB"
#: Compression DuckDB is told not to try when it checkpoints.  ALP and ALP-RD are its
#: float codecs: on embeddings (all-MiniLM-L6-v2 vectors of LoCoMo turns) ALP-RD made
#: the column 2% *larger* than storing it plain and took a third of each checkpoint's
#: time analysing and encoding, and decoding it slowed every scan of the vectors.
DISABLED_COMPRESSION = "alp,alprd"
#: The storage format new store files are written in: the oldest DuckDB release the
#: package allows (``pyproject.toml``) must read every store.  DuckDB 2.0 writes its own
#: format by default (storage version 999), which 1.5.5 -- the release ``[lake]`` pins
#: -- cannot open: installing the extra made a store unreadable.  Applies to new files
#: only; DuckDB keeps an existing file's format.
STORAGE_VERSION = "v1.5.0"


def connect(path: str, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open ``path`` with DuckDB; every failure is a :class:`StoreError` naming the fix."""
    if path != ":memory:":
        check_store_path(path, read_only=read_only)
        if not os.path.lexists(path):
            if read_only:
                raise StoreError(
                    f"the store {path} does not exist, and read_only=True opens an existing "
                    "store only; check the path, or open it without read_only to create it"
                )
            create_whole(path)
    try:
        con = duckdb.connect(
            path,
            read_only=read_only,
            config=_config(),
        )
    except duckdb.IOException as exc:
        message = str(exc)
        if "set lock" in message.lower() or "conflicting lock" in message.lower():
            match = _PID_RE.search(message)
            held = re.search(r"held in (\S+)", message)
            raise StoreLocked(
                path, int(match.group(1)) if match else None, held.group(1) if held else None
            ) from None
        if "not a valid DuckDB database" in message and _empty(path):
            raise StoreError(
                f"{path} is empty (0 bytes): it holds nothing, and no DuckDB opens it (a "
                "store whose creation was killed under an earlier nbmemory, or a file made by "
                "something else); nothing was changed. Delete it and open the store again."
            ) from None
        if "not a valid DuckDB database" in message:
            raise StoreError(
                f"{path} exists but is not a DuckDB database; nothing was changed. "
                "Pass the path of an nbmemory store, or a new file name."
            ) from None
        if "Permission denied" in message or "Read-only" in message:
            raise StoreError(
                f"cannot open the store {path} for writing (permission denied). "
                "Pass a writable path, or open it with read_only=True."
            ) from None
        raise translate(exc, path) or StoreError(
            f"cannot open the store {path}: {first_line(message)}"
        ) from None
    except duckdb.Error as exc:
        raise translate(exc, path) or StoreError(
            f"cannot open the store {path}: {first_line(str(exc))}"
        ) from None
    quiet(con)
    return con


#: A new store file is made under this name beside it: ``<store>.nbmemory-new-<pid>-<thread>``.
NEW_SUFFIX = ".nbmemory-new-"


def _config() -> dict[str, str | bool | int | float | list[str]]:
    """DuckDB's settings for opening a store file (a new one gets the 1.5 format)."""
    return {"storage_compatibility_version": STORAGE_VERSION, "memory_limit": memory_limit()}


def create_whole(path: str) -> None:
    """Make the empty DuckDB file of a new store under another name, then link it to
    ``path``: the path appears with a whole header, or not at all.

    DuckDB creates the file, then writes its three 4 KB headers: a process killed
    between the two left a file of 0, 4,096 or 8,192 bytes that no DuckDB opens
    again ("not a valid DuckDB database", "could not read enough bytes"), and the
    user had to find and delete it.  ``os.link`` fails when the path exists, so of
    openers creating the same store at once, one file wins and the others open it.
    A creator killed before the link leaves only its own ``<store>.nbmemory-new-<pid>-...``,
    removed by the next creation once that process is gone.  Where the file system has
    no hard links, DuckDB creates the file in place, as before.
    """
    _remove_dead_creations(path)
    # the thread too: two stores of one process may be created at once
    fresh = f"{path}{NEW_SUFFIX}{os.getpid()}-{threading.get_native_id()}"
    _remove(fresh)
    try:
        duckdb.connect(fresh, config=_config()).close()
        with open(fresh, "rb") as handle:
            os.fsync(handle.fileno())
        try:
            os.link(fresh, path)
        except FileExistsError:
            return  # another opener made it first: that one is the store
        except OSError:
            return  # no hard links here: DuckDB creates the file itself
        fsync_folder(path)
    except (OSError, duckdb.Error):
        return  # DuckDB's own creation of the path names what is wrong
    finally:
        _remove(fresh)


def _empty(path: str) -> bool:
    try:
        return os.path.getsize(path) == 0
    except OSError:
        return False


def _remove(path: str) -> None:
    for leftover in (path, path + ".wal"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(leftover)


def _remove_dead_creations(path: str) -> None:
    """Remove ``<path>.nbmemory-new-<pid>-<thread>`` files whose process is gone (killed while
    it created the store): nothing but that process ever used them."""
    folder = os.path.dirname(os.path.abspath(path))
    prefix = os.path.basename(path) + NEW_SUFFIX
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        pid = name[len(prefix) :].removesuffix(".wal").split("-")[0]
        if not name.startswith(prefix) or not pid.isdigit():
            continue
        if not processes.alive(int(pid)):
            with contextlib.suppress(OSError):
                os.remove(os.path.join(folder, name))


def memory_limit() -> str:
    """DuckDB's memory limit for a store: a quarter of the machine's memory, at least
    512 MB.  DuckDB's own default, 80% of RAM, is a database's; a memory library runs
    inside someone else's process, and its buffer pool would keep what it read up to
    that.  (Our scans read into caches of our own lower it further: :mod:`.lean_scan`.)
    A limit set with ``mem.store.execute("SET memory_limit = ...")`` is kept."""
    try:
        total = int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return "512MB"
    return f"{max(512, (total >> 20) // 4)}MB"


def quiet(con: duckdb.DuckDBPyConnection) -> None:
    """No progress bar: DuckDB draws one on stdout for any query over two seconds,
    even into a pipe, which would corrupt what a notebook or the CLI prints."""
    con.execute("SET enable_progress_bar = false")


#: What DuckDB says when the file system cannot take another byte.
_FULL = ("no space left on device", "disk full", "not enough space", "quota exceeded")
_DAMAGED = ("corrupt database file", "checksum", "could not read enough bytes")


def translate(exc: BaseException, path: str) -> StoreError | None:
    """A DuckDB error about the file itself as a one-line error; None for any other."""
    message = str(exc).lower()
    if "trying to read a database file with version number" in message:
        return StoreError(
            f"the store {path} was written by a newer DuckDB than this one (duckdb "
            f"{duckdb.__version__}: {first_line(str(exc)).split(': ', 1)[-1][:100]}); nothing "
            "was changed. Open it with the DuckDB that wrote it (pip install -U duckdb), or "
            "export it there (nbmemory state export) and import it here."
        )
    if "failure while replaying wal" in message:
        detail = first_line(str(exc)).split(": ", 2)[-1].strip()[:160]
        if "getdefaultdatabase" in message and duckdb.__version__.startswith("1."):
            return WalNotReplayable(path, duckdb.__version__, detail)  # a 2.x replays it
        return StoreDamaged(path, f"its write-ahead log cannot be replayed: {detail}")
    if any(mark in message for mark in _FULL):
        return DiskFull(path)
    if any(mark in message for mark in _DAMAGED):
        return StoreDamaged(path, first_line(str(exc))[:160])
    return None


def check_blocks(con: duckdb.DuckDBPyConnection, path: str) -> None:
    """Refuse a file shorter than the blocks its tables use (a cut copy, a backup that ran
    out of disk): found now, rather than by a later read or write."""
    if path == ":memory:":
        return
    try:
        _check_blocks(con, path)
    except duckdb.Error as exc:  # DuckDB 1.5 reads a missing block while asked about it
        raise translate(exc, path) or StoreDamaged(path, first_line(str(exc))[:160]) from None


def _check_blocks(con: duckdb.DuckDBPyConnection, path: str) -> None:
    size = con.execute("PRAGMA database_size").fetchall()[0]
    block_size, total_blocks = int(size[2]), int(size[3])
    header = 3 * 4096  # three 4 KiB headers, then whole blocks
    actual = os.path.getsize(path)
    if actual >= header + total_blocks * block_size:
        # every block the last checkpoint counted is there, and no table uses a block
        # past that count.  Bytes after them, even part of a block, are what a
        # checkpoint killed midway wrote before its header: DuckDB ignores them.
        # (A checkpoint may shrink the file after writing the count, so a shorter file
        # is not damaged by itself: then ask each table.)
        return
    if actual < header or (actual - header) % block_size:
        raise StoreDamaged(path, f"the file ends inside a block ({actual:,} bytes)")
    tables = [
        row[0]
        for row in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
        ).fetchall()
    ]
    last = -1
    for table in tables:
        row = con.execute("SELECT max(block_id) FROM pragma_storage_info(?)", [table]).fetchone()
        if row and row[0] is not None:
            last = max(last, int(row[0]))
    needed = (last + 1) * block_size + header
    if actual < needed:
        raise StoreDamaged(path, f"the file is {actual:,} bytes, its tables use {needed:,}")


def replace_file(fresh: str, path: str) -> None:
    """Put ``fresh`` in place of ``path`` atomically, durably, with no WAL left behind."""
    with open(fresh, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(fresh, path)
    if os.path.exists(path + ".wal"):
        os.remove(path + ".wal")
    fsync_folder(path)


def fsync_folder(path: str) -> None:
    """Make the folder's entry of ``path`` (a rename, a new link) survive a power cut."""
    folder = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


#: The copy of a store's live rows a purge makes beside it before it swaps it in.
REWRITE_SUFFIX = ".nbmemory-rewrite"


def remove_stale_rewrite(path: str) -> None:
    """Remove the copy a purge killed before its swap left beside the store (and its
    WAL): a stale copy of rows, which a later erasure (``forget_user``, another purge)
    would not reach.  Called by an opener that alone has the file, so no purge runs."""
    _remove(path + REWRITE_SUFFIX)


def copy_live_rows(con: duckdb.DuckDBPyConnection, path: str) -> str:
    """Copy every table of the file ``con`` has open into a new file beside it (``COPY
    FROM DATABASE``: live rows only, none of the old bytes of freed blocks); returns
    the new file's path, for :func:`replace_file`."""
    con.execute("CHECKPOINT")
    name = con.execute("SELECT current_database()").fetchall()[0][0]
    fresh = path + REWRITE_SUFFIX
    _remove(fresh)
    # a file name cannot be a parameter of ATTACH: quoted as a literal instead
    con.execute(
        f"ATTACH '{fresh.replace(chr(39), chr(39) * 2)}' AS nbmemory_rewrite"
        f" (STORAGE_VERSION '{STORAGE_VERSION}')"
    )
    try:
        con.execute(
            f'COPY FROM DATABASE "{name.replace(chr(34), chr(34) * 2)}" TO nbmemory_rewrite'
        )
    finally:
        con.execute("DETACH nbmemory_rewrite")
    return fresh
