"""Whether the process that left a file beside a store (a turn's ticket, a journal, a
store being created) still runs.

``os.kill(pid, 0)`` says a process exists, and a process killed but not yet collected
by its parent (a zombie) still exists: its ticket kept every other shared opener
waiting until the lock timeout, then ``StoreLocked`` (a parent that reaps its
children late, a container whose first process reaps none).  A zombie runs nothing,
holds no lock and writes no journal, so it counts as gone here.
"""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs: it exists (another user's counts) and, where
    ``/proc`` says, is not a zombie."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: it exists
    except OSError:
        return False
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """``/proc/<pid>/stat``'s state is Z (zombie) or X (dead); False where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return False  # no /proc (macOS), or gone meanwhile: os.kill said it exists
    state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]
    return state in (b"Z", b"X")
