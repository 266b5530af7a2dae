"""The threshold tuner and the memory explorer, driven headless (no front end)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from nbmemory import InvalidInput, Memory
from nbmemory.notebook.widgets import MemoryExplorer, ThresholdTuner
from nbmemory.research.datasets import load_locomo
from nbmemory.research.figures import shape_x


@pytest.fixture
def tiny(tiny_locomo_path):
    # seed 000 exactly: the spec profile and importance by role (no estimate from the text)
    memory = Memory(":memory:", embedder="hash", profile="spec", estimate_importance=False)
    loaded = load_locomo(tiny_locomo_path, memory)
    memory.add_event("notes", "user", "Remember: Alice is allergic to cats", importance=0.95)
    assert memory.flush(timeout=30)
    yield memory, loaded
    memory.close()


def test_moving_the_relevance_slider_changes_plot_counts_and_list(tiny) -> None:
    memory, loaded = tiny
    tuner = ThresholdTuner(memory, loaded)
    assert tuner.labelled and tuner.relevance.value == 0.65
    assert shape_x(tuner.figure, "threshold") == 0.65
    before_list = tuner.recalled.value
    before_counts = tuner.counts.value
    before = tuner.counts_dict()

    tuner.relevance.value = 0.05

    assert shape_x(tuner.figure, "threshold") == 0.05
    # what the page is sent: the figure redrawn whole with its line moved
    (shown,) = tuner.histogram_view.outputs
    layout = shown["data"]["application/vnd.plotly.v1+json"]["layout"]
    assert [s["x0"] for s in layout["shapes"] if s.get("name") == "threshold"] == [0.05]
    after = tuner.counts_dict()
    assert after["by_relevance"] > before["by_relevance"]
    assert after["recall"] >= before["recall"]
    assert tuner.recalled.value != before_list
    assert tuner.counts.value != before_counts
    assert "0.05" in tuner.counts.value
    recalled = tuner.recalled_frame()
    question = tuner.queries[tuner.query.value]
    sims = memory.search(question, limit=20, namespace=loaded.namespace)
    expected = set(sims.loc[sims["similarity"] > 0.05, "id"])
    by_relevance = recalled[recalled["strategies"].str.contains("relevance")]
    assert set(by_relevance["id"]) == expected


def test_salience_slider_and_query_choice(tiny) -> None:
    memory, loaded = tiny
    tuner = ThresholdTuner(memory, loaded, namespace=None)
    tuner.relevance.value = 1.0  # nothing by relevance
    assert tuner.counts_dict()["by_relevance"] == 0
    # no LoCoMo turn is salient at the default 0.8 (all have importance 0.5)
    assert tuner.counts_dict()["by_salience"] == 0
    assert "nothing would be recalled" in tuner.recalled.value
    tuner.salience.value = 0.5
    assert tuner.counts_dict()["by_salience"] == 6
    assert shape_x(tuner.importance_figure, "salience") == 0.5
    assert "Rex" in tuner.recalled.value
    tuner.relevance.value = 0.0
    first = tuner.recalled_frame()["id"].tolist()
    tuner.query.value = 2
    assert tuner.queries[2] == "What did Bob start painting?"
    top = tuner.recalled_frame().iloc[0]
    assert top["id"] == loaded.event_ids["D2:1"]
    assert tuner.recalled_frame()["id"].tolist() != first


def test_both_similarity_thresholds_over_one_distribution(tiny) -> None:
    """004's search threshold (0.7, similarity >=) beside 000's relevance (0.65, >)."""
    memory, loaded = tiny
    tuner = ThresholdTuner(memory, loaded)
    assert (tuner.relevance.value, tuner.search.value) == (0.65, 0.7)
    assert shape_x(tuner.figure, "threshold") == 0.65
    assert shape_x(tuner.figure, "search") == 0.7
    question = tuner.queries[tuner.query.value]

    def returned(threshold: float) -> int:
        found = memory.search(question, mode="vector", limit=100, namespace=loaded.namespace)
        return int((found["similarity"].clip(0, 1) >= threshold).sum())

    tuner.search.value = 0.1
    (shown,) = tuner.histogram_view.outputs
    layout = shown["data"]["application/vnd.plotly.v1+json"]["layout"]
    assert [s["x0"] for s in layout["shapes"] if s.get("name") == "search"] == [0.1]
    assert shape_x(tuner.figure, "threshold") == 0.65  # the other line stays
    # the count the tuner shows is what search_memories returns at that threshold
    assert tuner.counts_dict()["by_search"] == returned(0.1) > 0
    assert f"would return <b>{returned(0.1)}</b>" in tuner.counts.value
    tuner.search.value = 0.99
    assert tuner.counts_dict()["by_search"] == returned(0.99)
    tuner.search.value = 0.55
    tuner.apply_button.click()
    assert memory.settings.similarity_threshold == 0.55  # search_memories' default now
    assert memory.settings.relevance_threshold == 0.65


def test_limit_caps_relevance_hits(tiny) -> None:
    memory, loaded = tiny
    tuner = ThresholdTuner(memory, loaded, limit=2)
    tuner.relevance.value = 0.0
    assert tuner.counts_dict()["by_relevance"] <= 2


def test_apply_button_writes_settings_with_an_audit_row(tiny) -> None:
    memory, loaded = tiny
    tuner = ThresholdTuner(memory, loaded)
    tuner.relevance.value = 0.42
    tuner.salience.value = 0.6
    tuner.apply_button.click()
    assert memory.settings.relevance_threshold == 0.42
    assert memory.settings.salience_threshold == 0.6
    assert "applied" in tuner.status.value
    audit = memory.audit_log(action="settings")
    assert len(audit) == 1
    details = json.loads(audit["details"].iloc[0])
    assert details["before"] == {
        "relevance_threshold": 0.65,
        "similarity_threshold": 0.7,
        "salience_threshold": 0.8,
    }
    assert details["after"] == {
        "relevance_threshold": 0.42,
        "similarity_threshold": 0.7,
        "salience_threshold": 0.6,
    }
    assert details["source"] == "threshold tuner"
    # the applied values drive get_context from now on
    assert memory.get_context("session_2", "painting").parameters["relevance_threshold"] == 0.42


def test_apply_thresholds_validates(tiny) -> None:
    memory, _ = tiny
    with pytest.raises(InvalidInput, match="nothing to apply"):
        memory.apply_thresholds()
    with pytest.raises(InvalidInput, match="salience_threshold"):
        memory.apply_thresholds(salience_threshold=-0.5)
    assert memory.audit_log(action="settings").empty


def test_tuner_with_plain_queries_and_display(tiny) -> None:
    memory, _ = tiny
    tuner = ThresholdTuner(memory, ["cats", "allergies"])
    assert not tuner.labelled
    assert "relevant" not in tuner.recalled_frame().columns
    assert len(tuner.figure.data) == 1
    bundle = tuner._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    with pytest.raises(InvalidInput):
        ThresholdTuner(memory, [])


def test_explorer_filters_and_sorts(tiny) -> None:
    memory, loaded = tiny
    explorer = MemoryExplorer(memory, namespace=loaded.namespace)
    assert len(explorer.frame) == 6
    assert explorer.session.options == ("(all)", "session_1", "session_2")
    explorer.session.value = "session_1"
    assert len(explorer.frame) == 3
    assert "3 of 6 memories" in explorer.summary.value
    explorer.role.value = "assistant"  # Bob
    assert explorer.frame["content"].tolist() == ["Bob: Rex is a lovely name for a puppy"]
    explorer.role.value = "(all)"
    explorer.session.value = "(all)"
    explorer.text.value = "lisbon"
    assert len(explorer.frame) == 2
    explorer.text.value = ""
    explorer.since.value = dt.date(2023, 5, 20)
    assert set(explorer.frame["session_id"]) == {"session_2"}
    explorer.since.value = None
    explorer.until.value = dt.date(2023, 5, 8)
    assert set(explorer.frame["session_id"]) == {"session_1"}
    explorer.until.value = None
    explorer.descending.value = True
    assert explorer.frame["content"].iloc[0] == "Bob: See you next week"
    assert "See you next week" in explorer.table.value


def test_explorer_kind_filter_and_refresh(tiny) -> None:
    memory, _ = tiny
    explorer = MemoryExplorer(memory)
    assert len(explorer.frame) == 1
    memory.add_event("notes", "user", "a summary of the week", kind="summary")
    explorer.refresh_button.click()
    assert len(explorer.frame) == 2
    explorer.kind.value = "summary"
    assert explorer.frame["content"].tolist() == ["a summary of the week"]
    explorer.sort.value = "importance"
    explorer.kind.value = "(all)"
    assert explorer.frame["importance"].is_monotonic_increasing


def _saved_size(root) -> int:
    """Bytes of the state of every widget model ``root`` holds, as a notebook saves it."""
    import ipywidgets as widgets
    from ipywidgets.widgets.widget import _remove_buffers

    seen: dict[str, widgets.Widget] = {}
    stack = [root]
    while stack:
        widget = stack.pop()
        if widget.model_id in seen:
            continue
        seen[widget.model_id] = widget
        for key in widget.keys:
            value = getattr(widget, key)
            values = value if isinstance(value, (list, tuple)) else [value]
            stack.extend(v for v in values if isinstance(v, widgets.Widget))
    size = 0
    for widget in seen.values():
        state, _paths, buffers = _remove_buffers(widget.get_state())
        size += len(json.dumps(state, default=str)) + sum(len(b) for b in buffers)
    return size


def test_a_saved_tuner_stays_small_whatever_the_number_of_pairs() -> None:
    """A saved notebook holds the widgets' state: binned figures, no plotly script.

    With plotly FigureWidgets a notebook with one tuner saved 10.3 MB (two widget
    models of ~5 MB of script each); measured here the same way, 10.2 MB.
    """
    memory = Memory(":memory:", embedder="hash")
    try:
        memory.add_events(
            [
                {"session_id": "s", "content": f"note {i} on topic {i % 97}", "role": "user"}
                for i in range(2000)
            ]
        )
        assert memory.flush(timeout=60)
        tuner = ThresholdTuner(memory, [f"topic {i}" for i in range(30)])
        assert len(tuner.similarities) == 60_000
        assert _saved_size(tuner.widget) < 200_000
    finally:
        memory.close()
