"""The matched passage of a long memory, shown in HTML: marked, escaped, elided around.

A search hit on a long memory carries the character span of the passage that matched
(``passage_start``/``passage_stop``); a notebook shows that span in ``<mark>`` with a
little context either side and ``…`` for what is left out, so a 3k-character tool
output does not flood the table and the reader sees why it was recalled.  Every piece
of the memory's text is HTML-escaped: content is data, never markup.
"""

from __future__ import annotations

import html
from typing import Any

import pandas as pd

#: Characters of context kept either side of a marked passage.
CONTEXT = 60
#: Longest marked passage shown whole (a 200-token passage is ~1k characters);
#: a longer one keeps its head and tail.
MAX_MARK = 1500
#: Longest text shown whole when nothing is marked.
MAX_PLAIN = 160
ELLIPSIS = "…"


def _span(start: Any, stop: Any, length: int) -> tuple[int, int] | None:
    """A usable (start, stop) inside ``[0, length]``, or None for no passage."""
    if start is None or stop is None or pd.isna(start) or pd.isna(stop):
        return None
    lo, hi = max(0, int(start)), min(length, int(stop))
    return (lo, hi) if lo < hi else None


def highlight_html(text: Any, start: Any = None, stop: Any = None) -> str:
    """``text`` as escaped HTML with ``text[start:stop]`` in ``<mark>``, the rest elided.

    With no span (a short memory, or a hit found by keyword only) the text is shown
    whole when short, else its first characters and ``…``.
    """
    if not isinstance(text, str):
        return ""
    span = _span(start, stop, len(text))
    if span is None:
        if len(text) <= MAX_PLAIN:
            return html.escape(text)
        return html.escape(text[: MAX_PLAIN - 1]) + ELLIPSIS
    lo, hi = span
    before_at = max(0, lo - CONTEXT)
    after_to = min(len(text), hi + CONTEXT)
    marked = text[lo:hi]
    if len(marked) > MAX_MARK:
        half = MAX_MARK // 2
        inner = (
            html.escape(marked[:half]) + f"</mark> {ELLIPSIS} <mark>" + html.escape(marked[-half:])
        )
    else:
        inner = html.escape(marked)
    return (
        (ELLIPSIS if before_at > 0 else "")
        + html.escape(text[before_at:lo])
        + f"<mark>{inner}</mark>"
        + html.escape(text[hi:after_to])
        + (ELLIPSIS if after_to < len(text) else "")
    )


def needle_span(text: Any, needle: str) -> tuple[int, int] | tuple[None, None]:
    """Where ``needle`` first occurs in ``text`` (case-insensitive), else (None, None)."""
    if not isinstance(text, str) or not needle:
        return (None, None)
    at = text.casefold().find(needle.casefold())
    if at < 0 or len(text.casefold()) != len(text):  # casefold changed lengths: no safe span
        return (None, None)
    return (at, at + len(needle))


def frame_html(
    frame: pd.DataFrame,
    columns: list[str],
    *,
    spans: list[tuple[Any, Any]] | None = None,
    css: str = "",
    float_format: str = "{:.3f}",
) -> str:
    """An HTML table of ``frame[columns]``, every cell escaped, ``content`` highlighted.

    ``spans`` gives each row's (start, stop) in its content (None for no passage).
    """
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    rows = []
    for i, (_, row) in enumerate(frame[columns].iterrows()):
        cells = []
        for column in columns:
            value = row[column]
            if column == "content":
                start, stop = spans[i] if spans is not None else (None, None)
                cell = highlight_html(value, start, stop)
            elif value is None or (not isinstance(value, list | dict) and pd.isna(value)):
                cell = ""
            elif isinstance(value, float):
                cell = float_format.format(value)
            else:
                cell = html.escape(str(value))
            cells.append(f"<td>{cell}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    cls = f' class="dataframe {html.escape(css)}"' if css else ' class="dataframe"'
    return (
        f'<table border="0"{cls}><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


class RecallFrame(pd.DataFrame):
    """``%recall``'s answer: a DataFrame whose HTML shows each hit's matched passage marked.

    It behaves as any DataFrame; anything derived from it (a slice, a sort) is a plain
    DataFrame.  The span of each hit's passage is kept in ``attrs["passage_spans"]``.
    """

    @property
    def _constructor(self) -> type[pd.DataFrame]:  # derived frames are plain DataFrames
        return pd.DataFrame

    def _repr_html_(self) -> str | None:
        spans = self.attrs.get("passage_spans")
        if spans is None or len(spans) != len(self):
            return super()._repr_html_()
        shown = [c for c in self.columns if c != "passage"]  # the mark shows the passage
        return frame_html(self, shown, spans=list(spans), css="nbmemory-recall")


def matched_passages(hits: pd.DataFrame) -> list[Any]:
    """The text of each hit's matched passage (a long memory's), else NA."""
    if "passage_start" not in hits:
        return [pd.NA] * len(hits)
    return [
        content[int(start) : int(stop)] if pd.notna(start) else pd.NA
        for content, start, stop in zip(
            hits["content"], hits["passage_start"], hits["passage_stop"], strict=True
        )
    ]


def passage_spans(hits: pd.DataFrame) -> list[tuple[Any, Any]]:
    """Each hit's (start, stop) of its matched passage, (None, None) for none."""
    if "passage_start" not in hits:
        return [(None, None)] * len(hits)
    return [
        (None, None) if pd.isna(start) else (int(start), int(stop))
        for start, stop in zip(hits["passage_start"], hits["passage_stop"], strict=True)
    ]


__all__ = [
    "RecallFrame",
    "frame_html",
    "highlight_html",
    "matched_passages",
    "needle_span",
    "passage_spans",
]
