"""numpy's matrix products on one BLAS thread when they are small, as a search's are.

numpy's BLAS (OpenBLAS in numpy's wheels) splits a product over every core once
the matrix has more than about 9,000 elements, and afterwards its idle threads
spin, waiting for more work, for about a tenth of a second.  A search of a
3,000-memory store scores every vector in 0.1 ms and then keeps another core
busy for ~97 ms: an agent that searches once a turn, or the two workers of a CI
runner, lose most of a core to threads that wait (``benchmarks/blas_threads.py``).
On one thread the same product takes 0.2 ms and nothing spins.

:func:`one_thread` runs a block on one BLAS thread unless its product is large
(more than :data:`THREADED_WORK` multiply-adds: there the wait the threads save
pays for the spin), then gives BLAS back the threads it had.  BLAS's thread
count is the process's, so while a block runs, a product that another thread of
the process makes runs on one thread too; the count is set once for blocks that
overlap and given back when the last of them ends (threadpoolctl does the
setting, for OpenBLAS, MKL and BLIS alike).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

#: Products of more multiply-adds than this keep BLAS's own threads (a query
#: against more than 43,690 vectors of 384 dimensions): one core needs 7 ms or
#: more for them, and the wait the threads save is worth the core they keep busy.
#: Below it the threads save under 2 ms a search and cost ~0.1 s of a core.
THREADED_WORK = 1 << 24

_lock = threading.Lock()
_inside = 0
_limiter: Any = None
_controller: Any = None


def _blas() -> Any:
    """threadpoolctl's controller of the BLAS libraries loaded (numpy's), made once."""
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController().select(user_api="blas")
    return _controller


def _as_any_thread(change: Any) -> Any:
    """``change()`` made from whichever thread calls: threadpoolctl (3.8) lets only
    the first thread that set OpenBLAS's count set it again, and others silently
    do nothing, until that thread lets go.  The set and the restore of one block
    may come from two threads, so neither keeps the control."""
    from threadpoolctl import OpenBLASController

    release = getattr(OpenBLASController, "clear_controlling_thread", None)
    if release is not None:
        release(force=True)
    try:
        return change()
    finally:
        if release is not None:
            release(force=True)


@contextlib.contextmanager
def one_thread(work: int) -> Iterator[None]:
    """Run the block on one BLAS thread when its products make at most
    :data:`THREADED_WORK` multiply-adds (``work``: rows x columns of a
    matrix-vector product, times the vectors for a matrix-matrix one)."""
    global _inside, _limiter
    if work > THREADED_WORK:
        yield
        return
    with _lock:
        if _inside == 0:
            _limiter = _as_any_thread(lambda: _blas().limit(limits=1))
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0:
                limiter, _limiter = _limiter, None
                _as_any_thread(limiter.restore_original_limits)
