"""nbmemory: a memory layer for AI agents that lives in the notebook.

``from nbmemory import Memory`` gives the engine; ``%load_ext nbmemory`` gives the
magics.  Importing the package registers nothing with IPython.
"""

from __future__ import annotations

from typing import Any

from .config import Settings
from .errors import (
    EmbedderError,
    FactNotFound,
    InvalidInput,
    MacroNotFound,
    MemoryNotFound,
    ModelUnavailable,
    NbMemoryError,
    NotFound,
    RerankerError,
    SessionNotFound,
    StoreError,
    StoreLocked,
    TaskNotFound,
)
from .event_rows import Event
from .memory import Memory
from .retrieval import Context, ContextItem
from .version import __version__

__all__ = [
    "Context",
    "ContextItem",
    "EmbedderError",
    "Event",
    "FactNotFound",
    "InvalidInput",
    "MacroNotFound",
    "Memory",
    "MemoryNotFound",
    "ModelUnavailable",
    "NbMemoryError",
    "NotFound",
    "RerankerError",
    "SessionNotFound",
    "Settings",
    "StoreError",
    "StoreLocked",
    "TaskNotFound",
    "__version__",
    "load_ipython_extension",
    "unload_ipython_extension",
]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext nbmemory``: register the magics (imported lazily, IPython only here)."""
    from .notebook.magics import load_ipython_extension as _load

    _load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext nbmemory``: remove the magics and restore IPython's ``%recall``."""
    from .notebook.magics import unload_ipython_extension as _unload

    _unload(ipython)
