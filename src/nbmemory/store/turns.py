"""Fair turns on a shared store: processes get the file in the order they asked.

A plain file lock is not fair: the process that just released it asks again at
once and usually wins, while the others sleep between polls (measured: with
four writers one got 16 operations while another got 132).  Here every process
that wants a turn first drops a ticket (a file named by the time it asked) in a
folder beside the store, and only the oldest living ticket may take the lock;
the lock itself is still an OS file lock (``filelock``), so a process that dies
holding it lets go at once, and a waiter that dies leaves a ticket the others
skip once its process is gone.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time

from ..errors import StoreError
from . import processes

#: Environment variable: seconds a shared store waits for its turn, and a purge for the
#: other stores of its file in the process to finish what they run (default 30).
ENV_LOCK_TIMEOUT = "NBMEMORY_LOCK_TIMEOUT"


def default_lock_timeout() -> float:
    """``$NBMEMORY_LOCK_TIMEOUT`` seconds, else 30: how long a shared store waits its turn
    (and a rewrite of a file for the other stores of the process that have it open)."""
    raw = os.environ.get(ENV_LOCK_TIMEOUT, "30")
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value >= 0 or value == float("inf"):
        raise StoreError(f"{ENV_LOCK_TIMEOUT}={raw!r} must be a number of seconds (e.g. 30)")
    return value


class Timeout(Exception):
    """The turn did not come within the time allowed."""


class FairLock:
    """An inter-process lock granted oldest ticket first."""

    def __init__(self, path: str) -> None:
        self.lock_file = path
        self.folder = path + ".tickets"
        import filelock  # here, not at import: only a shared store takes turns (8 ms)

        self._lock = filelock.FileLock(path, thread_local=False)
        self._busy = filelock.Timeout

    def acquire(self, timeout: float) -> None:
        """Wait for this process's turn (FIFO among processes); :class:`Timeout` after ``timeout``."""
        os.makedirs(self.folder, exist_ok=True)
        ticket = f"{time.time_ns():020d}-{os.getpid()}-{threading.get_ident()}"
        path = os.path.join(self.folder, ticket)
        with open(path, "x"):
            pass
        deadline = time.monotonic() + timeout
        try:
            while True:
                if self._first(ticket):
                    with contextlib.suppress(self._busy):
                        self._lock.acquire(timeout=0)
                        return
                if time.monotonic() > deadline:
                    raise Timeout(self.lock_file)
                time.sleep(0.001 + random.random() * 0.002)  # a short poll, jittered
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)

    def release(self) -> None:
        self._lock.release()

    def _first(self, ticket: str) -> bool:
        """Whether no older ticket of a living process is waiting."""
        for name in sorted(os.listdir(self.folder)):
            if name >= ticket:
                return True
            if _alive(name):
                return False
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(self.folder, name))  # its process is gone
        return True


def _alive(ticket: str) -> bool:
    try:
        pid = int(ticket.split("-")[1])
    except (IndexError, ValueError):
        return False
    return processes.alive(pid)
