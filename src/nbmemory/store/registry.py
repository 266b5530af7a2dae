"""Which backend opens an address: a table from address prefix to backend.

``open_store`` asks :func:`backend_for` first: an address that starts with a
registered prefix (case and leading spaces ignored) is opened by that backend's
opener, called as ``opener(path, read_only=..., **options)``.  Any other address
is a DuckDB file (:class:`~.connection.Store`, or :class:`~.shared.SharedStore`
when shared).  An opener may be given as ``"module:attribute"``: it is imported
only when an address of its kind is opened, so a backend's dependencies (the
lake's extensions) cost nothing to the others, and this package never imports a
backend's package at import time.

Adding a backend is one module with its store class and one call of
:func:`register_backend` (see :mod:`.backend` for the contract).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

#: An opener: ``opener(path, read_only=..., **options)`` -> a store.
Opener = Callable[..., Any]

_OPENERS: dict[str, Opener | str] = {
    "ducklake:": "nbmemory.store.lake.store:LakeStore",
}


def register_backend(prefix: str, opener: Opener | str) -> None:
    """Open addresses starting with ``prefix`` (e.g. ``"toy:"``) with ``opener``
    (a callable or ``"module:attribute"``); registering a prefix again replaces it."""
    if not prefix or not prefix.endswith(":"):
        raise ValueError(f"a backend's prefix ends with ':' (like 'ducklake:'), not {prefix!r}")
    _OPENERS[prefix.lower()] = opener


def unregister_backend(prefix: str) -> None:
    """Forget the backend of ``prefix`` (tests register toy backends for a while)."""
    _OPENERS.pop(prefix.lower(), None)


def backend_prefix(path: object) -> str | None:
    """The registered prefix ``path`` starts with, or None (a DuckDB file)."""
    if not isinstance(path, str):
        return None
    head = path.strip().lower()
    return next((prefix for prefix in _OPENERS if head.startswith(prefix)), None)


def backend_for(path: object) -> Opener | None:
    """The opener of the backend ``path`` names, or None for a DuckDB file."""
    prefix = backend_prefix(path)
    if prefix is None:
        return None
    opener = _OPENERS[prefix]
    if isinstance(opener, str):
        module, _, name = opener.partition(":")
        resolved: Opener = getattr(importlib.import_module(module), name)
        return resolved
    return opener
