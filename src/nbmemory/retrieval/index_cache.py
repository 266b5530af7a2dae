"""Saved copies of the in-memory indexes next to the store file.

A new process that opens a large store would rebuild its indexes from the table,
reading every vector and tokenising every text: at a million memories, most of
its time to a first answer (``benchmarks/bench_search.py`` times cold opens,
rebuilt and loaded; ``docs/performance.md``, "Cold open", has the figures).  So
after a full build the indexes are saved in a folder beside the store
(``<store>.nbmemory-index/``), and the next process loads them instead: the
keyword index as arrays (one ``.npz``), the vector matrix as a ``.npy`` file
mapped into memory (copy-on-write: pages are read on first touch and shared with
the page cache, and rows changed later stay private to the process).

The store stays the source of truth.  A saved copy holds one hash per row, in
the order the table is read; a process uses it only when the table's rows,
hashed the same way when it loads, start with exactly those hashes.  Rows added
since (the common case: an agent kept writing) are then read from the table and
added; anything else (a row changed, deleted, or written by another program)
and the copy is ignored, the index is built from the table and saved again.  A
copy that cannot be read, is of another format, or belongs to another program
is never used and never overwritten.

Hashing every row still means reading every vector (a sizeable part of a new
process's time to its first answer: "Cold open" again).  So when that check
passes with nothing added since, it is written down (``checked.json``): the
store file's identity and state then (device, inode, size, modification and
change times, a digest of DuckDB's database headers, no write-ahead log) and
those of the saved copies.  A process that finds the store file and the copies
exactly in that state uses the copies without hashing: DuckDB writes the file
only when it checkpoints, and every checkpoint writes a new database header (its
iteration counter goes up), so any write by DuckDB changes the digest, and a
pending one leaves a write-ahead log; a write by any other program changes the
change time, which no program can set back.  As git does with its index, a
record made within :data:`SETTLE_NS` of a saved copy's last change is not trusted
(a write in the same tick of a coarse clock would not show), and the check is
simply done again.

A process that closes the store cleanly, the only one writing it, records the
same for what it wrote: its indexes are the saved copies plus the rows it added
(a deletion or a changed text would have removed the copies), so the record names
the table's rows then, and the next process reads only the rows after the
copies' (the keyword index's: after the last one's time and ``seq``; the vector
index's: after its count, in the table's order) instead of hashing every row.

Deleting or changing text removes the saved copies at once (they hold the terms
and vectors of what was forgotten); they are written again at the next full
build.  Stores in memory and DuckLake stores keep no copies.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import mmap
import os
import re
import struct
import uuid
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..store.files import read_span
from ..version import __version__
from .encoding import pack_strings, permutation, sort_order, unpack_string_array, unpack_strings
from .keywords.features import FACTS_VERSION

log = logging.getLogger(__name__)

#: The folder beside a store that holds its saved indexes.
SUFFIX = ".nbmemory-index"
#: Version of the files written here; a newer one is never read nor overwritten.
FORMAT = 2
_MAGIC = "nbmemory-index"
#: Rows a saved matrix holds beyond the live ones (zeros, sparse on disk), so the
#: vectors of new events are written in place instead of copying the matrix.
HEADROOM = 1 / 16
#: When more rows than this share of the saved ones were added since, the index is
#: built from the table (in bulk) and saved again, instead of adding them one by one.
MAX_TAIL = 0.1
#: A record of a check is trusted only when made this long after the last change of
#: the files it names (file times are coarse on some file systems: FAT keeps 2 s).
SETTLE_NS = 2_000_000_000
#: The record of the last check that found the saved copies matching the store.
CHECKED = "checked.json"

#: (device, inode, size, modification ns, change ns) of a file; the store file's has a
#: sixth member, the digest of its database headers (:func:`database_headers`).
FileState = tuple[int, ...]
#: Where DuckDB keeps its two database headers (after the 4 KiB file header), one
#: written at each checkpoint with a larger iteration counter.
_DATABASE_HEADERS = (4096, 12288)


def file_state(path: Path | str) -> FileState | None:
    """The identity and state of a file, or None when it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def database_headers(path: Path | str) -> int | None:
    """A digest of a DuckDB file's database headers (any checkpoint changes it)."""
    start, end = _DATABASE_HEADERS
    headers = read_span(path, start, end - start)  # never closing a descriptor of it
    if headers is None or len(headers) != end - start:
        return None
    return int.from_bytes(hashlib.blake2b(headers, digest_size=8).digest(), "little")


