"""Jupyter integration: the kernel config snippet, its installer, and the quickstart notebook.

The quickstart runs in a real kernel (the venv's ipykernel) with the real model;
the installer is checked on files and then by a real kernel that reads them.
"""

from __future__ import annotations

import os
import queue
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import start_new_kernel
from nbclient import NotebookClient

from nbmemory import cli
from nbmemory.errors import InvalidInput
from nbmemory.notebook.ipython_config import BEGIN, SNIPPET, install, profile_config_path, uninstall

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "notebooks" / "quickstart.ipynb"


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


def test_quickstart_notebook_runs_clean_with_the_real_model(model_path, tmp_path, monkeypatch):
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))  # no user profile config
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    nb = nbformat.read(QUICKSTART, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}
    )
    client.execute()  # raises CellExecutionError on the first failing cell

    for cell in nb.cells:
        for output in cell.get("outputs", []):
            assert output["output_type"] != "error", cell.source
            assert output.get("name") != "stderr" or "Warning" in output["text"], output["text"]
    assert "remembered" in _text(_cell(nb, "%%remember --role system"))
    avoid = _text(_cell(nb, "%recall which food should we avoid?"))
    assert avoid.index("vegetarian") < avoid.index("trams")  # the diet turn ranks first
    missed = _text(_cell(nb, "%recall how much money can we spend? --threshold 0.9"))
    assert "no memory reached similarity 0.90" in missed and "the best scored" in missed
    assert "Near misses" in _text(_cell(nb, "%context what should we do with the kids? --session"))
    status = _text(_cell(nb, "%memory status"))
    assert "8 events (8 embedded, 0 pending, 0 failed)" in status
    assert "all-MiniLM-L6-v2" in status
    assert list(workdir.iterdir()) == []  # the store went to a temporary folder


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
