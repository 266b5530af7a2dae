"""The transaction beside the caller's: the embedding worker's cursor and its state.

:meth:`Store.beside <.connection.Store.beside>` runs the worker's vector writes
as one transaction on a cursor of their own, while the caller's appends go on
(see there for why that is safe).  This object keeps that transaction's state
apart from the store's own: the cursor (made on first use), the thread in it and
the change record its commit announces.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

import duckdb

from .changes import Change


class Side:
    """The cursor of the transaction beside, who is in it, and what it changed."""

    def __init__(self) -> None:
        self.cursor: duckdb.DuckDBPyConnection | None = None
        #: The thread in the transaction beside (None: none is open).
        self.owner: int | None = None
        self.pending: Change | None = None

    def here(self) -> bool:
        """Whether the current thread is in the transaction beside."""
        return self.owner is not None and self.owner == threading.get_ident()

    def begin(
        self, make_cursor: Callable[[], duckdb.DuckDBPyConnection]
    ) -> tuple[duckdb.DuckDBPyConnection, Change]:
        """Open the transaction (its cursor made by ``make_cursor`` on first use)."""
        try:
            if self.cursor is None:
                self.cursor = make_cursor()
            self.cursor.execute("BEGIN TRANSACTION")
        except duckdb.Error:
            self.drop()
            raise
        change = Change()
        self.owner, self.pending = threading.get_ident(), change
        return self.cursor, change

    def end(self, cursor: duckdb.DuckDBPyConnection, verb: str) -> Change:
        """COMMIT or ROLLBACK the transaction on ``cursor`` (a ROLLBACK of one already
        ended does nothing); returns what it changed."""
        pending, self.pending = self.pending or Change(), None
        self.owner = None
        try:
            cursor.execute(verb)
        except duckdb.Error:
            if verb == "COMMIT":
                with contextlib.suppress(duckdb.Error):
                    cursor.execute("ROLLBACK")
                raise
        return pending

    def drop(self) -> None:
        """Close the cursor (its connection is going or gone)."""
        cursor, self.cursor = self.cursor, None
        if cursor is not None:
            with contextlib.suppress(duckdb.Error):
                cursor.close()
