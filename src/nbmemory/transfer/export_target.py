"""Where an export may be written: a new file or a previous export of ours; any other
file only when the caller says ``overwrite=True``; a database, the store's own file or
its companions never.

An export is written beside its target and renamed over it, so it replaces whatever is
at the path.  Aimed at the open store's file it replaced the live database with JSON
(every later write of that process went to the unlinked file, lost at close); aimed at
a CSV or another application's database it destroyed it without a word.  A user of
pandas or DuckDB expects ``to_json`` / ``COPY ... TO`` to replace an earlier output of
the same kind, not a file of another kind they named by mistake: so a previous export
is replaced, any other existing file needs ``overwrite=True``, and a database -- by
its first bytes, or a name such as ``.duckdb`` / ``.sqlite`` -- is refused always.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from ..core import Core
from ..errors import InvalidInput
from ..file_kinds import HEAD_BYTES, database_kind, named_like_database
from ..store.files import NEW_SUFFIX, REWRITE_SUFFIX, read_span
from ..validation import shown

#: How every export file starts (``json_files`` writes ``format`` first, since version 1).
_EXPORT_HEAD = re.compile(r'\A\s*\{\s*"format"\s*:\s*"nbmemory\.export"')


def check_export_target(core: Core, target: Path, *, overwrite: bool) -> None:
    """Refuse, with a one-line :class:`InvalidInput` and before anything is written, a
    target an export must not replace (see the module's docstring)."""
    name = str(target)
    if _store_file(core, target):
        raise InvalidInput(
            f"{name} is this store's own file; nothing was written. "
            "Pass another file name for the export, such as export.json"
        )
    if target.is_dir():
        raise InvalidInput(f"{name} is a folder; pass a file name for the export (export.json)")
    exists = os.path.lexists(target)
    head = read_span(target, 0, HEAD_BYTES) if exists else None
    kind = database_kind(head)
    if kind is not None or named_like_database(target):
        what = f"a {kind} database" if kind else "named like a database"
        raise InvalidInput(
            f"{name} is {what}, and an export never replaces one; nothing was written. "
            "Pass a file name ending in .json"
        )
    if not exists or (
        head is not None
        and (not head.strip() or _EXPORT_HEAD.match(head.decode("utf-8", "replace")))
    ):
        return  # a new (or empty) file, or an earlier export: replaced
    if not overwrite:
        raise InvalidInput(
            f"{name} exists and is not an nbmemory export; nothing was written. "
            "Pass a new file name, or overwrite=True (--force) to replace it"
        )


def _store_file(core: Core, target: Path) -> bool:
    """Whether ``target`` is the store's file, its WAL or a copy a creation or a purge
    makes beside it (a lake's catalog is a database: refused as one)."""
    path = core.store.path
    if core.store.backend != "file" or path == ":memory:":
        return False
    store = os.path.realpath(path)
    wanted = os.path.realpath(target)
    if wanted in (store, store + ".wal") or wanted.startswith(
        (store + NEW_SUFFIX, store + REWRITE_SUFFIX)
    ):
        return True
    try:
        return os.path.samefile(store, wanted)  # a hard link to the store
    except OSError:
        return False


def write_export(target: Path, document: dict[str, Any]) -> None:
    """Write ``document`` as JSON beside ``target``, then rename it over ``target``: a
    crash or an error leaves the old file or the whole new one."""
    handle, temp = tempfile.mkstemp(prefix=".nbmemory-export-", dir=target.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(document, stream, ensure_ascii=False, allow_nan=False, indent=1)
            stream.write("\n")
        os.replace(temp, target)
    except BaseException as exc:
        Path(temp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise InvalidInput(f"cannot write {shown(str(target))}: {exc.strerror}") from None
        raise
