"""Upkeep that runs by itself while a store is open.

The Rust agent's layer and Vectora's state persistence both expect a memory that
keeps itself: sessions idle past ``session_ttl_hours`` cleaned up, audit rows past
``audit_retention_days`` and compacted events archived past ``archive_retention_days``
removed, old conversations consolidated every
``consolidation_interval_hours``.  :class:`Upkeep` does it in one daemon thread: at
open, then whenever the store's clock (``core.clock``, which tests move) says a
run is due: the cleanups at most once every ``upkeep_interval_hours`` (1), and a
consolidation run (when ``background_consolidation`` started one) once every
consolidation interval.  Each cleanup is one short transaction taken in turn with
the writers (it never holds a write back for long), and is audited like the
same call made by hand.  ``mem.status()["upkeep"]`` says when each last ran and
what it removed.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from ..core import Core
from ..knowledge.consolidation import Consolidation, Consolidator
from ..sessions.audit_trail import Audit
from ..sessions.lifecycle import Sessions

log = logging.getLogger("nbmemory")


class Upkeep:
    """The thread that keeps an open store clean (see the module's docstring)."""

    def __init__(
        self,
        core: Core,
        sessions: Sessions,
        audit: Audit,
        consolidation: Consolidation,
        run: Callable[[Callable[[], Any]], Any],
    ) -> None:
        self.core = core
        self._sessions = sessions
        self._audit = audit
        self._consolidation = consolidation
        self._run_in_turn = run
        self.sessions_removed = 0
        self.audit_rows_removed = 0
        self.archived_removed = 0
        self.last_cleanup: dt.datetime | None = None
        self.last_consolidation: dt.datetime | None = None
        self.last_error: str | None = None
        self._started_at = core.clock()
        self._checked()  # at open, before the caller's first call (then in the thread)
        # the same wake-or-wait loop as background consolidation, with its own job
        self._loop = Consolidator(
            lambda _stop: self._checked(),
            core.settings.upkeep_check_seconds,
            name="nbmemory-upkeep",
        )

    @property
    def alive(self) -> bool:
        return self._loop.alive

    @property
    def runs(self) -> int:
        """Checks the thread has finished (the one at open not counted)."""
        return self._loop.runs

    def wake(self) -> int:
        """Look at the clock now (not at the next check); returns the check count to
        pass to :meth:`wait_for_check`."""
        return self._loop.trigger()

    def wait_for_check(self, count: int, timeout: float | None = None) -> bool:
        """Wait until ``count`` checks have finished; False on timeout or when stopped."""
        return self._loop.wait_for_run(count, timeout)

    def stop(self, timeout: float = 10.0) -> None:
        self._loop.stop(timeout)

    def status(self) -> dict[str, Any]:
        """When the cleanups and consolidation last ran, and what the cleanups removed."""
        settings = self.core.settings
        consolidator = self._consolidation.consolidator
        return {
            "running": self.alive,
            "last_cleanup": self.last_cleanup,
            "next_cleanup": None
            if self.last_cleanup is None
            else self.last_cleanup + dt.timedelta(hours=settings.upkeep_interval_hours),
            "sessions_removed": self.sessions_removed,
            "audit_rows_removed": self.audit_rows_removed,
            "archived_removed": self.archived_removed,
            "consolidation": consolidator is not None and consolidator.alive,
            "last_consolidation": self.last_consolidation,
            "consolidation_runs": 0 if consolidator is None else consolidator.runs,
            "last_error": self.last_error,
        }

    def _checked(self) -> None:
        """:meth:`_check`, its failure kept in ``last_error`` (an open never fails on it)."""
        try:
            self._check()
            self.last_error = None
        except Exception as exc:  # a closed or busy store: try again at the next check
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("nbmemory upkeep failed: %s", self.last_error)

    def _check(self) -> None:
        settings, now = self.core.settings, self.core.clock()
        every = dt.timedelta(hours=settings.upkeep_interval_hours)
        if _due(self.last_cleanup, now, every):
            self._cleanup()
            self.last_cleanup = now
        consolidator = self._consolidation.consolidator
        if consolidator is None or not consolidator.alive:
            return
        interval = dt.timedelta(hours=settings.consolidation_interval_hours)
        if _due(self.last_consolidation or self._started_at, now, interval):
            count = consolidator.trigger()
            consolidator.wait_for_run(count, timeout=None)
            self.last_consolidation = now

    def _cleanup(self) -> None:
        sessions = self._run_in_turn(lambda: self._sessions.cleanup(all_namespaces=True))
        self.sessions_removed += len(sessions)
        # (an audit cleanup is audited itself: only run it when there is something to remove)
        if self._run_in_turn(lambda: self._audit.cleanup(dry_run=True)):
            self.audit_rows_removed += int(self._run_in_turn(self._audit.cleanup))
        # compacted events past archive_retention_days (audited; nothing to do: no write)
        self.archived_removed += int(self._run_in_turn(self._consolidation.cleanup_archive))


def _due(last: dt.datetime | None, now: dt.datetime, every: dt.timedelta) -> bool:
    """A run is due: never ran, ran ``every`` ago, or the clock went back past it (by
    more than a minute: a clock set an instant before the store opened did not)."""
    return last is None or now - last >= every or now < last - dt.timedelta(minutes=1)
