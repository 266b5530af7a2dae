"""Jupyter integration: the kernel config snippet, its installer, and the quickstart notebook.

The quickstart runs in a real kernel (the venv's ipykernel) with the real model;
the installer is checked on files and then by a real kernel that reads them.
"""

from __future__ import annotations

import ast
import os
import queue
import re
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import start_new_kernel
from notebook_runs import NOTEBOOKS, clear_outputs, differences, execute, executed, mask, substance

from nbmemory import cli
from nbmemory.errors import InvalidInput
from nbmemory.notebook.ipython_config import BEGIN, SNIPPET, install, profile_config_path, uninstall

#: Notebooks run in real kernels.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "notebooks" / "quickstart.ipynb"
TUNING = ROOT / "notebooks" / "threshold-tuning.ipynb"


# -- the snippet and its installer -----------------------------------------------------
def test_shipped_snippet_is_the_one_the_cli_installs():
    shipped = (ROOT / "jupyter-config" / "ipython_kernel_config.py").read_text(encoding="utf-8")
    assert shipped == SNIPPET
    assert 'c.InteractiveShellApp.extensions.append("nbmemory")' in SNIPPET


def test_install_creates_then_changes_nothing(tmp_path):
    path, what = install("default", str(tmp_path))
    assert what == "created"
    assert path == tmp_path / "profile_default" / "ipython_kernel_config.py"
    assert path.read_text() == SNIPPET
    assert install("default", str(tmp_path)) == (path, "unchanged")
    assert path.read_text() == SNIPPET


def test_install_appends_to_the_users_config_and_uninstall_restores_it(tmp_path):
    path = profile_config_path("work", str(tmp_path))
    path.parent.mkdir(parents=True)
    own = 'c.InteractiveShellApp.extensions = ["autoreload"]\nc.InteractiveShell.colors = "nocolor"'
    path.write_text(own)
    assert install("work", str(tmp_path)) == (path, "appended")
    text = path.read_text()
    assert text.startswith(own + "\n")
    assert text.endswith(SNIPPET) and text.count(BEGIN) == 1
    assert install("work", str(tmp_path))[1] == "unchanged"
    assert path.read_text() == text
    assert uninstall("work", str(tmp_path)) == (path, "removed")
    assert path.read_text() == own + "\n"
    assert uninstall("work", str(tmp_path))[1] == "absent"


def test_install_updates_an_older_block_in_place(tmp_path):
    path = profile_config_path("default", str(tmp_path))
    path.parent.mkdir(parents=True)
    old_block = (
        f"{BEGIN}\nc.InteractiveShellApp.extensions.append('nbmemory')  # v0\n# <<< nbmemory <<<\n"
    )
    path.write_text("before = 1\n" + old_block + "after = 2\n")
    assert install("default", str(tmp_path))[1] == "updated"
    assert path.read_text() == "before = 1\n" + SNIPPET + "after = 2\n"


def test_install_leaves_a_config_that_already_loads_nbmemory_alone(tmp_path):
    path = profile_config_path("default", str(tmp_path))
    path.parent.mkdir(parents=True)
    own = "c.InteractiveShellApp.extensions = ['nbmemory', 'autoreload']\n"
    path.write_text(own)
    assert install("default", str(tmp_path))[1] == "yours"
    assert path.read_text() == own


def test_install_refuses_broken_markers_and_bad_profiles(tmp_path):
    path = profile_config_path("default", str(tmp_path))
    path.parent.mkdir(parents=True)
    broken = f"x = 1\n{BEGIN}\nno end marker\n"
    path.write_text(broken)
    with pytest.raises(InvalidInput, match="unmatched or repeated"):
        install("default", str(tmp_path))
    with pytest.raises(InvalidInput, match="unmatched or repeated"):
        uninstall("default", str(tmp_path))
    assert path.read_text() == broken
    with pytest.raises(InvalidInput, match="plain name"):
        install("../elsewhere", str(tmp_path))


