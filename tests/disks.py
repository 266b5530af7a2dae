"""Real small file systems for the tests that fill a disk."""

from __future__ import annotations

from pathlib import Path


def fill(folder: Path) -> Path:
    """Fill the file system with one file until it is full.  Unbuffered, so
    closing the file has nothing left to write (a buffered close raised ENOSPC)."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as handle:
        try:
            while handle.write(b"\0" * 65536):
                pass
        except OSError:
            pass
    return filler
