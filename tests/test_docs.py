"""The documentation runs: every ```python block of README.md, CONTRIBUTING.md and
docs/*.md.

Each file's blocks run in order, as the cells of one notebook: one IPython
``InteractiveShell`` per file (so ``%load_ext nbmemory``, ``%%remember`` and
``%recall`` blocks run too), in a temporary working directory, with the real
embedding model (``$NBMEMORY_MODEL_PATH``).  A block that is not meant to run is
fenced as ```python notest (Python that must not run: it needs what the page
cannot provide, or would change the process for later tests; it must still
compile), ```bash, ```text and so on; a bare ``` fence is refused, so every
block says which it is.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from nbmemory.config import ENV_MODEL_PATH, ENV_STORE_PATH
from nbmemory.memory import _OPEN
from nbmemory.research.datasets import ENV_LOCOMO_PATH
from nbmemory.store.shared import ENV_SHARED

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


#: Info strings a fenced block may have: the first word is the language.
LANGUAGES = {"python", "bash", "text", "toml", "json"}

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


@dataclass
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    info: str
    code: str

    @property
    def runs(self) -> bool:
        return self.info.split() == ["python"]

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def code_blocks(path: Path) -> list[Block]:
    """Every fenced code block of a markdown file, in order (indented ones dedented)."""
    blocks: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            line = lines[j]
            stripped = line.strip()
            if stripped.startswith(fence) and not stripped.strip(fence[0]):
                break
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            j += 1
        else:
            raise AssertionError(f"{path.relative_to(ROOT)}:{i + 1}: unclosed code fence")
        blocks.append(Block(path, i + 1, opening["info"].strip(), "\n".join(body) + "\n"))
        i = j + 1
    return blocks


def _contents(found: Any) -> list[str]:
    return [str(text) for text in found["content"]]


#: What some examples must show, not only run: page -> {a name its examples bind: a check
#: of the value}, checked in the page's shell after its last block.  An example that
#: returns an empty frame runs as well as one that returns the row it shows.
OUTCOMES: dict[str, dict[str, Callable[[Any], bool]]] = {
    "README.md": {
        # the Astreus API's search sees the memory the example stored with that API
        "budget": lambda found: _contents(found) == ["The project budget is $50k"],
    },
    "docs/python-api.md": {
        # the Astreus search with the threshold the example explains finds the budget
        "recent": lambda found: _contents(found) == ["Budget is $50k"],
        # plain SQL that reads returns its rows
        "per_role": lambda rows: bool(rows) and all(len(row) == 2 for row in rows),
    },
}


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in paths]


def needs_locomo(path: Path) -> bool:
    """Whether the page's examples read the LoCoMo data (``locomo_path()``)."""
    return any(b.runs and "locomo_path(" in b.code for b in code_blocks(path))


@pytest.mark.parametrize("path", DOCS, ids=_ids(DOCS))
def test_every_block_says_what_it_is(path: Path) -> None:
    """No bare fences: a block either runs (```python) or says it does not."""
    for block in code_blocks(path):
        words = block.info.split()
        assert words and words[0] in LANGUAGES, (
            f"{block.where()}: fence the block as ```python (it runs in tests/test_docs.py), "
            f"```python notest, ```bash or ```text, not ```{block.info}"
        )
        if words[0] == "python":
            assert words in (["python"], ["python", "notest"]), f"{block.where()}: ```{block.info}"
        if words == ["python", "notest"]:
            compile(block.code, block.where(), "exec")  # illustrative, but valid Python


@pytest.mark.parametrize("path", DOCS, ids=_ids(DOCS))
def test_local_links_resolve(path: Path) -> None:
    """Links to files of the repository (README -> docs/, docs -> each other) exist."""
    text = path.read_text(encoding="utf-8")
    for match in _LINK.finditer(text):
        target = match["target"]
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        file = (path.parent / target.split("#", 1)[0]).resolve()
        assert file.exists(), f"{path.relative_to(ROOT)}: the link {target} leads nowhere"


