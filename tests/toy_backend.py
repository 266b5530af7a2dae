"""A toy backend: nbmemory's tables in an in-memory DuckDB of this process, no file.

The whole backend is this module (issue 35's check that the backend contract,
``nbmemory.store.backend``, is all a new backend implements): a ``Store`` whose
connection is a fresh in-memory DuckDB, and one registration that makes
``Memory("toy:<name>")`` open it.  Everything else — migrations, table objects,
``RETURNING`` statements, transactions, the change feed of its caches — is the
store's own.
"""

from __future__ import annotations

import duckdb

from nbmemory.store import Store, register_backend

PREFIX = "toy:"


class ToyStore(Store):
    """A store in an in-memory DuckDB: gone when it closes."""

    backend = "toy"

    def _connect(self) -> duckdb.DuckDBPyConnection:
        return duckdb.connect(":memory:")


def register() -> None:
    """Open ``toy:`` addresses with :class:`ToyStore`."""
    register_backend(PREFIX, ToyStore)
