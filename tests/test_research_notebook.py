"""notebooks/threshold-tuning.ipynb runs top to bottom with the real model and LoCoMo."""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from notebook_runs import executed

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "threshold-tuning.ipynb"
WIDGET = "application/vnd.jupyter.widget-view+json"
PLOTLY = "application/vnd.plotly.v1+json"


def _run(nb: nbformat.NotebookNode, cwd: Path) -> None:
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
    ).execute()


def _outputs(nb: nbformat.NotebookNode) -> list[dict]:
    return [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]


def test_threshold_tuning_notebook_executes(model_path, locomo_dir, tmp_path) -> None:
    nb, _ = executed(NOTEBOOK.name)  # one run per session, shared with tests/test_notebooks.py
    nbformat.write(nb, tmp_path / "threshold-tuning.executed.ipynb")
    outputs = _outputs(nb)
    assert not [o for o in outputs if o["output_type"] == "error"]
    text = "".join(
        o.get("text", "") + o.get("data", {}).get("text/plain", "")
        for o in outputs
        if o["output_type"] in ("stream", "execute_result")
    )
    assert "conv-26: 419 turns, 150 answerable questions" in text
    # distributions and the sweep are plotly figures, the tuner and explorer widgets
    figures = [o for o in outputs if PLOTLY in o.get("data", {})]
    assert len(figures) >= 4
    titles = [o["data"][PLOTLY]["layout"]["title"]["text"] for o in figures]
    assert any("similarity of questions" in t for t in titles)
    assert any(t.startswith("Threshold sweep") for t in titles)
    assert sum(1 for o in outputs if WIDGET in o.get("data", {})) == 2
    # it ends with the recommended thresholds
    last = nb.cells[-1]
    final = last.outputs[-1]["data"]["text/plain"]
    recommended = ast.literal_eval(final)
    # both similarity thresholds (000's relevance, 004's search) applied, salience kept
    assert set(recommended) == {
        "relevance_threshold",
        "similarity_threshold",
        "salience_threshold",
    }
    assert 0.3 <= recommended["relevance_threshold"] < 0.65
    assert 0.3 <= recommended["similarity_threshold"] <= 0.8
    text = "".join(o.get("text", "") for o in last.outputs)
    assert "relevance_threshold:" in text and "similarity_threshold:" in text
    assert "applied: mem.apply_thresholds(**recommended)" in text


@pytest.mark.slow
def test_notebook_with_a_folder_without_data_says_where_it_comes_from(tmp_path, monkeypatch):
    """NBMEMORY_LOCOMO_PATH set to a folder with no LoCoMo: a clear error, not a fallback
    (without the variable the notebook runs on a generated chat: tests/test_notebooks.py)."""
    empty = tmp_path / "locomo"
    empty.mkdir()
    monkeypatch.setenv("NBMEMORY_LOCOMO_PATH", str(empty))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    with pytest.raises(CellExecutionError) as excinfo:
        _run(nb, tmp_path)
    assert f"no LoCoMo .json files in {empty}" in str(excinfo.value)
    assert "snap-research/locomo" in str(excinfo.value)
    assert "InvalidInput" in str(excinfo.value)