def test_cli_install_ipython_config(tmp_path, capsys):
    argv = ["install-ipython-config", "--ipython-dir", str(tmp_path), "--profile", "nb"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "created" in out and "profile_nb" in out
    assert cli.main(argv) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert cli.main([*argv, "--print"]) == 0
    assert capsys.readouterr().out == SNIPPET
    assert cli.main([*argv, "--uninstall"]) == 0
    assert "removed" in capsys.readouterr().out
    assert not (tmp_path / "profile_nb" / "ipython_kernel_config.py").exists()
    assert cli.main([*argv[:-1], "bad/name"]) == 1
    assert "plain name" in capsys.readouterr().err


def _kernel_output(env: dict[str, str], code: str) -> str:
    km, kc = start_new_kernel(kernel_name="python3", env=env, startup_timeout=120)
    chunks: list[str] = []

    def hook(msg: dict) -> None:
        if msg["msg_type"] == "stream":
            chunks.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            chunks.append("ERROR " + msg["content"]["ename"] + ": " + msg["content"]["evalue"])

    try:
        kc.execute_interactive(code, output_hook=hook, timeout=120)
    except queue.Empty:  # pragma: no cover - reported by the assertion below
        chunks.append("TIMEOUT")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return "".join(chunks)


def test_installed_snippet_makes_a_real_kernel_load_nbmemory(tmp_path):
    ipython_dir = tmp_path / "ipython"
    path = profile_config_path("default", str(ipython_dir))
    path.parent.mkdir(parents=True)
    path.write_text('c.InteractiveShellApp.extensions = ["storemagic"]\n')
    install("default", str(ipython_dir))
    env = {**os.environ, "IPYTHONDIR": str(ipython_dir)}
    out = _kernel_output(
        env,
        "ip = get_ipython()\n"
        "print(sorted(ip.extension_manager.loaded))\n"
        "print('remember' in ip.magics_manager.magics['cell'])\n",
    )
    assert "'nbmemory'" in out and "storemagic" in out, out
    assert "True" in out, out


# -- the quickstart --------------------------------------------------------------------
def _text(cell: nbformat.NotebookNode) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append(output["text"])
        data = output.get("data", {})
        parts.append(data.get("text/plain", ""))
        parts.append(data.get("text/html", ""))
    return "\n".join(parts)


def _cell(nb: nbformat.NotebookNode, source_start: str) -> nbformat.NotebookNode:
    return next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith(source_start))


def test_quickstart_notebook_runs_clean_with_the_real_model(model_path):
    nb, workdir = executed(QUICKSTART.name)  # raises CellExecutionError on a failing cell
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            assert output["output_type"] != "error", cell.source
            assert output.get("name") != "stderr" or "Warning" in output["text"], output["text"]
    assert "remembered" in _text(_cell(nb, "%%remember --role system"))
    avoid = _text(_cell(nb, "%recall which food should we avoid?"))
    # the diet turn ranks first: its row comes before every other turn's
    others = [
        avoid.index(t) for t in ("flights", "I'm Ana", "budget", "Lovely", "trams") if t in avoid
    ]
    assert len(others) >= 3 and avoid.index("vegetarian") < min(others)
    assert "score" in avoid and "signals" in avoid
    missed = _text(_cell(nb, "%recall how much money can we spend? --threshold 0.9"))
    assert "no memory reached similarity 0.90" in missed and "the best scored" in missed
    assert "Near misses" in _text(_cell(nb, "%context what should we do with the kids? --session"))
    status = _text(_cell(nb, "%memory status"))
    assert "8 events (8 embedded, 0 pending, 0 failed)" in status
    assert "all-MiniLM-L6-v2" in status
    assert list(workdir.iterdir()) == []  # the store went to a temporary folder
    assert _text(_cell(nb, "import shutil")).strip() == "False"  # which the last cell removes


