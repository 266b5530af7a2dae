"""The lake's errors as one line that says what to fix (the password never shown)."""

from __future__ import annotations

import re

import duckdb

from ...errors import StoreError, WriteConflict
from .url import LakeUrl


def is_missing(exc: duckdb.Error) -> bool:
    """Whether ATTACH failed because the lake's catalog does not exist yet."""
    low = str(exc).lower()
    return "existing ducklake" in low and "does not exist" in low


def translate(exc: duckdb.Error, address: LakeUrl, *, runtime: bool = False) -> StoreError | None:
    """DuckDB's error about the lake as one line that says what to fix (the password
    never shown); None, at run time, for errors that are not about the lake itself."""
    text = str(exc)
    low = text.lower()
    first = text.strip().splitlines()[0][:160] if text.strip() else type(exc).__name__
    first = first.replace(address.attach[len("ducklake:postgres:") :], address.shown)
    if "password authentication failed" in low or "no password supplied" in low:
        return StoreError(
            f"the lake's catalog refused the login ({address.shown}): check user and "
            "password (password=... in the address, or $PGPASSWORD)"
        )
    if (
        "connection refused" in low
        or "could not connect" in low
        or "unable to connect" in low
        or "server closed the connection" in low
        or "no connection to the server" in low
        or "terminating connection" in low
    ):
        during = " Nothing of this call was stored: call again once it is back" if runtime else ""
        return StoreError(
            f"cannot reach the lake's catalog ({address.shown}): is PostgreSQL running and "
            f"listening there?{during}"
        )
    if is_missing(exc):
        return StoreError(
            f"there is no lake at {address.shown} yet: check dbname and metadata_schema, or "
            "open it once for writing (Memory(url, data_path=...)) to make it"
        )
    if "database" in low and "does not exist" in low:
        return StoreError(
            f"the catalog database of {address.shown} does not exist: create it "
            "(createdb) or name another one"
        )
    if (
        runtime
        and isinstance(exc, duckdb.IOException)
        and ("no such file" in low or "no files found" in low)
        and (".parquet" in low or bool(address.data_path and address.data_path in text))
    ):
        missing = re.search(r'"([^"]+)"', text)
        return WriteConflict(
            f"a data file of the lake {address.shown} is missing "
            f"({missing.group(1) if missing else first}): a purge or a compaction deleted it "
            "while this call read it; nothing of this call was stored: call again (if it "
            "stays missing, the data path was damaged: restore the file from a backup)"
        )
    if isinstance(exc, duckdb.IOException) and (
        "permission denied" in low or "no space left" in low or "read-only file system" in low
    ):
        return StoreError(
            f"the lake's data path cannot be written ({first}); nothing of this call was "
            "stored: make the folder writable or free space, then call again"
        )
    if runtime:
        return None
    return StoreError(f"cannot open the lake {address.shown}: {first}")
