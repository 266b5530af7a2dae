"""Options every command that opens a store shares."""

from __future__ import annotations

import argparse


def store_options(
    parser: argparse.ArgumentParser, *, default_store: str = "$NBMEMORY_PATH or ./nbmemory.duckdb"
) -> None:
    """``--store`` and ``--embedder``."""
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