@pytest.fixture
def docs_shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_path: str):
    """A fresh InteractiveShell in an empty working directory, with the real model.

    The process' shell singleton is replaced for the test and cleared after it,
    so each page starts from nothing and later tests build their own shell.
    Everything the page opened is closed after it.
    """
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENV_MODEL_PATH, model_path)
    monkeypatch.delenv(ENV_STORE_PATH, raising=False)
    monkeypatch.delenv(ENV_SHARED, raising=False)
    try:  # a figure displayed outside a notebook must never open a browser
        import plotly.io as pio
    except ImportError:  # pragma: no cover - the test extra has plotly
        pio = None
    renderer = pio.renderers.default if pio is not None else None
    if pio is not None:
        pio.renderers.default = "json"
    opened_before = set(_OPEN)  # every open Memory of the process (a weak set)
    InteractiveShell.clear_instance()
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    yield shell
    if "nbmemory" in shell.extension_manager.loaded:
        shell.extension_manager.unload_extension("nbmemory")
    for memory in set(_OPEN) - opened_before:
        memory.close()
    shell.reset(new_session=False)
    InteractiveShell.clear_instance()
    if pio is not None:
        pio.renderers.default = renderer


def run_block(shell: InteractiveShell, block: Block) -> None:
    """Run one block as a notebook cell; fail with the block and the error if it raised."""
    result = shell.run_cell(block.code, store_history=True)
    if result.success:
        return
    error = result.error_before_exec or result.error_in_exec
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    raise AssertionError(f"{block.where()}: this example failed\n\n{block.code}\n{trace}") from None


@pytest.mark.timeout(600)  # an example that hangs fails instead of stalling CI
@pytest.mark.parametrize(
    "path",
    [pytest.param(p, marks=pytest.mark.locomo) if needs_locomo(p) else p for p in DOCS],
    ids=_ids(DOCS),
)
def test_examples_run(
    path: Path,
    docs_shell: InteractiveShell,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every ```python block of the page runs, in order, in one shell."""
    if needs_locomo(path):
        monkeypatch.setenv(ENV_LOCOMO_PATH, str(request.getfixturevalue("locomo_dir")))
    blocks = [b for b in code_blocks(path) if b.runs]
    for block in blocks:
        run_block(docs_shell, block)
    for name, holds in OUTCOMES.get(str(path.relative_to(ROOT)), {}).items():
        assert name in docs_shell.user_ns, f"{path.name}: no example binds {name!r} any more"
        value = docs_shell.user_ns[name]
        assert holds(value), f"{path.name}: the example's {name!r} is not what it says:\n{value}"


def test_the_readme_says_what_relevance_keeps_in_each_profile() -> None:
    """The README's table said the context's relevance was cosine > 0.65, the ``spec``
    profile's threshold; the default profile keeps its hybrid ranking above a cosine floor."""
    from nbmemory.config import Settings

    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    row = next(line for line in lines if line.startswith("| Tri-hybrid context"))
    default, spec = Settings().relevance_threshold, Settings(profile="spec").relevance_threshold
    assert f"cosine floor of {default:g};" in row, row
    assert f'cosine > {spec:g} with `profile="spec"`' in row, row


def test_no_merge_conflict_markers_are_left_in_the_repository() -> None:
    """A merge resolved in one file and committed with markers in another (it
    happened once, in docs/python-api.md) is caught here, not by a reader."""
    import subprocess

    found = subprocess.run(
        ["git", "grep", "-n", "-E", "^(<<<<<<< |>>>>>>> |=======$)", "--", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode not in (0, 1):  # not a git checkout (an sdist): nothing to check
        pytest.skip(f"git grep could not run here: {found.stderr.strip()}")
    assert found.stdout == "", f"merge conflict markers left:\n{found.stdout}"
