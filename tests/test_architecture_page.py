"""docs/architecture.md names modules, folders and tests: each of them must exist."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"

#: A path in the repository as the page writes it: src/…, tests/…, docs/…, benchmarks/…
_PATH = re.compile(r"\b((?:src|tests|docs|benchmarks)/[\w./-]*[\w/])")
#: A dotted module name: nbmemory.x.y
_MODULE = re.compile(r"\bnbmemory(?:\.[a-z_]+)+\b")


def _named_paths(text: str) -> set[str]:
    return {m.rstrip(".") for m in _PATH.findall(text)}


def test_the_page_names_modules_and_tests() -> None:
    text = PAGE.read_text(encoding="utf-8")
    paths = _named_paths(text)
    # The page is about the code: it names a good share of the package.
    assert sum(p.startswith("src/nbmemory/") for p in paths) >= 30
    assert any(p.startswith("tests/") for p in paths)


def test_every_path_the_page_names_exists() -> None:
    missing = sorted(
        p for p in _named_paths(PAGE.read_text(encoding="utf-8")) if not (ROOT / p).exists()
    )
    assert not missing, f"docs/architecture.md names what does not exist: {missing}"


def test_every_module_the_page_names_imports() -> None:
    names = set(_MODULE.findall(PAGE.read_text(encoding="utf-8")))
    missing = sorted(n for n in names if importlib.util.find_spec(n) is None)
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def test_a_missing_path_is_caught(tmp_path: Path) -> None:
    """The check itself: a page naming a module that moved fails."""
    named = _named_paths("see `src/nbmemory/store/nowhere.py` and src/nbmemory/store/")
    assert named == {"src/nbmemory/store/nowhere.py", "src/nbmemory/store/"}
    assert not (ROOT / "src/nbmemory/store/nowhere.py").exists()
