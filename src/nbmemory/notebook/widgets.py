"""Notebook widgets: the live threshold tuner and the memory explorer.

Both are plain Python objects holding ipywidgets; their logic runs without a
front end (set ``tuner.relevance.value = 0.4`` and read ``tuner.recalled_frame()``),
which is how the tests drive them.  Display one by leaving it last in a cell.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
import pandas as pd
import plotly.graph_objects as go

from ..config import Settings
from ..errors import InvalidInput
from ..event_rows import turn_text
from ..research.datasets import LoadedConversation
from ..research.figures import importance_histogram, similarity_histogram
from ..research.thresholds import threshold_sweep
from ..validation import check_name
from .highlight import frame_html, needle_span

if TYPE_CHECKING:
    from ..memory import Memory

_ALL = "(all)"


def _table_html(
    frame: pd.DataFrame,
    columns: list[str],
    *,
    max_rows: int,
    css: str,
    spans: list[tuple[Any, Any]] | None = None,
    needle: str = "",
) -> str:
    """A compact, escaped HTML table of ``frame``: long texts elided, a span marked.

    ``spans`` gives each row's (start, stop) in its content to show in ``<mark>``
    (the matched passage of a long memory); ``needle`` marks where a text filter
    found each row instead.
    """
    shown = frame[columns].head(max_rows).copy()
    if "content" in shown and "tool_calls_json" in frame:  # a tool-call turn shows its calls
        calls = frame["tool_calls_json"].head(max_rows)
        shown["content"] = [turn_text(t, c) for t, c in zip(shown["content"], calls, strict=True)]
    if needle and "content" in shown:
        spans = [needle_span(t, needle) for t in shown["content"]]
    body = frame_html(shown, columns, spans=None if spans is None else spans[:max_rows], css=css)
    more = len(frame) - len(shown)
    if more > 0:
        body += f"<p><i>... and {more} more</i></p>"
    return body


def _plotly_output(figure: go.Figure) -> dict[str, Any]:
    """``figure`` as one display output (plotly's own mime type) for an Output widget."""
    spec = json.loads(figure.to_json())
    return {
        "output_type": "display_data",
        "data": {
            "application/vnd.plotly.v1+json": {**spec, "config": {"displaylogo": False}},
            "text/plain": f"<{figure.layout.title.text or 'figure'}>",
        },
        "metadata": {},
    }


def _slider(value: float, description: str) -> widgets.FloatSlider:
    """A 0..1 threshold slider that reports on release (each move recomputes counts)."""
    return widgets.FloatSlider(
        value=value,
        min=0.0,
        max=1.0,
        step=0.01,
        description=description,
        readout_format=".2f",
        continuous_update=False,
        style={"description_width": "90px"},
        layout={"width": "480px"},
    )


def _queries(queries: Any, namespace: str | None) -> tuple[list[str], Any, str | None]:
    """The tuner's questions, their labels (or None) and the namespace they imply."""
    if isinstance(queries, LoadedConversation):
        namespace = namespace or queries.namespace
        queries = queries.queries()
    if isinstance(queries, str):
        queries = [queries]
    if isinstance(queries, pd.DataFrame):
        texts = queries["question"].tolist()
        labels = queries if "relevant_ids" in queries else None
    else:
        texts, labels = list(queries), None
    if not texts:
        raise InvalidInput("the tuner needs at least one query")
    return texts, labels, namespace


class ThresholdTuner:
    """Sliders for the three thresholds, with live consequences.

    The two similarity thresholds of the source systems sit over one distribution:
    the context's relevance threshold (0.65, the Rust agent's ``similarity >``) and
    the search threshold of ``search_memories`` (0.7, Astreus's ``similarity >=``).
    Moving a slider moves its line on the similarity histogram (relevant vs not
    relevant when the queries carry labels) or the salience cut on the importance
    histogram, and updates the counts and the list of memories the selected query
    would recall in the context: similarity ``>`` the relevance threshold (at most
    ``limit`` when given, as ``relevance_limit`` does) plus the memories with
    importance ``>=`` the cut; the counts also say how many a similarity search at
    the search threshold would return.  :meth:`apply` (the *Apply* button) writes the three values to the
    store's settings through :meth:`Memory.apply_thresholds` (one audited call).

    ``queries`` is a question, a list of them, a DataFrame with ``question`` and
    ``relevant_ids`` columns, or a :class:`~nbmemory.research.datasets.LoadedConversation`
    (whose labelled questions are used).
    """

    def __init__(
        self,
        memory: Memory,
        queries: Any,
        *,
        namespace: str | None = None,
        limit: int | None = None,
        max_rows: int = 15,
    ) -> None:
        self.memory = memory
        self.limit = limit
        self.max_rows = max_rows
        texts, labels, namespace = _queries(queries, namespace)
        self.namespace = (
            memory.namespace if namespace is None else check_name(namespace, "namespace")
        )
        self.queries = texts
        self.similarities = memory.research.similarities(
            texts, namespace=self.namespace, relevant=labels
        )
        self.labelled = labels is not None
        self.memories = memory.research.memories(namespace=self.namespace)
        self._build_controls(memory.settings, texts)
        self._build_figures()

    def _build_controls(self, settings: Settings, texts: list[str]) -> None:
        self.relevance = _slider(settings.relevance_threshold or 0.0, "relevance >")
        self.salience = _slider(settings.salience_threshold, "salience >=")
        self.search = _slider(settings.similarity_threshold, "search >=")
        self.relevance.add_class("nbmemory-relevance-slider")
        self.search.add_class("nbmemory-search-slider")
        self.salience.add_class("nbmemory-salience-slider")
        self.query = widgets.Dropdown(
            options=[(q if len(q) <= 90 else q[:87] + "...", i) for i, q in enumerate(texts)],
            value=0,
            description="query",
            layout={"width": "720px"},
        )
        self.counts = widgets.HTML()
        self.counts.add_class("nbmemory-counts")
        self.recalled = widgets.HTML()
        self.recalled.add_class("nbmemory-recalled")
        self.status = widgets.HTML()
        self.apply_button = widgets.Button(
            description="Apply to store", button_style="primary", icon="check"
        )
        self.apply_button.add_class("nbmemory-apply")

    def _build_figures(self) -> None:
        # plain figures drawn into Output widgets, redrawn whole on each change: a
        # plotly FigureWidget's view, re-rendered, lost the line it was made with
        # (its layout is trimmed once drawn), and it loads 5 MB of script per figure
        self.figure = similarity_histogram(
            self.similarities,
            threshold=self.relevance.value,
            search_threshold=self.search.value,
            title="Similarity of the queries to every memory",
        )
        self.figure.update_layout(height=360)
        self.importance_figure = importance_histogram(self.memories, cut=self.salience.value)
        self.importance_figure.update_layout(height=300)
        self.histogram_view = widgets.Output()
        self.histogram_view.add_class("nbmemory-histogram")
        self.importance_view = widgets.Output()
        self.importance_view.add_class("nbmemory-importance")

        self.relevance.observe(self._changed, names="value")
        self.search.observe(self._changed, names="value")
        self.salience.observe(self._changed, names="value")
        self.query.observe(self._changed, names="value")
        self.apply_button.on_click(lambda _button: self.apply())

        self.widget = widgets.VBox(
            [
                widgets.HBox([self.relevance, self.search]),
                self.salience,
                self.query,
                self.counts,
                self.histogram_view,
                self.importance_view,
                widgets.HTML("<b>Memories this query would recall</b>"),
                self.recalled,
                widgets.HBox([self.apply_button, self.status]),
            ]
        )
        self.widget.add_class("nbmemory-tuner")
        self.update()

    # -- logic -------------------------------------------------------------------------
    @property
    def relevance_threshold(self) -> float:
        return float(self.relevance.value)

    @property
    def salience_threshold(self) -> float:
        return float(self.salience.value)

    @property
    def search_threshold(self) -> float:
        return float(self.search.value)

    def recalled_frame(self) -> pd.DataFrame:
        """What the selected query would recall now: by relevance, by salience, or both."""
        sims = self.similarities[self.similarities["query_index"] == self.query.value]
        relevant = sims[sims["similarity"] > self.relevance_threshold].sort_values(
            "similarity", ascending=False
        )
        if self.limit is not None:
            relevant = relevant.head(self.limit)
        salient_ids = set(
            self.memories.loc[self.memories["importance"] >= self.salience_threshold, "id"]
        )
        by_relevance = set(relevant["id"])
        chosen = sims[sims["id"].isin(by_relevance | salient_ids)].copy()
        # memories without a vector of this model can still be salient
        missing = salient_ids - set(sims["id"])
        if missing:
            extra = self.memories[self.memories["id"].isin(missing)].copy()
            extra["similarity"] = float("nan")
            chosen = pd.concat([chosen, extra], ignore_index=True)
        chosen["strategies"] = [
            ", ".join(
                s
                for s, hit in (("relevance", i in by_relevance), ("salience", i in salient_ids))
                if hit
            )
            for i in chosen["id"]
        ]
        columns = ["strategies", "similarity", "importance", "role", "session_id", "content", "id"]
        if "relevant" in chosen:
            columns.insert(1, "relevant")
        return (
            chosen.sort_values(["similarity", "importance"], ascending=False, na_position="last")
            .reset_index(drop=True)
            .reindex(columns=columns)
        )

    def counts_dict(self) -> dict[str, Any]:
        """The numbers shown above the histogram, for the current slider values."""
        frame = self.recalled_frame()
        out: dict[str, Any] = {
            "relevance_threshold": self.relevance_threshold,
            "salience_threshold": self.salience_threshold,
            "memories": len(self.memories),
            "recalled": len(frame),
            "by_relevance": sum("relevance" in s for s in frame["strategies"]),
            "by_salience": sum("salience" in s for s in frame["strategies"]),
            "search_threshold": self.search_threshold,
            "by_search": self._searched(),
        }
        if self.labelled:
            sweep = threshold_sweep(self.similarities, [self.relevance_threshold], limit=self.limit)
            row = sweep.iloc[0]
            out.update(
                {
                    "relevant_recalled": int(frame["relevant"].fillna(False).astype(bool).sum()),
                    "recall": float(row["recall"]),
                    "precision": float(row["precision"]),
                    "no_hit": float(row["no_hit"]),
                    "queries": int(sweep.attrs["queries"]),
                }
            )
        return out

    def _searched(self) -> int:
        """How many memories a similarity search (``>=`` the threshold) returns for the query."""
        sims = self.similarities[self.similarities["query_index"] == self.query.value]
        return int((sims["similarity"].clip(0.0, 1.0) >= self.search_threshold).sum())

    def update(self) -> None:
        """Redraw lines, counts and the recalled list from the current values."""
        counts = self.counts_dict()
        for shape in self.figure.layout.shapes:
            if shape.name == "threshold":
                shape.x0 = shape.x1 = self.relevance_threshold
            elif shape.name == "search":
                shape.x0 = shape.x1 = self.search_threshold
        for shape in self.importance_figure.layout.shapes:
            if shape.name == "salience":
                shape.x0 = shape.x1 = self.salience_threshold
        for annotation in self.importance_figure.layout.annotations:
            if annotation.text and annotation.text.startswith("salience cut"):
                annotation.x = self.salience_threshold
                annotation.text = f"salience cut {self.salience_threshold:.2f}"
        self.histogram_view.outputs = (_plotly_output(self.figure),)
        self.importance_view.outputs = (_plotly_output(self.importance_figure),)
        text = (
            f"<b>{counts['recalled']}</b> of {counts['memories']} memories recalled for this "
            f"query: <b>{counts['by_relevance']}</b> with similarity &gt; "
            f"{counts['relevance_threshold']:.2f}, <b>{counts['by_salience']}</b> with "
            f"importance &ge; {counts['salience_threshold']:.2f}. "
            f"A search at similarity &ge; {counts['search_threshold']:.2f} "
            f"(<code>search_memories</code>' threshold) would return "
            f"<b>{counts['by_search']}</b>"
        )
        if self.labelled:
            text += (
                f"; {counts['relevant_recalled']} of the {counts['recalled']} answer it."
                f"<br>Over all "
                f"{counts['queries']} queries at this threshold: recall "
                f"<b>{counts['recall']:.2f}</b>, precision {counts['precision']:.2f}, "
                f"<b>{counts['no_hit']:.0%}</b> of queries recall nothing by relevance."
            )
        self.counts.value = text
        frame = self.recalled_frame()
        if frame.empty:
            self.recalled.value = "<p><i>nothing would be recalled</i></p>"
        else:
            columns = [c for c in frame.columns if c != "id"]
            self.recalled.value = _table_html(
                frame, columns, max_rows=self.max_rows, css="nbmemory-recalled-table"
            )

    def _changed(self, _change: dict) -> None:
        self.update()

    def apply(self) -> Settings:
        """Write the chosen thresholds to the store's settings (one audited call)."""
        settings = self.memory.apply_thresholds(
            relevance_threshold=self.relevance_threshold,
            similarity_threshold=self.search_threshold,
            salience_threshold=self.salience_threshold,
            source="threshold tuner",
        )
        self.status.value = (
            f"applied: relevance_threshold {settings.relevance_threshold:.2f}, "
            f"similarity_threshold {settings.similarity_threshold:.2f}, "
            f"salience_threshold {settings.salience_threshold:.2f}"
        )
        return settings

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


class MemoryExplorer:
    """Browse, filter (session, role, kind, dates, text) and sort the memories of a store.

    ``explorer.frame`` is the current selection as a DataFrame; :meth:`refresh`
    re-reads the store (after new memories arrive).
    """

    SORTABLE = ("created_at", "importance", "session_id", "role", "kind")

    def __init__(
        self, memory: Memory, *, namespace: str | None = None, page_size: int = 25
    ) -> None:
        self.memory = memory
        self.namespace = (
            memory.namespace if namespace is None else check_name(namespace, "namespace")
        )
        self.page_size = page_size
        self.session = widgets.Dropdown(description="session")
        self.role = widgets.Dropdown(description="role")
        self.kind = widgets.Dropdown(description="kind")
        self.since = widgets.DatePicker(description="since")
        self.until = widgets.DatePicker(description="until")
        self.text = widgets.Text(description="text", placeholder="contains...")
        self.sort = widgets.Dropdown(
            options=list(self.SORTABLE), value="created_at", description="sort by"
        )
        self.descending = widgets.Checkbox(value=False, description="descending")
        self.refresh_button = widgets.Button(description="Refresh", icon="refresh")
        self.summary = widgets.HTML()
        self.table = widgets.HTML()
        self.table.add_class("nbmemory-explorer-table")
        self._all = pd.DataFrame()
        self._refreshing = False
        self.frame = pd.DataFrame()
        self.refresh()
        for control in (
            self.session,
            self.role,
            self.kind,
            self.since,
            self.until,
            self.text,
            self.sort,
            self.descending,
        ):
            control.observe(self._changed, names="value")
        self.refresh_button.on_click(lambda _button: self.refresh())
        self.widget = widgets.VBox(
            [
                widgets.HBox([self.session, self.role, self.kind]),
                widgets.HBox([self.since, self.until, self.text]),
                widgets.HBox([self.sort, self.descending, self.refresh_button]),
                self.summary,
                self.table,
            ]
        )
        self.widget.add_class("nbmemory-explorer")

    def refresh(self) -> None:
        """Re-read the memories from the store and keep the current filters."""
        self._all = self.memory.research.memories(namespace=self.namespace)
        self._refreshing = True
        try:
            for control, column in self._choices():
                current = control.value
                options = [_ALL, *sorted(self._all[column].dropna().unique().tolist())]
                control.options = options
                control.value = current if current in options else _ALL
        finally:
            self._refreshing = False
        self.update()

    def _choices(self) -> list[tuple[widgets.Dropdown, str]]:
        return [(self.session, "session_id"), (self.role, "role"), (self.kind, "kind")]

    def filtered(self) -> pd.DataFrame:
        """The memories matching every filter, sorted as chosen."""
        frame = self._all
        for control, column in (
            (self.session, "session_id"),
            (self.role, "role"),
            (self.kind, "kind"),
        ):
            if control.value not in (None, _ALL):
                frame = frame[frame[column] == control.value]
        if self.since.value is not None:
            frame = frame[frame["created_at"] >= pd.Timestamp(self.since.value)]
        if self.until.value is not None:
            end = pd.Timestamp(self.until.value) + pd.Timedelta(days=1)
            frame = frame[frame["created_at"] < end]
        needle = self.text.value.strip()
        if needle:
            frame = frame[frame["content"].fillna("").str.contains(needle, case=False, regex=False)]
        return frame.sort_values(
            [self.sort.value, "id"], ascending=not self.descending.value, kind="stable"
        ).reset_index(drop=True)

    def update(self) -> None:
        """Apply the filters and redraw the table."""
        self.frame = self.filtered()
        self.summary.value = f"{len(self.frame)} of {len(self._all)} memories"
        needle = self.text.value.strip()
        self.table.value = _table_html(
            self.frame,
            ["created_at", "session_id", "role", "kind", "importance", "content"],
            max_rows=self.page_size,
            css="nbmemory-explorer-rows",
            needle=needle,
        )

    def _changed(self, _change: dict) -> None:
        if not self._refreshing:
            self.update()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


__all__ = ["MemoryExplorer", "ThresholdTuner"]
