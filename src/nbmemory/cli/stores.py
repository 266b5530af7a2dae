"""The store a command works on: opened with the command's options, and removed again
when the command made it and then failed.

A command that fails must not leave a new store behind: the next run would find a
half-made store (``demo`` said "already in this store: nothing added"; a failed
``state import`` left an empty store where there was none).  Commands check what
they can before opening (the model loads, the input file reads); for the rest,
:func:`opened` removes what the command created — the store file, its WAL, its
saved indexes and its lock files — when the command fails.  A store that existed
before the command is never removed, nor one that another process has open or has
written meanwhile (in shared mode another process may have joined the new file):
the removal holds the file as its only opener (:func:`nbmemory.store.openers.claim`)
and checks that nothing but this command wrote it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

from ..config import default_store_path
from ..errors import InvalidInput, StoreLocked
from ..memory import Memory
from ..retrieval.index_cache import SUFFIX as INDEX_SUFFIX
from ..store import SharedStore, is_lake_url, openers
from ..validation import store_address

#: What a store file brings beside it (the openers' sidecar goes by itself).
COMPANIONS = (".wal", INDEX_SUFFIX, ".nbmemory-lock", ".nbmemory-lock.tickets")


def store_path(args: argparse.Namespace, default: str | None = None) -> str:
    """``--store``, else ``default``, else ``$NBMEMORY_PATH`` or ``./nbmemory.duckdb``, with
    a leading ``~`` expanded (:func:`~nbmemory.validation.store_address`): the command's
    own checks of the path, and its removal of a store it made, look where DuckDB opens."""
    return store_address(args.store or default or default_store_path())


def check_shared(args: argparse.Namespace, path: str) -> None:
    """Refuse ``--shared`` on a store in memory (nothing to share), before any work."""
    if getattr(args, "shared", None) and path == ":memory:":
        raise InvalidInput(
            "--shared needs a store file: pass --store PATH (a store in memory is this "
            "command's alone)"
        )


@contextlib.contextmanager
def opened(
    args: argparse.Namespace,
    path: str,
    *,
    must_exist: bool = False,
    read_only: bool = False,
    **memory: Any,
) -> Iterator[Memory]:
    """The store at ``path`` as the command's options say (``--embedder``, ``--shared``),
    closed when the block ends; if the block fails and the command made the store, the
    store is removed (see the module doc).

    ``must_exist``: refuse a path with no store (commands that change a store).
    """
    check_shared(args, path)
    shared = getattr(args, "shared", None)
    is_file = path != ":memory:" and not is_lake_url(path)
    if must_exist and is_file and not os.path.exists(path):
        raise InvalidInput(
            f"no store at {path}; pass --store PATH or set NBMEMORY_PATH to an nbmemory file"
        )
    before = _present(path) if is_file else None
    new = before is not None and "" not in before
    if getattr(args, "embedder", None) is not None:
        memory.setdefault("embedder", args.embedder)
    # a command does what it says: no cleanup runs by itself at open (a --dry-run
    # would find nothing left to list); `state cleanup` is the command for it
    if "settings" not in memory:
        memory.setdefault("upkeep", False)
    try:
        mem = Memory(path, read_only=read_only, shared=shared, actor="cli", **memory)
    except StoreLocked:
        raise  # another process has the file (it may have made it): nothing of ours
    except BaseException:
        if new:
            _remove_made(path, before or set(), None)
        raise
    try:
        yield mem
    except BrokenPipeError:  # the reader of our output went away: the work is done
        mem.close()
        raise
    except BaseException:
        if new:
            _remove_made(path, before or set(), mem)
        else:
            mem.close()
        raise
    mem.close()


def _present(path: str) -> set[str]:
    """Which of the store and its companions exist ("" is the store itself)."""
    return {part for part in ("", *COMPANIONS) if os.path.lexists(path + part)}


def _remove_made(path: str, before: set[str], mem: Memory | None) -> None:
    """Remove what this command made at ``path``: as the file's only opener, and only
    if no other process wrote it; otherwise keep it and say why on stderr."""
    try:
        with openers.claim(path):
            if mem is not None:
                with contextlib.suppress(Exception):  # the command's own error is the news
                    mem.close()
                if isinstance(mem.store, SharedStore) and mem.store.written_elsewhere():
                    _kept(path, "another process wrote to it meanwhile")
                    return
            for part in ("", *COMPANIONS):
                target = path + part
                if part in before or not os.path.lexists(target):
                    continue
                with contextlib.suppress(OSError):
                    if os.path.isdir(target) and not os.path.islink(target):
                        shutil.rmtree(target)
                    else:
                        os.remove(target)
    except StoreLocked:
        if mem is not None:
            with contextlib.suppress(Exception):
                mem.close()
        _kept(path, "another process has it open")


def _kept(path: str, why: str) -> None:
    print(f"nbmemory: note: kept the new store {path}: {why}", file=sys.stderr)
