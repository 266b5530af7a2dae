"""The exceptions nbmemory raises.  Each message says what went wrong and what to do next.

The notebook layer turns every :class:`NbMemoryError` into a one-line ``UsageError``;
the CLI turns it into a non-zero exit with the message.
"""

from __future__ import annotations

from typing import Any


class NbMemoryError(Exception):
    """Base class of every error nbmemory raises on purpose."""


class InvalidInput(NbMemoryError, ValueError):
    """An argument was refused before anything was stored."""


class NotFound(NbMemoryError, KeyError):
    """No item of a kind (memory, session, fact, task, macro) with that id.

    The base of every missing-id error, so ``except nbmemory.NotFound`` (or
    ``except KeyError``) catches a missing memory, session, fact, task or macro
    alike.  ``kind`` names the kind, ``id`` the id asked for (a fact's is
    ``(category, key)``), ``namespace`` where it was looked for; the message says
    all three and where to look for what exists.  Nothing was changed.

    >>> exc = FactNotFound(("user", "language"), "default")
    >>> isinstance(exc, KeyError), exc.kind
    (True, 'fact')
    >>> str(exc)
    "no fact 'user'/'language' in namespace 'default'; see mem.facts.list() for what exists"
    """

    #: What is missing, in one word (the subclasses set it).
    kind = "item"
    #: Where to look for what exists (the subclasses set it).
    hint = ""

    def __init__(self, id: Any, namespace: str | None = None) -> None:
        self.id = id
        self.namespace = namespace
        super().__init__(self._message())

    def _message(self) -> str:
        where = f" in namespace {self.namespace!r}" if self.namespace else ""
        hint = f"; {self.hint}" if self.hint else ""
        return f"no {self.kind} with id {self.id!r}{where}{hint}"

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])

    def __reduce__(self) -> tuple[Any, ...]:  # pickled with what it was made from
        return (_rebuild, (type(self), dict(self.__dict__), self.args))


def _rebuild(cls: type[NotFound], state: dict[str, Any], args: tuple[Any, ...]) -> NotFound:
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class MemoryNotFound(NotFound):
    """No memory (event) with that id in this namespace."""

    kind = "memory"

    def __init__(self, memory_id: str, namespace: str | None = None) -> None:
        self.memory_id = memory_id
        super().__init__(memory_id, namespace)


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


class WriteConflict(StoreError):
    """Another writer of a lake changed the same table at once; nothing was stored.

    ``Memory`` runs such a call again by itself (a few times, with a pause); the
    error reaches the caller only when the conflicts go on.
    """

    retryable = True


