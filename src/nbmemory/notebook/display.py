"""What the magics return: rich results that display well in a notebook and as text."""

from __future__ import annotations

import html
from typing import Any

import pandas as pd

from ..events import Event


class RememberedEvent(Event):
    """The :class:`~nbmemory.Event` ``%%remember`` returns; it displays as one line."""

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.summary())

    def _repr_html_(self) -> str:
        return f"<samp>{html.escape(self.summary())}</samp>"


class MemoryStatus:
    """What ``%memory status`` returns: :meth:`Memory.status` with a readable display."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.info = info

    def __getitem__(self, key: str) -> Any:
        return self.info[key]

    def to_frame(self) -> pd.DataFrame:
        """Counts per namespace, session and kind (events, embedded, pending, failed)."""
        return self.info["counts"]

    def summary(self) -> str:
        i = self.info
        return (
            f"{i['path']} · namespace {i['namespace']!r} · model {i['model']} · "
            f"{i['events']} events ({i['embedded']} embedded, {i['pending']} pending, "
            f"{i['failed']} failed) · backlog {i['backlog']}"
        )

    def __repr__(self) -> str:
        return f"<MemoryStatus {self.summary()}>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        counts = self.to_frame()
        table = "(no memories yet)" if counts.empty else counts.to_string(index=False)
        p.text(self.summary() + "\n" + table)

    def _repr_html_(self) -> str:
        counts = self.to_frame()
        table = (
            "<p>(no memories yet)</p>" if counts.empty else counts.to_html(index=False, na_rep="")
        )
        return f"<p>{html.escape(self.summary())}</p>{table}"
