"""Running notebook cells in the test process' IPython shell (see the ``ip`` fixture)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

from IPython.core.interactiveshell import InteractiveShell


def run(shell: InteractiveShell, cell: str) -> Any:
    """Run a cell as a notebook would; re-raise what it raised; return its value."""
    result = shell.run_cell(cell, store_history=True)
    error = result.error_before_exec or result.error_in_exec
    if error is not None:
        raise error
    return result.result


def one_line_usage_error(shell: InteractiveShell, cell: str, capsys: Any) -> str:
    """Run ``cell``, which must fail with a UsageError shown on one line (no
    traceback); return the message."""
    from IPython.core.error import UsageError

    capsys.readouterr()
    result = shell.run_cell(cell, store_history=True)
    assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
    err = capsys.readouterr().err.strip()
    assert err.startswith("UsageError: ") and "\n" not in err and "Traceback" not in err, err
    return err.removeprefix("UsageError: ")


@contextlib.contextmanager
def holding(path: str) -> Iterator[int]:
    """Another process holding ``path`` open (a plain DuckDB connection) until the
    block ends; yields its pid."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys; con = duckdb.connect(sys.argv[1]); print('ready', flush=True);"
            " sys.stdin.read()",
            path,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        yield holder.pid
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)
