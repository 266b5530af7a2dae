"""Options every command that opens a store shares, and what a refusal says in the
command line's words."""

from __future__ import annotations

import argparse

from ..errors import StoreLocked

#: What to do about a store another process holds, in the command line's words
#: (:class:`~nbmemory.errors.StoreLocked` says it in Python's, the magics in theirs).
LOCKED_ADVICE = (
    "close the other process (its Memory, or its kernel), or open every process on the "
    "file shared: here --shared (or NBMEMORY_SHARED=1), in Python Memory(path, shared=True), "
    "in a notebook %config MemoryMagics.shared = True; or pass another --store."
)
#: The same, for a command that has no ``--shared`` (it copies a file no one may use meanwhile).
LOCKED_ADVICE_ALONE = "close the other process (its Memory, or its kernel), then run this again."


def store_options(
    parser: argparse.ArgumentParser, *, default_store: str = "$NBMEMORY_PATH or ./nbmemory.duckdb"
) -> None:
    """``--store``, ``--embedder`` and ``--shared``/``--no-shared``."""
    parser.add_argument(
        "--store",
        default=None,
        help=f"store file, or a ducklake: URL (default: {default_store})",
    )
    parser.add_argument(
        "--embedder",
        default=None,
        help="embedding model: default all-MiniLM-L6-v2 via fastembed; 'hash' for offline tests",
    )
    parser.add_argument(
        "--shared",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="take turns on the file with the other processes that opened it shared "
        "(kernels with Memory(path, shared=True)), instead of holding it alone "
        "(default: $NBMEMORY_SHARED, else alone)",
    )


def in_cli_words(exc: BaseException, args: argparse.Namespace | None = None) -> str:
    """The message of an error nbmemory raised, with a held store's remedies named as
    this command line has them (``--shared`` where the command takes it)."""
    if isinstance(exc, StoreLocked):
        has_shared = args is not None and hasattr(args, "shared")
        return exc.explain(LOCKED_ADVICE if has_shared else LOCKED_ADVICE_ALONE)
    return str(exc)