@dataclass
class SavedKeywords:
    arrays: dict[str, np.ndarray]
    hashes: np.ndarray
    files: dict[str, FileState | None] = field(default_factory=dict)  # as before reading


@dataclass
class SavedVectors:
    ids: pa.LargeStringArray
    namespaces: list[str]
    codes: np.ndarray
    matrix: np.ndarray  # capacity rows, the first len(ids) live
    hashes: np.ndarray
    files: dict[str, FileState | None] = field(default_factory=dict)  # as before reading
    order: np.ndarray | None = None  # the rows of the ids in ascending id order


class IndexCache:
    """The saved indexes of one store file."""

    def __init__(self, store_path: str, *, min_rows: int = 20_000, read_only: bool = False) -> None:
        self.store_path = store_path
        self.folder = Path(store_path + SUFFIX)
        #: Indexes of fewer rows are not saved: they build in well under a second.
        self.min_rows = min_rows
        #: A store opened read-only reads saved indexes but writes none.
        self.read_only = read_only
        self.saves = 0
        #: Saved copies used on the record of an earlier check, without hashing the rows.
        self.trusted = 0

    # -- keywords ----------------------------------------------------------------------
    def load_keywords(self) -> SavedKeywords | None:
        """The saved keyword index, or None (none, unreadable, another format, or what
        it read from the texts read by other rules: :data:`FACTS_VERSION`)."""
        path = self.folder / "keywords.npz"
        files = {path.name: file_state(path)}
        arrays = self._read(path, "keywords", facts=FACTS_VERSION)
        if arrays is None:
            return None
        hashes = arrays.pop("row_hashes")
        return SavedKeywords(arrays, hashes, files)

    def save_keywords(
        self, arrays: dict[str, np.ndarray], hashes: np.ndarray
    ) -> dict[str, FileState | None] | None:
        """Save the keyword index (``arrays``) for rows with these hashes, in its order;
        returns the state of the file written (None when nothing was)."""
        if len(hashes) < self.min_rows or not self._writable("keywords.npz"):
            return None
        header = self._header("keywords", rows=len(hashes), facts=FACTS_VERSION)
        path = self.folder / "keywords.npz"
        if not self._write_npz(path, {**arrays, "row_hashes": hashes, "header": header}):
            return None
        return {path.name: file_state(path)}

    # -- vectors -----------------------------------------------------------------------
    def load_vectors(self, model: str) -> SavedVectors | None:
        """The saved vector index of ``model``, its matrix mapped, or None."""
        name = _model_file(model)
        files = {f"{name}.npz": file_state(self.folder / f"{name}.npz")}
        arrays = self._read(self.folder / f"{name}.npz", "vectors", model=model)
        if arrays is None:
            return None
        try:
            header = json.loads(arrays["header"].tobytes())
            files[header["matrix"]] = file_state(self.folder / header["matrix"])
            matrix = np.load(self.folder / header["matrix"], mmap_mode="c", allow_pickle=False)
            ids = unpack_string_array(arrays, "ids")
            namespaces = unpack_strings(arrays, "namespaces")
            codes = np.asarray(arrays["codes"], dtype=np.int32)
            hashes = arrays["row_hashes"]
            if (
                matrix.dtype != np.float32
                or matrix.ndim != 2
                or matrix.shape[0] < len(ids)
                or len(codes) != len(ids)
                or len(hashes) != len(ids)
                or (codes.size and (codes.min() < 0 or codes.max() >= len(namespaces)))
            ):
                raise ValueError("the saved vectors are inconsistent")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.info("not using the saved vector index of %s: %s", model, exc)
            return None
        order = permutation(arrays.get("id_order"), len(ids))
        return SavedVectors(ids, namespaces, codes, matrix, hashes, files, order)

    def save_vectors(
        self,
        model: str,
        ids: list[str],
        namespaces: list[str],
        codes: np.ndarray,
        matrix: np.ndarray,
        hashes: np.ndarray,
    ) -> dict[str, FileState | None] | None:
        """Save a vector index: ``matrix`` rows in the order of ``ids`` and ``hashes``;
        returns the state of the files written (None when nothing was)."""
        name = _model_file(model)
        if len(ids) < self.min_rows or not self._writable(f"{name}.npz"):
            return None
        matrix_name = f"{name}-{uuid.uuid4().hex[:12]}.npy"
        path = self.folder / matrix_name
        capacity = len(ids) + max(1024, int(len(ids) * HEADROOM))
        try:
            with open(path, "wb") as out:  # written, not mapped: the pages stay out of RSS
                np.lib.format.write_array_header_1_0(
                    out,
                    {
                        "descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)),
                        "fortran_order": False,
                        "shape": (capacity, int(matrix.shape[1])),
                    },
                )
                start_of_data = out.tell()
                for start in range(0, len(ids), 8192):  # 12 MB at a time, not a copy
                    out.write(np.ascontiguousarray(matrix[start : start + 8192]).data)
                # the headroom: a sparse run of zeros
                out.truncate(start_of_data + capacity * int(matrix.shape[1]) * 4)
        except OSError as exc:
            log.info("could not save the vector index of %s: %s", model, exc)
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        header = self._header("vectors", rows=len(ids), model=model, matrix=matrix_name)
        arrays = {
            **pack_strings("ids", ids),
            **pack_strings("namespaces", namespaces),
            "codes": np.asarray(codes, dtype=np.int32),
            "id_order": sort_order(ids),
            "row_hashes": hashes,
            "header": header,
        }
        if not self._write_npz(self.folder / f"{name}.npz", arrays):
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        for old in self.folder.glob(f"{name}-*.npy"):  # earlier matrices of the model
            if old.name != matrix_name:
                with contextlib.suppress(OSError):
                    old.unlink()
        return {
            f"{name}.npz": file_state(self.folder / f"{name}.npz"),
            matrix_name: file_state(path),
        }

    # -- checks --------------------------------------------------------------------------
    def store_state(self) -> FileState | None:
        """The store file's state, or None while a write-ahead log holds changes not in
        it (a write in progress, or a crash: the file alone is not the store then)."""
        if os.path.exists(self.store_path + ".wal"):
            return None
        state = file_state(self.store_path)
        headers = database_headers(self.store_path)
        if state is None or headers is None:
            return None
        return (*state, headers)

    def checked(
        self, state: FileState | None, files: dict[str, FileState | None], index: str
    ) -> dict[str, Any] | None:
        """None unless a record found these saved files matching the store in exactly
        this ``state``, made long enough after the files last changed.  Else what the
        record says ``index`` (``keywords``, ``vectors/<model>``) holds beyond its
        saved copy: ``{}`` nothing, or where the rows added since are (a clean close)."""
        if state is None or None in files.values():
            return None
        path = self.folder / CHECKED
        recorded = file_state(path)
        record = self._read_record(path)
        if record is None or recorded is None or record.get("store") != list(state):
            return None
        written = recorded[3]
        for name, current in files.items():
            if record.get("files", {}).get(name) != list(current or ()) or current is None:
                return None
            if written - current[3] < SETTLE_NS or written - current[4] < SETTLE_NS:
                return None
        tail = record.get("tails", {}).get(index, {})
        if not isinstance(tail, dict):
            return None
        self.trusted += 1
        return tail

    def record_for(self, state: FileState | None) -> dict[str, Any] | None:
        """The record's ``files`` and ``tails`` when it was made for the store in exactly
        ``state`` and the saved files it names are still as it says; else None."""
        if state is None:
            return None
        record = self._read_record(self.folder / CHECKED)
        if record is None or record.get("store") != list(state):
            return None
        files = record.get("files", {})
        for name, recorded in files.items():
            if list(file_state(self.folder / name) or ()) != recorded:
                return None
        return {"files": dict(files), "tails": dict(record.get("tails", {}))}

    def mark_checked(
        self, state: FileState | None, files: dict[str, FileState | None], index: str
    ) -> None:
        """Record that the saved ``files`` of ``index`` were just found matching the
        store in ``state`` (taken before the check read anything), nothing added since."""
        if state is None or None in files.values() or not self._writable_record():
            return
        record = self._read_record(self.folder / CHECKED)
        if record is None or record.get("store") != list(state):
            record = {"magic": _MAGIC, "format": FORMAT, "kind": "checked", "store": list(state)}
        names = record.setdefault("files", {})
        names.update({name: list(current or ()) for name, current in files.items()})
        record.get("tails", {}).pop(index, None)
        self._write_record(record)

    def record_closed(
        self,
        state: FileState | None,
        files: dict[str, FileState | None],
        tails: dict[str, dict[str, Any]],
        carried: dict[str, Any] | None = None,
    ) -> bool:
        """Record, after a clean close, that the store in ``state`` holds the saved
        ``files`` and after them the rows ``tails`` names for each index; ``carried``
        (from :meth:`record_for`) adds what the record said of the indexes left alone."""
        if state is None or None in files.values() or not self._writable_record():
            return False
        record = {
            "magic": _MAGIC,
            "format": FORMAT,
            "kind": "checked",
            "store": list(state),
            "files": {
                **(carried or {}).get("files", {}),
                **{name: list(current or ()) for name, current in files.items()},
            },
            "tails": {**(carried or {}).get("tails", {}), **tails},
        }
        return self._write_record(record)

    def _write_record(self, record: dict[str, Any]) -> bool:
        path = self.folder / CHECKED
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}")
        try:
            temporary.write_text(json.dumps(record))
            os.replace(temporary, path)
        except OSError as exc:
            log.info("could not record the check of the saved indexes: %s", exc)
            with contextlib.suppress(OSError):
                temporary.unlink()
            return False
        return True

    def _read_record(self, path: Path) -> dict[str, Any] | None:
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if (
            not isinstance(record, dict)
            or record.get("magic") != _MAGIC
            or record.get("format") != FORMAT
            or record.get("kind") != "checked"
            or not isinstance(record.get("files", {}), dict)
            or not isinstance(record.get("tails", {}), dict)
        ):
            return None
        return record

    def _writable_record(self) -> bool:
        """Whether the record may be written: absent, or one of ours of our format."""
        path = self.folder / CHECKED
        if self.read_only or not self.folder.is_dir():
            return False
        return not path.exists() or self._read_record(path) is not None

    # -- forgetting --------------------------------------------------------------------
    def discard(self) -> None:
        """Delete every saved index (text was deleted or changed: they may hold it)."""
        if self.read_only or not self.folder.is_dir():
            return
        for path in self.folder.iterdir():
            if path.name.endswith((".npz", ".npy")) and self._ours(path):
                with contextlib.suppress(OSError):
                    path.unlink()
        if self._read_record(self.folder / CHECKED) is not None:
            with contextlib.suppress(OSError):
                (self.folder / CHECKED).unlink()

    def remove(self) -> int:
        """Delete the folder of saved indexes: every saved index, the record of the last
        check, the temporary files a crashed save left, and then the folder when nothing
        else is in it (a file not ours is left alone).  Returns how many files went.

        What :meth:`discard` leaves: a temporary file of a save that never finished
        holds the terms or vectors of the rows it was saving, forgotten ones too.
        """
        if self.read_only or not self.folder.is_dir():
            return 0
        removed = 0
        for path in sorted(self.folder.iterdir()):
            saved = path.name.endswith((".npz", ".npy")) and self._ours(path)
            if path.is_file() and (saved or _temporary(path.name) or _record(path)):
                try:
                    path.unlink()
                except OSError:
                    continue
                removed += 1
        with contextlib.suppress(OSError):
            self.folder.rmdir()  # only when empty
        return removed

    # -- files -------------------------------------------------------------------------
    def _header(self, kind: str, **extra: Any) -> np.ndarray:
        header = {"magic": _MAGIC, "format": FORMAT, "kind": kind, "nbmemory": __version__}
        header.update(extra)
        return np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)

    def _read(self, path: Path, kind: str, **expected: Any) -> dict[str, np.ndarray] | None:
        if not path.is_file():
            return None
        try:
            arrays = map_npz(path)
            header = json.loads(arrays["header"].tobytes())
            if (
                header.get("magic") != _MAGIC
                or header.get("format") != FORMAT
                or header.get("kind") != kind
                or any(header.get(k) != v for k, v in expected.items())
            ):
                return None
        except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as exc:
            log.info("not using the saved index %s: %s", path, exc)
            return None
        return arrays

    def _ours(self, path: Path) -> bool:
        """Whether a file in the folder is one of ours (never touch anything else)."""
        if path.suffix == ".npy":
            return path.name.startswith(("vectors-",))
        try:
            with np.load(path, allow_pickle=False) as saved:
                header = json.loads(saved["header"].tobytes())
            return bool(header.get("magic") == _MAGIC)
        except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile):
            return False

    def _writable(self, name: str) -> bool:
        """Whether ``name`` may be written: the folder is ours (or can be made), and the
        file is absent or one of ours of a format not newer than ours."""
        if self.read_only:
            return False
        try:
            if self.folder.exists() and not self.folder.is_dir():
                return False
            self.folder.mkdir(exist_ok=True)
        except OSError:
            return False
        path = self.folder / name
        if not path.exists():
            return True
        try:
            with np.load(path, allow_pickle=False) as saved:
                header = json.loads(saved["header"].tobytes())
        except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile):
            return False  # not ours: left alone
        return bool(header.get("magic") == _MAGIC and header.get("format", 0) <= FORMAT)

    def _write_npz(self, path: Path, arrays: dict[str, np.ndarray]) -> bool:
        """Write atomically: a temporary file, then a rename over the old one."""
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.npz")
        try:
            np.savez(temporary, **arrays)  # type: ignore[arg-type]
            os.replace(temporary, path)
        except OSError as exc:
            log.info("could not save the index %s: %s", path, exc)
            with contextlib.suppress(OSError):
                temporary.unlink()
            return False
        self.saves += 1
        return True


