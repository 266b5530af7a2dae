"""Child Python processes for the tests that need real ones (locks, kills, two kernels)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
TESTS = str(Path(__file__).resolve().parent)


def child_env(**extra: str) -> dict[str, str]:
    """This environment, with nbmemory's source and the test helpers importable."""
    # an existing PYTHONPATH stays after ours: CI puts another DuckDB release there
    path = [SRC, TESTS, *filter(None, [os.environ.get("PYTHONPATH")])]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(path), PYTHONUNBUFFERED="1", **extra)


def spawn(code: str, *args: str, **env: str) -> subprocess.Popen:
    """Run ``code`` (dedented) in a new Python process with pipes on every stream."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(**env),
    )


def expect(child: subprocess.Popen, prefix: str) -> str:
    """Read the child's stdout until a line starting with ``prefix`` (no sleeps)."""
    assert child.stdout is not None and child.stderr is not None
    while True:
        line = child.stdout.readline()
        if not line:
            raise AssertionError(f"child ended before {prefix!r}: {child.stderr.read()}")
        if line.startswith(prefix):
            return line[len(prefix) :].strip()


def release_together(children: list[subprocess.Popen]) -> None:
    """Wait until every child has printed ``ready``, then tell them all ``go``: they
    start their race within a few milliseconds of each other."""
    for child in children:
        expect(child, "ready")
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
