"""What the magics return: rich results that display well in a notebook and as text."""

from __future__ import annotations

import html
from typing import Any

import pandas as pd

from ..event_rows import Event


class RememberedEvent(Event):
    """The :class:`~nbmemory.Event` ``%%remember`` returns; it displays as one line."""

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.summary())

    def _repr_html_(self) -> str:
        return f"<samp>{html.escape(self.summary())}</samp>"


class MemoryStatus:
    """What ``%memory status`` returns: :meth:`Memory.status` with a readable display.

    ``model_state`` (also ``status["model_state"]``) says how the embedding model is
    doing, without waiting for it: ``"ok (384-d)"``, ``"loading"``, ``"not loaded
    yet"`` or ``"cannot load: <why>"``; it is shown on its own ``model`` line.
    """

    def __init__(self, info: dict[str, Any], model_state: str | None = None) -> None:
        self.info = dict(info)
        if model_state is not None:
            self.info["model_state"] = model_state

    def __getitem__(self, key: str) -> Any:
        return self.info[key]

    @property
    def model_state(self) -> str | None:
        """How the model is doing (None when the caller did not say)."""
        state: str | None = self.info.get("model_state")
        return state

    def to_frame(self) -> pd.DataFrame:
        """Counts per namespace, session and kind (events, embedded, pending, failed)."""
        return self.info["counts"]

    def summary(self) -> str:
        i = self.info
        count = i.get("without_text", 0)
        without = f", {count} tool-call turns without text" if count else ""
        other = i.get("other_model", 0)
        stale = (
            f" · {other} embedded by another model, not searched by vector: "
            "mem.embeddings.reembed()"
            if other
            else ""
        )
        return (
            f"{i['path']} · namespace {i['namespace']!r} · model {i['model']} · "
            f"{i['events']} events ({i['embedded']} embedded, {i['pending']} pending, "
            f"{i['failed']} failed{without}) · backlog {i['backlog']}{stale}"
        )

    def model_line(self) -> str | None:
        """``model <name>: <state>``, or None without a state."""
        state = self.model_state
        return None if state is None else f"model {self.info['model']}: {state}"

    def __repr__(self) -> str:
        return f"<MemoryStatus {self.summary()}>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        counts = self.to_frame()
        table = "(no memories yet)" if counts.empty else counts.to_string(index=False)
        line = self.model_line()
        p.text(self.summary() + ("" if line is None else "\n" + line) + "\n" + table)

    def _repr_html_(self) -> str:
        counts = self.to_frame()
        table = (
            "<p>(no memories yet)</p>" if counts.empty else counts.to_html(index=False, na_rep="")
        )
        line = self.model_line()
        model = "" if line is None else f"<p>{html.escape(line)}</p>"
        return f"<p>{html.escape(self.summary())}</p>{model}{table}"
