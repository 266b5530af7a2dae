"""The notebook surface as a person meets it, on a real IPython ``InteractiveShell``.

What the magics say and show: ``%recall -- 2024`` searches, a held store is
explained in notebook words (``%memory close``, ``MemoryMagics.shared``), ``-k 0``
is refused, ``%context`` reads as a table in a plain-text frontend, ``%recall?``
names every column, and the ``notebook`` extra can run a kernel.  Offline
embedder; cells go through ``shell.run_cell`` as in tests/test_magics.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from notebook_shell import one_line_usage_error, run

from nbmemory import Context, Memory, StoreLocked
from nbmemory.notebook.magics import RECALL_COLUMNS
from nbmemory.notebook.parsers import RECALL
from nbmemory.store import SharedStore

ROOT = Path(__file__).resolve().parents[1]


# -- 5: %recall -- 2024 searches for the number -----------------------------------------
def test_recall_double_dash_searches_for_a_number(ip, magics):
    run(ip, "%%remember\nOur 2024 budget was 50k dollars")
    run(ip, "%%remember\nThe kids love trams")
    ip.rl_next_input = None
    frame = run(ip, "%recall -- 2024")
    assert isinstance(frame, pd.DataFrame), "went to IPython's history recall"
    assert frame.attrs["query"] == "2024"
    assert frame["content"].iloc[0] == "Our 2024 budget was 50k dollars"
    assert ip.rl_next_input is None  # nothing put on the next input line
    assert run(ip, "%recall -k 1 -- 3-5").attrs["query"] == "3-5"
    assert run(ip, "%recall -k 1 -- 2024").attrs["query"] == "2024"


def test_recall_numbers_without_double_dash_stay_history(ip, magics):
    run(ip, "y = 'a history line'")
    number = ip.execution_count - 1
    ip.rl_next_input = None
    assert run(ip, f"%recall {number}") is None
    assert ip.rl_next_input == "y = 'a history line'"
    ip.rl_next_input = None
    assert run(ip, f"%recall {number - 1}-{number}") is None
    assert "a history line" in ip.rl_next_input
    assert len(magics.memory.events()) == 0


# -- 6: a held store, in notebook words; the shared setting ----------------------------
def test_a_held_store_is_explained_in_notebook_words(ip, magics, held_store, capsys):
    err = one_line_usage_error(ip, "%recall anything", capsys)
    assert f"in use by process {held_store}" in err and magics.path in err
    assert "%memory close" in err
    assert "%config MemoryMagics.shared = True" in err and "NBMEMORY_SHARED=1" in err
    assert "mem.close()" not in err and "Memory(path" not in err
    assert one_line_usage_error(ip, "%%remember\nnot stored", capsys) == err
    # the Python API keeps its own words
    with pytest.raises(StoreLocked) as info:
        Memory(magics.path, embedder="hash")
    assert "mem.close()" in str(info.value) and "shared=True" in str(info.value)
    assert "%memory" not in str(info.value)


def test_a_shared_kernel_waiting_on_a_held_store_says_the_same(
    ip, magics, held_store, capsys, monkeypatch
):
    monkeypatch.setenv("NBMEMORY_LOCK_TIMEOUT", "0.3")
    run(ip, "%config MemoryMagics.shared = True")
    err = one_line_usage_error(ip, "%recall anything", capsys)
    assert f"in use by process {held_store}" in err
    assert "%memory close" in err and "mem.close()" not in err


def test_shared_setting_opens_a_shared_store_and_reopens_on_change(ip, magics):
    assert magics.shared is None
    run(ip, "%%remember\nwritten before sharing")
    first = magics.memory
    assert not isinstance(first.store, SharedStore)
    run(ip, "%config MemoryMagics.shared = True")
    assert first.closed
    assert isinstance(magics.memory.store, SharedStore)
    assert run(ip, "%recall written")["content"].tolist() == ["written before sharing"]
    run(ip, "%config MemoryMagics.shared = False")
    assert not isinstance(magics.memory.store, SharedStore)


def test_shared_none_follows_the_environment(ip, magics, monkeypatch):
    monkeypatch.setenv("NBMEMORY_SHARED", "1")
    assert isinstance(magics.memory.store, SharedStore)
    magics.close()
    monkeypatch.setenv("NBMEMORY_SHARED", "0")
    assert not isinstance(magics.memory.store, SharedStore)
    magics.close()
    monkeypatch.setenv("NBMEMORY_SHARED", "1")
    run(ip, "%config MemoryMagics.shared = False")  # the setting wins over the environment
    assert magics.shared is False
    assert not isinstance(magics.memory.store, SharedStore)


def test_shared_comes_from_the_kernel_config_file(shell, tmp_path):
    shell.config.MemoryMagics.shared = True
    try:
        shell.extension_manager.load_extension("nbmemory")
        magics = shell.magics_manager.registry["MemoryMagics"]
        magics.embedder = "hash"
        magics.path = str(tmp_path / "from-config.duckdb")
        assert magics.shared is True
        assert isinstance(magics.memory.store, SharedStore)
    finally:
        shell.extension_manager.unload_extension("nbmemory")
        del shell.config["MemoryMagics"]


# -- 7: -k 0 ----------------------------------------------------------------------------
def test_recall_k_zero_is_refused_in_one_line(ip, magics, capsys):
    run(ip, "%%remember\nMy name is John and I love TypeScript")
    err = one_line_usage_error(ip, "%recall TypeScript -k 0", capsys)
    assert "-k" in err and "1 or more" in err
    assert "store some with %%remember" not in err
    assert len(run(ip, "%recall TypeScript -k 1")) == 1


def test_recall_limit_zero_is_refused_by_config(ip, magics, caplog):
    run(ip, "%config MemoryMagics.recall_limit = 0")
    assert magics.recall_limit == 5
    assert "recall_limit must be 1 or more" in caplog.text


# -- 8: %context in a plain-text frontend ----------------------------------------------
def test_context_reads_as_a_table_in_plain_text(ip, magics):
    run(ip, "%%remember --importance 0.9\nOur project budget is 50k dollars")
    run(ip, "%%remember\nMy name is John and I love TypeScript")
    context = run(ip, "%context what is the project budget?")
    assert isinstance(context, Context)
    shown, _ = ip.display_formatter.format(context)
    text = shown["text/plain"]
    lines = text.splitlines()
    assert lines[0] == context.summary()
    header = lines[1].split()
    assert header == ["strategies", "role", "content", "similarity", "importance"] + [
        "recency_rank",
        "created_at",
    ]
    assert len(lines) == 2 + len(context)  # summary, header, one line per memory
    assert any("Our project budget is 50k dollars" in line for line in lines[2:])
    assert any(line.startswith("relevance, salience, recency") for line in lines[2:])
    assert repr(context) == text  # print(repr(ctx)), nbconvert --to markdown, pagers
    assert "<table" in shown["text/html"]  # notebooks keep the HTML table


def test_context_text_cuts_long_content_and_lists_near_misses(ip, magics):
    run(ip, "%%remember --session past\n" + "a very long memory about TypeScript " * 10)
    context = run(ip, "%context TypeScript --explain --threshold 0.99")
    assert len(context) == 0 and not context.near_misses.empty
    lines = repr(context).splitlines()
    assert lines[:2] == [context.summary(), "(no memories)"]
    assert "Near misses:" in lines and "missed_by" in lines[lines.index("Near misses:") + 1]
    assert all(len(line) < 250 for line in lines)
    assert any("a very long memory about TypeScript a very long" in line for line in lines)
    assert any(line.rstrip().endswith("...") or "... " in line for line in lines)  # cut
    run(ip, "%%remember --session nobody-else --importance 0.9\nthe one salient memory")
    single = run(ip, "%context --session nobody-here")
    assert ": 1 memory (0 relevance, 1 salience, 0 recency)" in repr(single).splitlines()[0]


# -- 9: %recall? names every column ----------------------------------------------------
def test_recall_help_names_every_column(ip, magics, capsys):
    capsys.readouterr()
    run(ip, "%recall?")
    help_text = capsys.readouterr().out
    usage = RECALL.format_help()
    for text in (help_text, usage):
        for column in RECALL_COLUMNS:
            assert re.search(rf"\b{column}\b", text), (column, text)
    assert "signals (what found each hit" in " ".join(usage.split())


# -- 10: the notebook extra runs a kernel ----------------------------------------------
def test_notebook_extra_has_a_kernel():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # no tomllib on 3.10
    extras = pyproject.split("[project.optional-dependencies]", 1)[1]
    notebook = re.search(r"^notebook = \[(?P<list>[^\]]*)\]", extras, re.MULTILINE)
    assert notebook, "no notebook extra"
    requirements = re.findall(r'"([^"]+)"', notebook["list"])
    names = {re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0] for requirement in requirements}
    assert {"ipython", "ipykernel", "ipywidgets", "plotly", "anywidget"} <= names
