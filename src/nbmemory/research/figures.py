"""Plotly figures of a store: similarity and importance histograms, threshold sweeps.

The figures draw the spec's thresholds (relevance 0.65, similarity search 0.7)
so you can see how few relevant memories clear them with your model and data.
Each returns a ``plotly.graph_objects.Figure`` you can restyle
(``fig.update_layout(...)``).  Needs the ``notebook`` extra (plotly).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..errors import InvalidInput
from ..validation import check_unit_interval
from .frames import memories_frame
from .thresholds import SPEC_THRESHOLDS, ThresholdSuggestion

if TYPE_CHECKING:
    from .subject import MemoryLike as Memory

#: Colours of the figures: relevant / not relevant / the movable threshold.
COLORS = {
    "relevant": "#d62728",
    "not relevant": "#7f7f7f",
    "threshold": "#1f77b4",
    "search": "#ff7f0e",
}


def _threshold_lines(
    fig: go.Figure,
    spec: Mapping[str, float] | None,
    threshold: float | None,
    search: float | None = None,
) -> None:
    for index, (label, value) in enumerate((spec or {}).items()):
        fig.add_vline(
            x=value,
            line_dash="dash" if index == 0 else "dot",
            line_color="black",
            line_width=1,
            annotation_text=label,
            annotation_position="top left" if index == 0 else "top right",
            annotation_font_size=10,
            name=f"spec:{label}",
        )
    for name, x in (("threshold", threshold), ("search", search)):
        if x is not None:  # the movable lines, found by name (shape_x)
            fig.add_vline(x=float(x), line_color=COLORS[name], line_width=3, name=name)


def similarity_histogram(
    similarities: pd.DataFrame,
    *,
    threshold: float | None = None,
    search_threshold: float | None = None,
    spec_thresholds: Mapping[str, float] | None = SPEC_THRESHOLDS,
    bins: int = 80,
    normalise: bool | None = None,
    title: str | None = None,
) -> go.Figure:
    """Histogram of similarities, split relevant / not relevant when labels exist.

    ``similarities`` comes from :func:`similarity_frame` or
    :func:`labelled_similarities`.  Dashed lines mark the spec's thresholds; solid
    ones mark ``threshold`` (named ``threshold``, blue) and ``search_threshold``
    (named ``search``, orange) when given.  With labels the
    two groups are drawn as percentages of their own size (``normalise``), since
    relevant pairs are a tiny minority.
    """
    labelled = "relevant" in similarities.columns
    normalise = labelled if normalise is None else normalise
    fig = go.Figure()
    groups: list[tuple[str, pd.Series]] = []
    if labelled:
        flags = similarities["relevant"].astype(bool)
        groups = [
            ("not relevant", similarities.loc[~flags, "similarity"]),
            ("relevant", similarities.loc[flags, "similarity"]),
        ]
    else:
        groups = [("memories", similarities["similarity"])]
    # counted here, not by plotly: a figure of 80 bars rather than one value per
    # pair (a store's histogram stays small in the notebook and redraws at once)
    edges = np.linspace(-0.2, 1.0, bins + 1)
    centres = (edges[:-1] + edges[1:]) / 2
    for name, values in groups:
        counts, _ = np.histogram(values.to_numpy(dtype=float), bins=edges)
        heights = counts * 100.0 / max(len(values), 1) if normalise else counts
        fig.add_trace(
            go.Bar(
                x=centres,
                y=heights,
                width=edges[1] - edges[0],
                name=f"{name} ({len(values):,})",
                marker_color=COLORS.get(name, COLORS["not relevant"]),
                marker_line_width=0,
                opacity=0.65 if labelled else 0.9,
                hovertemplate="%{x:.3f}: %{y:.3~f}<extra>" + name + "</extra>",
            )
        )
    _threshold_lines(fig, spec_thresholds, threshold, search_threshold)
    fig.update_layout(
        barmode="overlay",
        title=title or "Similarity of queries to memories",
        xaxis_title="cosine similarity",
        yaxis_title="% of pairs in group" if normalise else "pairs",
        legend={"orientation": "h", "y": -0.2},
        margin={"t": 60},
    )
    return fig


def importance_histogram(
    data: Memory | pd.DataFrame,
    *,
    cut: float | None = None,
    namespace: str | None = None,
    by: str | None = "role",
    title: str | None = None,
) -> go.Figure:
    """Distribution of importance (stacked by ``by``), with the salience cut as a line.

    ``data`` is a Memory (its memories are read) or a :func:`memories_frame`.
    ``cut`` defaults to the store's ``salience_threshold`` (0.8): the Memory's, or
    the one the frame was read against (its ``attrs``).
    """
    if cut is not None:
        cut = check_unit_interval(cut, "cut")
    if by is not None and not isinstance(by, str):
        raise InvalidInput(f"by must be a column name or None, got {type(by).__name__}")
    if title is not None and not isinstance(title, str):
        raise InvalidInput(f"title must be text or None, got {type(title).__name__}")
    if isinstance(data, pd.DataFrame):
        frame = data
        cut = frame.attrs.get("salience_threshold") if cut is None else cut
    else:
        frame = memories_frame(data, namespace=namespace)
        cut = data.settings.salience_threshold if cut is None else cut
    fig = go.Figure()
    edges = np.linspace(0.0, 1.0, 21)  # 0.05 wide; numpy's last bin holds 1.0 itself
    centres = (edges[:-1] + edges[1:]) / 2
    if by and by in frame.columns and not frame.empty:
        groups = [(str(value), group["importance"]) for value, group in frame.groupby(by)]
    else:
        groups = [("memories", frame["importance"])]
    for name, values in groups:
        counts, _ = np.histogram(values.to_numpy(dtype=float), bins=edges)
        fig.add_trace(
            go.Bar(
                x=centres,
                y=counts,
                width=edges[1] - edges[0],
                name=name,
                marker_line_width=0,
                hovertemplate="%{x:.3f}: %{y}<extra>" + name + "</extra>",
            )
        )
    if cut is not None:
        fig.add_vline(
            x=float(cut),
            line_color=COLORS["threshold"],
            line_width=3,
            annotation_text=f"salience cut {float(cut):.2f}",
            annotation_position="top left",
            name="salience",
        )
    fig.update_layout(
        barmode="stack",
        title=title or "Importance of memories",
        xaxis_title="importance",
        yaxis_title="memories",
        xaxis_range=[0, 1.02],
    )
    return fig


def sweep_figure(
    sweep: pd.DataFrame,
    *,
    suggestion: ThresholdSuggestion | None = None,
    spec_thresholds: Mapping[str, float] | None = SPEC_THRESHOLDS,
    title: str | None = None,
) -> go.Figure:
    """Precision, recall, F1 and the share of queries with no hit, against the threshold.

    ``sweep`` comes from :func:`threshold_sweep`; ``suggestion`` (from
    :func:`suggest_threshold`) is marked with a solid line when given.
    """
    fig = go.Figure()
    styles = {
        "precision": {"color": "#2ca02c"},
        "recall": {"color": "#d62728"},
        "f1": {"color": "#1f77b4", "width": 3},
        "no_hit": {"color": "#7f7f7f", "dash": "dot"},
    }
    names = {"no_hit": "questions with no hit", "f1": "F1"}
    for column, line in styles.items():
        fig.add_trace(
            go.Scatter(
                x=sweep["threshold"],
                y=sweep[column],
                mode="lines",
                name=names.get(column, column),
                line=line,
            )
        )
    _threshold_lines(fig, spec_thresholds, None)
    if suggestion is not None:
        fig.add_vline(
            x=suggestion.threshold,
            line_color=COLORS["threshold"],
            line_width=3,
            annotation_text=f"suggested {suggestion.threshold:.2f}",
            annotation_position="bottom right",
            name="suggested",
        )
    limit = sweep.attrs.get("limit")
    queries = sweep.attrs.get("queries")
    subtitle = f"{queries} questions" if queries else ""
    if limit:
        subtitle += f", at most {limit} memories per question"
    default_title = f"Threshold sweep ({subtitle})" if subtitle else "Threshold sweep"
    fig.update_layout(
        title=title or default_title,
        xaxis_title="relevance threshold (similarity >)",
        yaxis_title="share",
        yaxis_range=[0, 1.02],
        hovermode="x unified",
    )
    return fig


def shape_x(fig: go.Figure, name: str) -> float | None:
    """The x of the vertical line called ``name`` in ``fig`` (None when absent)."""
    for shape in fig.layout.shapes:
        if shape.name == name:
            return float(shape.x0)
    return None
