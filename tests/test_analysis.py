"""Research DataFrames and plotly figures."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

from nbmemory import Memory
from nbmemory.research import figures, frames, thresholds
from nbmemory.research.datasets import load_locomo


@pytest.fixture
def small(mem: Memory) -> Memory:
    mem.configure(estimate_importance=False)  # by role: only the explicit rows are salient
    mem.add_event("s1", "user", "My name is John and I love TypeScript")
    mem.add_event("s1", "assistant", "TypeScript is a great choice", importance=0.9)
    mem.add_event("s2", "user", "The deadline is March 3rd", importance=0.85)
    mem.add_event("s2", "tool", "calendar.create -> ok")
    mem.add_event("s1", "user", "secret in another namespace", namespace="other")
    assert mem.flush(timeout=30)
    return mem


def test_memories_frame_has_importance_and_salience(small: Memory) -> None:
    frame = frames.memories_frame(small)
    assert list(frame.columns) == frames.MEMORY_COLUMNS
    assert len(frame) == 4  # the other namespace stays out
    assert frame["embedded"].all()
    salient = frame.set_index("content")["salient"]
    assert salient["TypeScript is a great choice"]
    assert salient["The deadline is March 3rd"]
    assert not salient["calendar.create -> ok"]
    small.configure(salience_threshold=0.88)
    assert frames.memories_frame(small)["salient"].sum() == 1


def test_salience_table_per_session_and_role(small: Memory) -> None:
    table = frames.salience_table(small)
    assert table.loc[("s1", "assistant"), "salient"] == 1
    assert table.loc[("s2", "tool"), "mean_importance"] == pytest.approx(0.3)
    assert table.loc[("s2", "user"), "salient_share"] == 1.0
    assert table["memories"].sum() == 4


def test_similarity_of_one_query_or_many(small: Memory) -> None:
    one = thresholds.similarity_frame(small, "Which language does John love?")
    assert len(one) == 4 and "relevant" not in one
    best = one.sort_values("similarity").iloc[-1]
    hit = small.search("Which language does John love?", limit=1)
    assert best["id"] == hit["id"].iloc[0]
    assert best["similarity"] == pytest.approx(hit["similarity"].iloc[0], abs=1e-5)
    many = thresholds.similarity_frame(small, ["language", "deadline"], relevant=[[best["id"]], []])
    assert len(many) == 8
    assert many["relevant"].sum() == 1
    assert set(many["query"]) == {"language", "deadline"}


def test_context_contributions_say_what_each_strategy_brought(small: Memory) -> None:
    context = small.get_context("s2", "TypeScript", relevance_threshold=0.1)
    frame = frames.context_contributions(context)
    assert list(frame.index) == ["relevance", "salience", "recency"]
    assert frame.loc["salience", "found"] == 2
    assert frame.loc["recency", "found"] == 2  # session s2 has two events
    assert frame.loc["relevance", "found"] >= 1
    assert frame["found"].sum() - frame["shared"].sum() <= len(context)
    assert frame.loc["salience", "max_score"] == pytest.approx(0.9)


def test_similarity_histogram_splits_relevant_and_draws_thresholds(small: Memory) -> None:
    frame = thresholds.similarity_frame(small, ["language", "deadline"], relevant=[[], []])
    fig = figures.similarity_histogram(frame, threshold=0.4)
    assert isinstance(fig, go.Figure)
    assert [t.name.split(" (")[0] for t in fig.data] == ["not relevant", "relevant"]
    lines = {s.name: s.x0 for s in fig.layout.shapes}
    assert lines["spec:relevance 0.65 (spec)"] == 0.65
    assert lines["spec:search 0.7 (spec)"] == 0.7
    assert figures.shape_x(fig, "threshold") == 0.4
    # users can restyle it
    fig.update_layout(title="mine")
    assert fig.layout.title.text == "mine"
    plain = figures.similarity_histogram(thresholds.similarity_frame(small, "x"))
    assert len(plain.data) == 1 and figures.shape_x(plain, "threshold") is None


def test_importance_histogram_with_salience_cut(small: Memory) -> None:
    fig = figures.importance_histogram(small)
    assert {t.name for t in fig.data} == {"assistant", "tool", "user"}
    assert figures.shape_x(fig, "salience") == 0.8
    assert sum(sum(t.y) for t in fig.data) == 4  # every memory counted once, in bins
    assert max(len(t.x) for t in fig.data) == 20  # 0.05 wide: the figure's size is bounded
    # from a frame, the cut it was read against (before: no line at all)
    frame = frames.memories_frame(small)
    assert figures.shape_x(figures.importance_histogram(frame), "salience") == 0.8


def test_similarity_histogram_is_counted_in_bins_with_a_threshold_line() -> None:
    import pandas as pd

    values = [0.1, 0.1, 0.5, 0.95, 0.95, 0.95] * 1000
    sims = pd.DataFrame({"similarity": values, "relevant": [True, False] * 3000})
    fig = figures.similarity_histogram(sims, threshold=0.4, bins=60)
    assert [len(t.x) for t in fig.data] == [60, 60]  # not one value per pair
    # relevant and not relevant are each drawn as percentages of their own size
    assert [round(sum(t.y)) for t in fig.data] == [100, 100]
    assert figures.shape_x(fig, "threshold") == 0.4
    plain = figures.similarity_histogram(sims.drop(columns="relevant"))
    assert sum(plain.data[0].y) == len(values)


def test_sweep_figure_has_the_four_curves() -> None:
    import pandas as pd

    sims = pd.DataFrame(
        {"query_index": [0, 0, 1], "similarity": [0.9, 0.2, 0.5], "relevant": [True, False, True]}
    )
    sweep = thresholds.threshold_sweep(sims)
    fig = figures.sweep_figure(sweep, suggestion=thresholds.suggest_threshold(sweep))
    assert [t.name for t in fig.data] == ["precision", "recall", "F1", "questions with no hit"]
    assert figures.shape_x(fig, "suggested") == thresholds.suggest_threshold(sweep).threshold
    assert list(fig.data[0].x) == list(sweep["threshold"])


def test_recall_at_the_spec_thresholds(tiny_locomo_path) -> None:
    with Memory(":memory:", embedder="hash") as memory:
        loaded = load_locomo(tiny_locomo_path, memory)
        frame = thresholds.labelled_similarities(memory, loaded)
        table = frames.recall_at_thresholds(frame, {"zero": -1.0, "one": 1.0})
    assert table.loc["zero", "relevant_above"] == 1.0
    assert table.loc["zero", "queries_without_hit"] == 0.0
    assert table.loc["one", "relevant_above"] == 0.0
    assert table.loc["one", "queries_without_hit"] == 1.0


def test_the_measured_facts_on_conv26(locomo) -> None:
    """Few evidence turns clear 0.65 and many questions get no turn above it."""
    memory, loaded = locomo["conv-26"]
    frame = thresholds.labelled_similarities(memory, loaded)
    table = frames.recall_at_thresholds(frame)
    at_065 = table.loc["relevance 0.65 (spec)"]
    assert at_065["relevant_above"] < 0.25
    assert at_065["queries_without_hit"] > 0.3
    fig = figures.similarity_histogram(frame, threshold=0.4)
    relevant = [t for t in fig.data if t.name.startswith("relevant")][0]
    assert relevant.name == f"relevant ({int(frame['relevant'].sum()):,})"
    assert sum(relevant.y) == pytest.approx(100)  # a share of its own group
