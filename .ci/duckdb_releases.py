"""Print the duckdb releases pyproject.toml allows, but the one installed, oldest first.

``.ci/run`` runs the crash, migration and file tests under each of them (the venv's
own release runs them with the main tests): every release the range allows is one a
user may have.  The releases come from the package index pip uses; a failure to read
it fails CI rather than test fewer releases.
"""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version


def allowed() -> Requirement:
    """The duckdb requirement of the project's dependencies (the first quoted one in
    pyproject.toml; read as text: tomllib is not in Python 3.10, which the project
    supports)."""
    text = Path(__file__).parent.parent.joinpath("pyproject.toml").read_text()
    found = re.search(r'^\s*"(duckdb\s*[<>=!~][^"]*)"', text, re.MULTILINE)
    if found is None:
        raise SystemExit("pyproject.toml has no duckdb dependency")
    return Requirement(found.group(1))


def released() -> list[Version]:
    out = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "duckdb"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = re.search(r"^Available versions: (.+)$", out, re.MULTILINE)
    if found is None:
        raise SystemExit(f"pip index versions duckdb printed no versions:\n{out}")
    return [Version(v.strip()) for v in found.group(1).split(",")]


def main() -> None:
    specifier = allowed().specifier
    installed = Version(version("duckdb"))
    chosen = sorted(v for v in released() if v in specifier and v != installed)
    print(" ".join(str(v) for v in chosen))


if __name__ == "__main__":
    main()