def test_quickstart_has_readable_saved_outputs():
    """The committed notebook carries its outputs, so it reads well on GitHub and Binder."""
    nb = nbformat.read(QUICKSTART, as_version=4)
    nbformat.validate(nb)
    magic_cells = [
        c for c in nb.cells if c.cell_type == "code" and c.source.startswith(("%%remember", "%"))
    ]
    assert len(magic_cells) >= 12
    assert all(c.outputs for c in magic_cells)
    assert nb.metadata["kernelspec"]["name"] == "python3"


# -- the committed outputs say what a fresh run says -----------------------------------
def _assert_committed_outputs_are_fresh(name: str) -> None:
    committed = nbformat.read(NOTEBOOKS / name, as_version=4)
    fresh, _ = executed(name)
    found = differences(committed, fresh)
    assert not found, (
        f"notebooks/{name}: the committed outputs differ from a fresh run; re-execute it "
        "and review the prose against the new outputs.\n" + "\n".join(found)
    )


def test_quickstart_committed_outputs_match_a_fresh_run(model_path):
    _assert_committed_outputs_are_fresh(QUICKSTART.name)


def test_threshold_tuning_committed_outputs_match_a_fresh_run(model_path, locomo_dir):
    _assert_committed_outputs_are_fresh(TUNING.name)


def test_threshold_tuning_runs_without_locomo_and_ends_with_both_thresholds_applied(
    model_path, tmp_path
):
    """On Binder there is no LoCoMo: the notebook runs on a chat nbmemory generates."""
    nb = clear_outputs(nbformat.read(TUNING, as_version=4))
    (tmp_path / "cwd").mkdir()
    execute(nb, tmp_path / "cwd", tmp_path / "ipython", without=("NBMEMORY_LOCOMO_PATH",))
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            assert output["output_type"] != "error", cell.source
    assert "NBMEMORY_LOCOMO_PATH is not set: using tech-chat/" in _text(nb.cells[1])
    last = _text(_cell(nb, "recommended = {"))
    assert "applied: mem.apply_thresholds(**recommended), audit rows: 1" in last
    applied = ast.literal_eval(last[last.index("{") :].strip())
    # both thresholds are the notebook's measured ones, each printed above with its rule
    assert f"relevance_threshold: {applied['relevance_threshold']:.2f} (" in last
    assert f"similarity_threshold: {applied['similarity_threshold']:.2f} (best F1" in last
    assert "ThresholdTuner" in _cell(nb, "tuner = ThresholdTuner").source


RECALL_OUTPUT = """\
                                     id                                       content  role  \\
0  cffdfb62-6898-407b-bcdd-e58673919a6a  I'm vegetarian, and the kids won't eat fish.  user
1  9e3e6005-b3cc-491e-b490-9bee810879ad            The kids love trams and aquariums.  user

   similarity  importance                 created_at     score          signals
0    0.503694        0.85 2026-11-30 12:36:40.620207  0.535463           vector
1    0.180736        0.50 2026-11-30 12:36:40.455514  0.170112  vector, keyword"""
STATUS_OUTPUT = (
    "/tmp/nbmemory-rj6rypyc/quickstart.duckdb · namespace 'default' · 8 events (8 embedded)"
)


def _notebook(recall: str, status: str, stream: list[str]) -> nbformat.NotebookNode:
    def result(text: str) -> nbformat.NotebookNode:
        return nbformat.v4.new_output(
            "execute_result", data={"text/plain": text, "text/html": "<b>x</b>"}, execution_count=1
        )

    return nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("prose"),
            nbformat.v4.new_code_cell("%recall food", outputs=[result(recall)]),
            nbformat.v4.new_code_cell("%memory status", outputs=[result(status)]),
            nbformat.v4.new_code_cell(
                "print(prompt)",
                outputs=[nbformat.v4.new_output("stream", name="stdout", text=t) for t in stream],
            ),
        ]
    )


