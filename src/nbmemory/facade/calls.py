"""How every call of the facade runs: on an open store, in one turn, again on a conflict.

A method of :class:`~nbmemory.Memory` or of one of its groups (``mem.facts.set``)
is a one-line delegator to the feature that implements it (:func:`delegate`).
The delegator checks the ``Memory`` is open, holds the file for the whole call
in shared mode (its statements queue once), and runs the call again when it met
another lake writer's commit and nothing of it stuck.
"""

from __future__ import annotations

import contextlib
import functools
import random
import time
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from ..errors import InvalidInput, WriteConflict
from ..store import Store

#: Times a call that met another lake writer's commit is run in all.
CONFLICT_RETRIES = 30
#: The longest wait (s) between two tries of a conflicting call (jittered, doubling).
CONFLICT_BACKOFF_MAX = 0.5

P = ParamSpec("P")
R = TypeVar("R")


class Gate:
    """What every call of one ``Memory`` passes through: its open/closed state and its store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.closed = False

    def check_open(self) -> None:
        if self.closed:
            raise InvalidInput("this Memory is closed; open a new one with Memory(path)")

    def run(self, call: Callable[[], R], *, one_turn: bool = True) -> R:
        """``call()`` on an open store, in one turn (shared mode), retried on a lake conflict.

        Calls that wait on other threads or run the caller's code (``one_turn=False``)
        do not hold the file: that would block those threads.
        """
        self.check_open()
        store = self.store
        for attempt in range(CONFLICT_RETRIES):
            committed = store.begin_call()
            try:
                with store.turn() if one_turn else contextlib.nullcontext():
                    return call()
            except WriteConflict:
                # a lake writer met another at once: run the call again, if nothing of it stuck
                if attempt == CONFLICT_RETRIES - 1 or store.begin_call() != committed:
                    raise
                wait = min(CONFLICT_BACKOFF_MAX, 0.01 * 2**attempt)
                time.sleep(random.uniform(0, wait))  # back off, not synchronise
        raise AssertionError("unreachable")  # pragma: no cover


def delegate(
    component: str, method: Callable[Concatenate[Any, P], R], *, one_turn: bool = True
) -> Callable[Concatenate[Any, P], R]:
    """A method that runs ``method`` of the object at ``self.<component>`` through ``self._gate``.

    The method keeps the feature method's name, signature and docstring, so help()
    and tab completion show what the feature documents.
    """
    name = method.__name__

    @functools.wraps(method)
    def delegator(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        feature = getattr(self, component)
        return self._gate.run(lambda: getattr(feature, name)(*args, **kwargs), one_turn=one_turn)

    return delegator
