"""The exceptions nbmemory raises.  Each message says what went wrong and what to do next.

The notebook layer turns every :class:`NbMemoryError` into a one-line ``UsageError``;
the CLI turns it into a non-zero exit with the message.
"""

from __future__ import annotations


class NbMemoryError(Exception):
    """Base class of every error nbmemory raises on purpose."""


class InvalidInput(NbMemoryError, ValueError):
    """An argument was refused before anything was stored."""


class MemoryNotFound(NbMemoryError, KeyError):
    """No memory (event) with that id in this namespace."""

    def __init__(self, memory_id: str, namespace: str | None = None) -> None:
        where = f" in namespace {namespace!r}" if namespace else ""
        super().__init__(f"no memory with id {memory_id!r}{where}")
        self.memory_id = memory_id

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class StoreError(NbMemoryError):
    """The store file cannot be opened or used."""


class DiskFull(StoreError):
    """The disk holding the store is full; nothing of the call was stored."""

    #: Once space is freed, the same call succeeds (the store reopens by itself).
    retryable = True

    def __init__(self, path: str) -> None:
        super().__init__(
            f"the disk holding the store {path} is full; nothing of this call was stored. "
            "Free some space and call again: the store reopens by itself."
        )
        self.path = path


class StoreDamaged(StoreError):
    """The store file is truncated or corrupt."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(
            f"the store {path} is damaged ({detail}). Keep a copy of it, then restore into "
            "a new file from an export (nbmemory state import --store NEW --input EXPORT) "
            "or from a backup copy of the file."
        )
        self.path = path


class StoreLocked(StoreError):
    """Another process holds the DuckDB file open for writing."""

    #: Waiting and trying again can succeed (background writers do).
    retryable = True

    def __init__(self, path: str, pid: int | None = None, holder: str | None = None) -> None:
        who = f"process {pid}" if pid else "another process"
        if holder:
            who += f" ({holder})"
        super().__init__(
            f"the store {path} is in use by {who}. DuckDB lets one process write a file: "
            "close the other kernel or its Memory (mem.close()), open every kernel with "
            "Memory(path, shared=True), or use another path."
        )
        self.path = path
        self.pid = pid


class SessionNotFound(NbMemoryError, KeyError):
    """No usable session with that id in the namespace (never created, deleted or expired)."""

    def __init__(self, session_id: str, namespace: str, why: str = "not found") -> None:
        super().__init__(
            f"session {session_id!r} {why} in namespace {namespace!r}; "
            "list sessions with mem.sessions() (or `nbmemory state list`) "
            "or start a new one with mem.start_session()"
        )
        self.session_id = session_id
        self.namespace = namespace

    def __str__(self) -> str:
        return str(self.args[0])


class EmbedderError(NbMemoryError):
    """The embedding model could not be loaded or failed as a whole."""
