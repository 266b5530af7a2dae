"""Running the shipped notebooks, and what of their outputs must not change.

:func:`executed` runs a notebook of ``notebooks/`` once per test session (outputs
cleared first, a fresh IPython profile, a temporary working folder) in a real
kernel with nbclient, so the tests of several modules share one run.

:func:`substance` is what a reader gets from a cell's outputs, with what differs
between two honest runs masked: ids, timestamps and dates, durations, memory
addresses, temporary paths, the resident memory a model load added and floats
beyond two decimals.  Text outputs and
streams are kept; a DataFrame by the cells of its HTML table (its ``text/plain``
wraps where the timestamps' width says, which differs between runs); other rich
outputs (HTML, widgets) by their ``text/plain`` fallback; a figure with no text
fallback by its title and traces.  Counts, columns and the
first two decimals stay, so a changed count, a missing column or a moved score
is a difference.
"""

from __future__ import annotations

import atexit
import copy
import functools
import html
import os
import re
import shutil
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
PLOTLY = "application/vnd.plotly.v1+json"

_TEMP_ROOTS = sorted(
    {re.escape(p) for p in ("/tmp", "/var/folders", tempfile.gettempdir())}, key=len, reverse=True
)
#: (pattern, replacement), applied in order.
MASKS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<id>"),
    (re.compile(rf"(?:{'|'.join(_TEMP_ROOTS)})/[^\s'\";,]*"), "<tmp>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<address>"),
    (
        re.compile(
            r"\b\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
        ),
        "<time>",
    ),
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|µs|us|ns|s|sec|seconds?|min|minutes?)\b"), "<duration>"),
    (re.compile(r"\+\d+ MB resident"), "+<MB> MB resident"),  # the model's load, measured
    (re.compile(r"(\d+\.\d{2})\d+"), r"\1…"),
    (re.compile(r"[ \t]+"), " "),
    (re.compile(r" ?\n ?"), "\n"),
]


def mask(text: str) -> str:
    """``text`` with what changes from run to run replaced by placeholders.

    >>> mask("remembered 9c0fb0e4-9f95-4fb7-ae65-7b4c98b11dcd at 2026-11-30 12:36:40.620207")
    'remembered <id> at <time>'
    >>> mask("0.586455    0.50  /tmp/nbmemory-rj6rypyc/quickstart.duckdb; took 1.5 s")
    '0.58… 0.50 <tmp>; took <duration>'
    """
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return text.strip()


_ROW = re.compile(r"<tr[^>]*>(.*?)</tr>", re.S)
_CELL = re.compile(r"<t[hd][^>]*>(.*?)</t[hd]>", re.S)
_CAPTION = re.compile(r"<p>(.*?)</p>", re.S)


def _frame(markup: str) -> str:
    """The rows of a pandas HTML table (and its shape line), cells joined by ``|``."""
    rows = [
        " | ".join(html.unescape(cell).strip() for cell in _CELL.findall(row))
        for row in _ROW.findall(markup)
    ]
    return "\n".join(rows + [html.unescape(p) for p in _CAPTION.findall(markup)])


def _figure(spec: dict) -> str:
    title = spec.get("layout", {}).get("title", {})
    title = title.get("text", "") if isinstance(title, dict) else str(title or "")
    traces = ", ".join(
        f"{t.get('type', 'scatter')} {t.get('name', '')}".strip() for t in spec.get("data", [])
    )
    return f"<figure {title!r}: {traces}>"


def substance(cell: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """The outputs of a code cell as (kind, masked text), consecutive streams joined."""
    result: list[tuple[str, str]] = []
    for output in cell.get("outputs", []):
        kind = output["output_type"]
        if kind == "stream":
            kind, text = f"stream:{output['name']}", output["text"]
            if result and result[-1][0] == kind:
                kind, previous = result.pop()
                text = previous + text
            result.append((kind, text))
            continue
        if kind == "error":
            result.append((kind, f"{output['ename']}: {output['evalue']}"))
            continue
        data = output.get("data", {})
        if 'class="dataframe"' in data.get("text/html", ""):
            text = _frame(data["text/html"])
        elif "text/plain" in data:
            text = data["text/plain"]
        elif PLOTLY in data:
            text = _figure(data[PLOTLY])
        else:
            text = "<" + ", ".join(sorted(data)) + ">"
        result.append(("result" if kind == "execute_result" else "display", text))
    return [(kind, mask(text)) for kind, text in result]


def clear_outputs(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


def execute(
    nb: nbformat.NotebookNode,
    workdir: Path,
    ipython_dir: Path,
    *,
    without: tuple[str, ...] = (),
) -> nbformat.NotebookNode:
    """Run ``nb`` in place in a fresh kernel (raises CellExecutionError on a failing cell),
    with the environment variables named in ``without`` unset.

    The widget state is not stored in the notebook (it is megabytes of the tuner's
    data, and a kernel rebuilds it when the cells run again), nor the timings.
    """
    client = NotebookClient(
        nb,
        timeout=900,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
        store_widget_state=False,
        record_timing=False,
    )
    env = {k: v for k, v in os.environ.items() if k not in without}
    client.execute(env={**env, "IPYTHONDIR": str(ipython_dir)})
    return nb


@functools.cache
def _executed(name: str) -> tuple[nbformat.NotebookNode, Path]:
    root = Path(tempfile.mkdtemp(prefix=f"nbmemory-test-{Path(name).stem}-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    workdir = root / "cwd"
    workdir.mkdir()
    nb = clear_outputs(nbformat.read(NOTEBOOKS / name, as_version=4))
    return execute(nb, workdir, root / "ipython"), workdir


def executed(name: str) -> tuple[nbformat.NotebookNode, Path]:
    """``notebooks/<name>`` run once per session: (a copy of the notebook, its working folder)."""
    nb, workdir = _executed(name)
    return copy.deepcopy(nb), workdir


def differences(committed: nbformat.NotebookNode, fresh: nbformat.NotebookNode) -> list[str]:
    """Where the committed outputs differ in substance from a fresh run, cell by cell."""
    old = [c for c in committed.cells if c.cell_type == "code"]
    new = [c for c in fresh.cells if c.cell_type == "code"]
    if [c.source for c in old] != [c.source for c in new]:
        return ["the code cells differ: compare the same notebook"]
    found = []
    for number, (before, after) in enumerate(zip(old, new, strict=True), start=1):
        if substance(before) != substance(after):
            found.append(
                f"code cell {number} ({before.source.splitlines()[0] if before.source else ''!r}):\n"
                f"  committed: {substance(before)!r}\n  fresh:     {substance(after)!r}"
            )
    return found
