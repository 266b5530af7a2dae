"""Replacing a text file at once: a crash or an error leaves the old file or the new one.

The one way nbmemory rewrites a user's file (AGENTS.md learnings, the IPython profile's
config, ``nbmemory.toml``): written beside it under a temporary name, given the old
file's permissions, then renamed over it (``os.replace`` is atomic on one filesystem);
the temporary file is removed if anything fails.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import InvalidInput


def write_text_atomically(path: Path, text: str) -> None:
    """Replace ``path`` (created with its folder if missing) by ``text``, UTF-8.

    A folder that cannot be made or written (a missing mount, a file in the way) is
    one :class:`InvalidInput` naming the path, not the ``OSError`` of the step that
    failed: the command line and the magics print it in one line.
    """
    try:
        _write(path, text)
    except OSError as exc:
        raise InvalidInput(
            f"cannot write {path}: {exc.strerror or exc}; pass a path in a folder you can write"
        ) from None


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        if path.exists():
            os.chmod(temporary, path.stat().st_mode & 0o777)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