def remove_saved_indexes(store_path: str) -> int:
    """Remove the saved indexes beside ``store_path`` (see :meth:`IndexCache.remove`),
    whatever the settings of the process asking: the files may have been saved by
    another one.  Returns how many files went."""
    return IndexCache(store_path).remove()


#: The temporary names ``_write_npz`` and ``_write_record`` write before renaming:
#: ``.keywords.npz.<pid>.<hex>.npz``, ``.vectors-<hash>.npz.<pid>.<hex>.npz``,
#: ``.checked.json.<pid>.<hex>``.
_TEMPORARY = re.compile(
    r"\.(?:keywords|vectors-[0-9a-f]{16})\.npz\.\d+\.[0-9a-f]{8}\.npz"
    r"|\." + re.escape(CHECKED) + r"\.\d+\.[0-9a-f]{8}"
)


def _temporary(name: str) -> bool:
    return _TEMPORARY.fullmatch(name) is not None


def _record(path: Path) -> bool:
    """Whether ``path`` is the record of checks, as this format or an older one writes it."""
    if path.name != CHECKED:
        return False
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and record.get("magic") == _MAGIC


def map_npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` that :func:`numpy.savez` wrote, mapped from the file
    rather than read into new memory: for a million memories' keyword index,
    :func:`numpy.load` took several times as long as checking each member's CRC-32
    and mapping it (``docs/performance.md``, "Cold open").  Pages are copy-on-write,
    as for the vector matrix: a change stays private to the process.

    Raises ``ValueError`` for a member that is compressed, holds Python objects, or
    does not fit in the file."""
    arrays: dict[str, np.ndarray] = {}
    with open(path, "rb") as handle:
        with zipfile.ZipFile(handle) as archive:
            members = archive.infolist()
        size = os.fstat(handle.fileno()).st_size
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY) if size else None
        for info in members:
            if info.compress_type != zipfile.ZIP_STORED or not info.filename.endswith(".npy"):
                raise ValueError(f"{info.filename}: not a stored .npy")
            handle.seek(info.header_offset)
            local = handle.read(_LOCAL_HEADER.size)
            if len(local) != _LOCAL_HEADER.size or local[:4] != b"PK\x03\x04":
                raise ValueError(f"{info.filename}: no local header")
            name_length, extra_length = _LOCAL_HEADER.unpack(local)[-2:]
            start = info.header_offset + _LOCAL_HEADER.size + name_length + extra_length
            handle.seek(start)
            version = np.lib.format.read_magic(handle)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(handle)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(handle)
            else:
                raise ValueError(f"{info.filename}: .npy format {version}")
            offset = handle.tell()
            if dtype.hasobject:
                raise ValueError(f"{info.filename}: Python objects")
            count = int(np.prod(shape, dtype=np.int64))
            end = offset + count * dtype.itemsize
            if end > start + info.file_size or start + info.file_size > size or mapped is None:
                raise ValueError(f"{info.filename}: shorter than its shape")
            with memoryview(mapped) as view, view[start : start + info.file_size] as member:
                if zlib.crc32(member) != info.CRC:  # a damaged copy is never used
                    raise ValueError(f"{info.filename}: bad CRC-32")
            arrays[info.filename[: -len(".npy")]] = np.ndarray(
                shape, dtype, buffer=mapped, offset=offset, order="F" if fortran else "C"
            )
    return arrays


#: A zip entry's local header: signature, versions, flags, method, time, date, CRC,
#: sizes, then the lengths of its name and of its extra field.
_LOCAL_HEADER = struct.Struct("<4s5H3L2H")


def _model_file(model: str) -> str:
    """A file name for a model's vectors (model names hold slashes and colons)."""
    return "vectors-" + hashlib.sha1(model.encode()).hexdigest()[:16]
