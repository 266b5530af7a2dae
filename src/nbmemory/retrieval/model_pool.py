"""One loaded model per process, shared by every embedder that asks for the same one.

A fastembed model and its ONNX Runtime session take ~170 MB of resident memory
once loaded, more while they run.  Every :class:`~nbmemory.Memory` opened with
the default model used to load its own copy; now the
:class:`~nbmemory.retrieval.embedders.FastEmbedEmbedder` of each asks this pool,
keyed by what changes the vectors (model name, local copy, fastembed's cache and
the truncation length), and the first one loads it.  The pool counts its users:
each embedder acquires once when it first embeds and releases on ``close()``
(``Memory.close()`` closes the embedder it created), and the last release drops
the model, collects it and hands the freed heap back to the system, so a process
that closed its stores holds about what it held before opening them
(``docs/performance.md``, "Memory").

Also here, since they belong to a loaded model: the length the model was trained
on (:func:`trained_length`), the word-piece counter, and the cutting of a list of
texts into batches bounded by padded tokens (:func:`token_batches`).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import sys
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Word-pieces a model was trained on, for models whose folder does not say
#: (``sentence_bert_config.json``'s ``max_seq_length``).  The ONNX exports fastembed
#: downloads carry only the tokenizer's ``model_max_length`` (512 for every BERT),
#: which is the position table's size, not what the model learnt to read.
KNOWN_TRAINED_LENGTHS: dict[str, int] = {
    "sentence-transformers/all-MiniLM-L6-v2": 256,
}


def trained_length(model_dir: str | os.PathLike[str] | None, model_name: str) -> int | None:
    """The number of word-pieces (special tokens included) the model was trained on.

    In order: ``sentence_bert_config.json``'s ``max_seq_length`` in the model's
    folder, :data:`KNOWN_TRAINED_LENGTHS` by name (the full name or its last part),
    else None (the tokenizer's own limit then applies).
    """
    if model_dir is not None:
        config = Path(model_dir) / "sentence_bert_config.json"
        with contextlib.suppress(OSError, ValueError, TypeError):
            value = json.loads(config.read_text())["max_seq_length"]
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    if model_name in KNOWN_TRAINED_LENGTHS:
        return KNOWN_TRAINED_LENGTHS[model_name]
    short = model_name.rsplit("/", 1)[-1]
    for name, length in KNOWN_TRAINED_LENGTHS.items():
        if name.rsplit("/", 1)[-1] == short:
            return length
    return None


def token_batches(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Indexes of ``lengths`` cut into batches of similar length, each holding at most
    ``budget`` padded tokens (rows x its longest row); a row longer than the budget
    is a batch of its own.

    The rows are taken shortest first, so a batch pads little: the padded tokens, and
    with them the time and the memory of a batch, follow the texts' own lengths.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    batch: list[int] = []
    for index in order:
        longest = max(lengths[index], 1)  # ascending: this row is the batch's longest
        if batch and (len(batch) + 1) * longest > budget:
            batches.append(batch)
            batch = []
        batch.append(index)
    if batch:
        batches.append(batch)
    return batches


def rss_mb() -> float | None:
    """This process's resident memory now, in MiB (None where /proc is not there)."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


#: Blocks at least this large get their own mapping from glibc, returned to the system
#: when freed (``mallopt(M_MMAP_THRESHOLD)``); see :func:`bound_heap_growth`.
MMAP_THRESHOLD = 4 * 2**20
_M_MMAP_THRESHOLD = -3
_heap_bound: bool | None = None


def bound_heap_growth() -> bool:
    """Fix glibc's mmap threshold at :data:`MMAP_THRESHOLD`, once per process, before a
    model first loads; True when it is set.

    glibc starts large blocks (128 KiB and up) on their own mappings, but each time
    one is freed it raises that threshold to the freed size, up to 32 MiB.  A model's
    buffers (hidden states of a batch, its arena's chunks) then come from the heaps
    of the threads that ran it, and stay resident after the model is dropped, spread
    among the blocks still in use, which ``malloc_trim`` cannot return.  Measured on
    a 2-core machine, five stores opened, fed 50 long texts and closed in turn in one
    process: resident memory after each close was 92, 105, 117, 134, 110 MB over the
    process before the first (glibc's default; 88 to 119 in a second run) against 79
    to 83 with the threshold fixed, in the same time (``docs/performance.md``,
    "Memory").  Left
    alone when the process chose its own malloc settings (``MALLOC_*_`` variables,
    ``GLIBC_TUNABLES``), and off glibc.
    """
    global _heap_bound
    if _heap_bound is not None:
        return _heap_bound
    _heap_bound = False
    chosen = any(name.startswith("MALLOC_") for name in os.environ) or "glibc.malloc" in (
        os.environ.get("GLIBC_TUNABLES") or ""
    )
    if not chosen and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL("libc.so.6")
            _heap_bound = bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    return _heap_bound


def give_back_memory(*, collect: bool = True) -> None:
    """Collect garbage (unless ``collect`` is False) and ask glibc to return its free
    heap to the system.

    Without ``malloc_trim`` the pages an ONNX session freed stay in the process's
    heap (and in its RSS) for the next allocation; a no-op off glibc.  pyarrow's
    allocator (mimalloc or jemalloc, which DuckDB's Arrow results go through) is
    asked to return what it keeps free too, when pyarrow is loaded.  A full
    collection walks every object of the process (50 ms in a test process, more in
    a long notebook kernel): worth it when a model is dropped, not when a store's
    indexes are, which reference counting frees at once.
    """
    if collect:
        gc.collect()
    arrow = sys.modules.get("pyarrow")
    if arrow is not None:
        with contextlib.suppress(Exception):
            arrow.default_memory_pool().release_unused()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6").malloc_trim(0)


@dataclass(eq=False)
class SharedModel:
    """A loaded model and what its users read from it.

    ``model`` is fastembed's ``TextEmbedding``; ``tokenizer`` is the one it embeds
    with (truncating at ``window`` word-pieces, special tokens included);
    ``counter`` is a copy that neither truncates nor pads (for counting and spans).
    """

    key: Hashable
    model: Any
    tokenizer: Any
    counter: Any
    #: word-pieces the model reads, special tokens included (None: no limit known)
    window: int | None
    #: special tokens the tokenizer adds to every text ([CLS] and [SEP]: 2)
    special_tokens: int
    #: resident memory the load added, in MiB, measured around it (None off Linux).
    #: Approximate: another thread allocating during the load counts too.
    load_mb: float | None
    #: on-disk size of the ONNX model file(s), in MiB (None when not found)
    file_mb: float | None
    #: a copy of ``tokenizer`` that truncates as it does but pads nothing: the true
    #: length of each text, for cutting batches by tokens
    cutter: Any = None
    #: the ONNX session's threads ($NBMEMORY_MODEL_THREADS; None: one per core)
    threads: int | None = None
    users: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def max_tokens(self) -> int | None:
        """Word-pieces of a text the vector sees: the window less the special tokens."""
        return None if self.window is None else self.window - self.special_tokens


_POOL: dict[Hashable, SharedModel] = {}
_POOL_LOCK = threading.Lock()
_LOAD_LOCKS: dict[Hashable, threading.Lock] = {}


def acquire(key: Hashable, load: Callable[[], SharedModel]) -> SharedModel:
    """The pool's model for ``key`` (``load()`` makes it the first time), one user more.

    Loads of one key are serialised (the second caller waits and shares the first's
    model); loads of different keys run side by side.
    """
    with _POOL_LOCK:
        load_lock = _LOAD_LOCKS.setdefault(key, threading.Lock())
    with load_lock:
        with _POOL_LOCK:
            shared = _POOL.get(key)
            if shared is not None:
                shared.users += 1
                return shared
        bound_heap_growth()
        shared = load()
        shared.key = key
        with _POOL_LOCK:
            shared.users += 1
            _POOL[key] = shared
        return shared


def release(shared: SharedModel) -> None:
    """One user less; the last one out drops the model and returns its memory."""
    with _POOL_LOCK:
        shared.users = max(0, shared.users - 1)
        if shared.users:
            return
        if _POOL.get(shared.key) is shared:
            del _POOL[shared.key]
    shared.model = shared.tokenizer = shared.counter = shared.cutter = None
    give_back_memory()


def pooled() -> dict[Hashable, int]:
    """Key -> users of every model loaded in this process (for tests and status)."""
    with _POOL_LOCK:
        return {key: shared.users for key, shared in _POOL.items()}


def file_size_mb(model_dir: str | os.PathLike[str] | None) -> float | None:
    """Size of the ``.onnx`` files (and their external data) under ``model_dir``, MiB."""
    if model_dir is None:
        return None
    total = 0
    with contextlib.suppress(OSError):
        for path in Path(model_dir).rglob("*"):
            if path.is_file() and (path.suffix in {".onnx", ".onnx_data"} or "onnx" in path.name):
                total += path.stat().st_size
    return total / 2**20 if total else None