class StoreDamaged(StoreError):
    """The store file is truncated or corrupt."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(
            f"the store {path} is damaged ({detail}). Keep a copy of it, then restore into "
            "a new file from an export (nbmemory state import --store NEW --input EXPORT) "
            "or from a backup copy of the file."
        )
        self.path = path


class WalNotReplayable(StoreError):
    """This DuckDB cannot replay the store's write-ahead log; a newer one can.

    DuckDB 1.x fails on a log holding an ``ALTER TABLE`` of a table whose column
    defaults to a sequence (an INTERNAL error about the default database), which a
    store made by nbmemory before 2026-12-04 and killed before its first checkpoint
    holds.  DuckDB 2.0 replays it; nothing is lost as long as the ``.wal`` stays.
    """

    def __init__(self, path: str, version: str, detail: str) -> None:
        super().__init__(
            f"the store {path} has writes in its log ({path}.wal) that duckdb {version} "
            f"cannot replay ({detail}); nothing was changed or lost. Keep the .wal file, "
            "open the store once with duckdb 2.0 or newer (in another venv: pip install "
            "'duckdb>=2.0' && python -c \"import duckdb; duckdb.connect(PATH).close()\"), "
            "which replays the log into the file; then this version opens it."
        )
        self.path = path


class StoreLocked(StoreError):
    """Another process holds the store file: opened for writing, or in shared use
    (``shared=True``) while this opener was not shared, or the other way round.

    The message names the store and the holder, then says what to do in the words
    of the Python API (:attr:`ADVICE`).  A surface with its own words for the same
    remedies (the notebook magics) rewords it with :meth:`explain`:

    >>> exc = StoreLocked("agent.duckdb", 4242)
    >>> "mem.close()" in str(exc)
    True
    >>> exc.explain("run %memory close in the other kernel.")
    'the store agent.duckdb is in use by process 4242. DuckDB lets one process write a file: run %memory close in the other kernel.'
    """

    #: Waiting and trying again can succeed (background writers do).
    retryable = True

    #: What to do next, in the words of the Python API.
    ADVICE = (
        "close the other kernel or its Memory (mem.close()), open every kernel with "
        "Memory(path, shared=True), or use another path."
    )

    def __init__(
        self,
        path: str,
        pid: int | None = None,
        holder: str | None = None,
        *,
        shared: bool = False,
        waited: float | None = None,
    ) -> None:
        self.path = path
        self.pid = pid
        self.holder = holder
        #: Whether the holder uses the store in shared mode (this opener did not).
        self.shared = shared
        #: Seconds a shared opener waited for its turn while other shared processes
        #: kept the store (None: refused at once, for a mode that does not fit).
        self.waited = waited
        super().__init__(self.explain(self.ADVICE))

    def explain(self, advice: str) -> str:
        """The message of this refusal with another ``advice`` (what to do next); a
        shared opener that waited out its turn is told to wait, whatever ``advice``."""
        if self.waited is not None:
            return (
                f"the store {self.path} is in shared use, kept busy by other processes "
                f"for over {self.waited:g} s while this call waited for its turn; nothing "
                "of this call was stored: try again once they are done, or give turns "
                "longer with $NBMEMORY_LOCK_TIMEOUT (seconds)"
            )
        who = f"process {self.pid}" if self.pid else "another process"
        if self.holder:
            who += f" ({self.holder})"
        if self.shared:
            return (
                f"the store {self.path} is in shared use by {who}. "
                f"Every process on a store in shared use opens it shared: {advice}"
            )
        return (
            f"the store {self.path} is in use by {who}. "
            f"DuckDB lets one process write a file: {advice}"
        )


class SessionNotFound(NotFound):
    """No usable session with that id in the namespace (never created, deleted, expired,
    or closed: then the message says to pass ``reopen=True``)."""

    kind = "session"
    hint = (
        "list sessions with mem.sessions.list() (or `nbmemory state list`) "
        "or start a new one with mem.sessions.start()"
    )

    def __init__(
        self, session_id: str, namespace: str, why: str = "not found", hint: str | None = None
    ) -> None:
        self.session_id = session_id
        self.why = why
        if hint is not None:  # what to do about this miss, instead of the general hint
            self.hint = hint
        super().__init__(session_id, namespace)

    def _message(self) -> str:
        return f"session {self.id!r} {self.why} in namespace {self.namespace!r}; {self.hint}"


class FactNotFound(NotFound, InvalidInput):
    """No fact under that ``(category, key)`` in the namespace.

    Also an :class:`InvalidInput`, what a missing fact raised before
    ``NotFound`` existed, so older ``except InvalidInput`` code still catches it.
    """

    kind = "fact"
    hint = "see mem.facts.list() for what exists"

    def _message(self) -> str:
        category, key = self.id
        return f"no fact {category!r}/{key!r} in namespace {self.namespace!r}; {self.hint}"


class TaskNotFound(NotFound, InvalidInput):
    """No scheduled task with that id in the namespace (also an :class:`InvalidInput`,
    as before ``NotFound`` existed)."""

    kind = "scheduled task"
    hint = "see mem.tasks.list()"


class MacroNotFound(NotFound, InvalidInput):
    """No macro with that id in the namespace (also an :class:`InvalidInput`, as before
    ``NotFound`` existed)."""

    kind = "macro"
    hint = "see mem.macros.list()"


class EmbedderError(NbMemoryError):
    """The embedding model could not be loaded or failed as a whole."""


class RerankerError(NbMemoryError):
    """The reranker given to a Memory failed, or answered with unusable scores.

    Raised by the search or context that asked it; nothing was stored.
    """


class ModelUnavailable(EmbedderError):
    """The model cannot be loaded (no local copy, no network, a broken folder).

    No text can be embedded until it loads: the worker leaves the texts pending (no
    ``embedding_error``) and ``flush()`` raises this.  The failure is remembered for
    the process, per model name, ``$NBMEMORY_MODEL_PATH`` (or ``model_path``) and
    fastembed cache folder, so each later call fails at once instead of trying
    again; changing one of them tries again (:func:`nbmemory.retrieval.embedders.forget_failed_loads` too).

    The message says why, then what to do in the words of the Python API (and the
    command line's, since ``nbmemory demo`` prints it as it is): :attr:`ADVICE`.  A
    surface with its own words for the same remedies rewords it with :meth:`explain`:

    >>> exc = ModelUnavailable("m", "NBMEMORY_MODEL_PATH=/nope is not a directory")
    >>> exc.explain("add --embedder hash.")
    'could not load the embedding model m: NBMEMORY_MODEL_PATH=/nope is not a directory. add --embedder hash.'
    """

    #: What to do next, in the words of the Python API (and of the command line).
    ADVICE = (
        "Set NBMEMORY_MODEL_PATH to a local copy of the model (a folder holding model.onnx and "
        'tokenizer.json), or use the offline test embedder: embedder="hash" in Python, '
        "--embedder hash on the command line."
    )

    def __init__(self, model: str, reason: str, advice: str | None = None) -> None:
        self.model = model
        #: Why, on one line, without the advice (``%memory status`` shows it).
        self.reason = " ".join(str(reason).split())[:400]
        #: What to do when it is not the usual (a bad ``NBMEMORY_MODEL_THREADS``: no
        #: local copy of the model would help); None: :attr:`ADVICE`.
        self.advice = advice
        super().__init__(self.explain(advice or self.ADVICE))

    def explain(self, advice: str) -> str:
        """The message of this failure with another ``advice`` (what to do next)."""
        return f"could not load the embedding model {self.model}: {self.reason}. {advice}"

    def remedy(self, usual: str) -> str:
        """The message in a surface's words: ``usual`` (its way of saying :attr:`ADVICE`)
        unless this failure has an advice of its own, which every surface gives as is."""
        return self.explain(self.advice or usual)


class LargeStoreWarning(UserWarning):
    """A store's in-memory vector index needs more than half of this machine's memory.

    Search still works, exactly, but the matrix pages to disk (or the process runs
    out of memory) long before it answers fast.  Raised as a warning, once per index.
    """