def test_the_comparison_masks_run_noise_but_not_substance():
    """Offline: ids, times, paths and far decimals are noise; columns and counts are not."""
    prompt = ["[2026-11-30 12:36] user: hi\n", "took 1.5 s at 0x7f6dc303f9f0\n"]
    committed = _notebook(RECALL_OUTPUT, STATUS_OUTPUT, prompt)
    assert differences(committed, committed) == []
    noise = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}", "0123abcd-4567", RECALL_OUTPUT)  # other ids
    noise = re.sub(r"\d{2}:\d{2}:\d{2}\.\d{6}", "23:59:59.000001", noise)  # other times
    noise = re.sub(r"(\d\.\d{2})\d{4}", r"\g<1>9999", noise)  # other far decimals
    other_run = _notebook(
        noise,
        STATUS_OUTPUT.replace("rj6rypyc", "x_81kq0a"),  # another temporary folder
        ["[2026-12-02 09:01] user: hi\ntook 12 ms at 0x55d0c1a2b3c4\n"],  # one stream chunk
    )
    assert differences(committed, other_run) == []

    def changed(recall: str = RECALL_OUTPUT, status: str = STATUS_OUTPUT) -> list[str]:
        return differences(committed, _notebook(recall, status, prompt))

    assert changed(recall=RECALL_OUTPUT.replace("signals", ""))  # a missing column
    assert changed(recall=RECALL_OUTPUT.replace("0.503694", "0.493694"))  # a moved score
    assert changed(recall=RECALL_OUTPUT.replace("vector, keyword", "vector"))  # another signal
    assert changed(status=STATUS_OUTPUT.replace("8 events", "9 events"))  # a changed count
    assert changed(recall=RECALL_OUTPUT.rsplit("\n", 1)[0])  # a missing row
    moved = _notebook(RECALL_OUTPUT, STATUS_OUTPUT, prompt)
    moved.cells[3].source = "print(prompt.report())"
    assert differences(committed, moved) == ["the code cells differ: compare the same notebook"]


def test_shipped_notebooks_are_commit_ready():
    """Outputs saved, no widget-state blob, and the source systems named, not numbered."""
    for path in (QUICKSTART, TUNING):
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        assert "widgets" not in nb.metadata, f"{path.name}: widget state saved (megabytes)"
        assert path.stat().st_size < 1_500_000, f"{path.name}: {path.stat().st_size:,} bytes"
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert sum(1 for c in code if c.outputs) >= len(code) - 1, path.name  # all but imports
        for cell in nb.cells:
            text = cell.source
            assert not re.search(r"\bseeds? ?\d|\bissue \d", text), (path.name, text)


def test_a_frame_whose_text_wraps_elsewhere_is_the_same_output():
    """pandas wraps a wide frame's text where its columns' widths say, and a timestamp
    is printed to the microsecond or to the millisecond depending on its value: two
    honest runs then wrap differently.  The comparison reads the HTML table instead."""
    import pandas as pd

    def cell(stamp: str) -> nbformat.NotebookNode:
        frame = pd.DataFrame(
            {
                "namespace": ["default"],
                "session_id": ["lisbon-trip"],
                "user_id": [None],
                "status": ["untracked"],
                "events": [8],
                "created_at": [pd.Timestamp(stamp)],
                "last_activity": [pd.Timestamp(stamp)],
                "expires_at": [pd.NaT],
                "closed_at": [pd.NaT],
                "state": [None],
            }
        )
        with pd.option_context("display.width", 80, "display.max_columns", 20):
            data = {"text/plain": repr(frame), "text/html": frame._repr_html_()}
        output = nbformat.v4.new_output("execute_result", data=data, execution_count=1)
        return nbformat.v4.new_code_cell("%memory sessions", outputs=[output])

    micro, milli = cell("2026-12-02 06:26:28.020553"), cell("2026-12-02 06:26:28.020000")
    # the masked texts differ (they wrap after other columns) ...
    assert mask(micro.outputs[0].data["text/plain"]) != mask(milli.outputs[0].data["text/plain"])
    # ... the outputs do not
    assert substance(micro) == substance(milli)
    changed = cell("2026-12-02 06:26:28.020553")
    changed.outputs[0].data["text/html"] = (
        changed.outputs[0].data["text/html"].replace("untracked", "active")
    )
    assert substance(changed) != substance(micro)
