"""Memory consolidation: old conversation compressed into summaries and facts.

Every ``consolidation_interval_hours`` (6) in a background thread
(:meth:`Consolidation.start`), or on demand
(:meth:`Consolidation.run`), the unconsolidated messages of each
session older than that interval are cut into chunks and handed to a
*summarizer* (:mod:`nbmemory.knowledge.summarizer`).

For each chunk the summary is stored as an event (``kind="summary"``), its
facts are upserted (source ``"consolidation"``), and the originals are marked
``consolidated_at``, all in one transaction.  The summary is dated at the last
turn it summarises (the run's time is its metadata's ``consolidated_at``), so a
prompt in time order shows it where its content happened, before a later
correction of it, not as the newest line; and it weighs what its turns weigh (the
largest of their importances), so it reaches salience when they did and does not
outrank the preference or the decision it repeats.  A summarizer that raises or
returns nothing usable leaves every event of that chunk unconsolidated for the
next run.  By default the originals stay, searchable.

With ``compact=True`` (or ``Settings.consolidation_compact``) consolidation does
what the Rust agent layer's does: it "compresses old conversations into
summaries, reducing storage and context-window use".  In the same transaction
the originals (and their vectors) move to the archive (:mod:`nbmemory.store.archive`):
searches, contexts and working memory see the summary instead.  :meth:`Consolidation.restore`
moves them back until the archive's retention (``archive_retention_days``,
:meth:`Consolidation.cleanup_archive`, run by upkeep) or an erasure deletes them.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..core import Core
from ..errors import InvalidInput
from ..event_rows import build_row
from ..validation import (
    check_flag,
    check_limit,
    check_name,
    check_names,
    check_unit_interval,
    shown,
    to_utc,
    utcnow,
)
from .summarizer import Summarizer, extractive_summary, to_summary

log = logging.getLogger(__name__)

#: Columns of each event handed to a summarizer.
SUMMARIZER_FIELDS = (
    "id",
    "session_id",
    "role",
    "content",
    "created_at",
    "tool_name",
    "kind",
    "importance",
)


class _Deferred(Exception):
    """The chunk could not be stored as read; it stays unconsolidated for the next run."""


@dataclass
class ConsolidationReport:
    """What one consolidation run did."""

    started_at: dt.datetime
    cutoff: dt.datetime
    sessions: list[str] = field(default_factory=list)
    summary_ids: list[str] = field(default_factory=list)
    consolidated: int = 0
    #: Of ``consolidated``, the events moved to the archive (``compact=True``).
    archived: int = 0
    facts: int = 0
    failures: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures

    def __repr__(self) -> str:
        failed = f", {len(self.failures)} failed session(s)" if self.failures else ""
        archived = f" ({self.archived} archived)" if self.archived else ""
        return (
            f"<ConsolidationReport {self.consolidated} events{archived} -> "
            f"{len(self.summary_ids)} "
            f"summaries, {self.facts} facts, {len(self.sessions)} sessions{failed}>"
        )


class Consolidator:
    """The background thread: runs ``job`` every ``interval`` seconds or when woken.

    A daemon thread waiting on an event, so :meth:`stop` returns at once when idle
    and interpreter exit never waits for it.
    """

    def __init__(
        self,
        job: Callable[[threading.Event], Any],
        interval: float,
        name: str = "nbmemory-consolidation",
    ):
        self.job = job
        self.interval = interval
        self.runs = 0
        self.last_report: ConsolidationReport | None = None
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._done = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def trigger(self) -> int:
        """Run as soon as possible; returns the run count to pass to :meth:`wait_for_run`."""
        with self._done:
            target = self.runs + 1
        self._wake.set()
        return target

    def wait_for_run(self, count: int, timeout: float | None = None) -> bool:
        """Wait until ``count`` runs have finished; False on timeout or when stopped."""
        with self._done:
            return (
                self._done.wait_for(lambda: self.runs >= count or self._stop.is_set(), timeout)
                and self.runs >= count
            )

    def stop(self, timeout: float = 10.0) -> None:
        """Stop after the chunk in hand (a run in progress checks between chunks)."""
        self._stop.set()
        self._wake.set()
        with self._done:
            self._done.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            if self._stop.is_set():
                return
            self._wake.clear()
            try:
                self.last_report = self.job(self._stop)
                self.last_error = None
            except Exception as exc:  # a closed store, a broken summarizer: keep going
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("nbmemory consolidation run failed: %s", self.last_error)
            with self._done:
                self.runs += 1
                self._done.notify_all()


class Consolidation:
    """``run`` now, or in the background with ``start`` (``mem.consolidation``)."""

    def __init__(self, core: Core) -> None:
        self.core = core
        #: The running background consolidation, if any.
        self.consolidator: Consolidator | None = None

    def run(
        self,
        *,
        summarizer: Summarizer | None = None,
        older_than_hours: float | None = None,
        now: Any = None,
        session_id: str | None = None,
        chunk_size: int = 50,
        summary_importance: float | None = None,
        namespace: str | None = None,
        compact: bool | None = None,
        _stop: threading.Event | None = None,
    ) -> ConsolidationReport:
        """Summarise the unconsolidated messages older than ``older_than_hours`` now.

        ``older_than_hours`` defaults to ``consolidation_interval_hours`` (6);
        ``summarizer`` to :func:`~nbmemory.knowledge.summarizer.extractive_summary`.
        Each session's old messages are cut into chunks of ``chunk_size``; a chunk
        whose summarizer fails stays unconsolidated (and so do the later chunks of
        that session, keeping order) and is retried next run.  ``compact=True``
        (default: ``Settings.consolidation_compact``) replaces each chunk by its
        summary: the originals move to the archive (see :meth:`restore`).
        ``summary_importance`` (default: the largest importance of the chunk's
        turns) is every summary's importance.
        """
        summarizer = extractive_summary if summarizer is None else summarizer
        compact = (
            self.core.settings.consolidation_compact
            if compact is None
            else check_flag(compact, "compact")
        )
        if not callable(summarizer):
            raise InvalidInput(f"summarizer must be callable, got {type(summarizer).__name__}")
        hours = self.core.settings.consolidation_interval_hours
        if older_than_hours is not None:
            if isinstance(older_than_hours, bool) or not isinstance(older_than_hours, (int, float)):
                raise InvalidInput(
                    f"older_than_hours must be a number, got {shown(older_than_hours)}"
                )
            if not math.isfinite(older_than_hours) or older_than_hours < 0:
                raise InvalidInput(
                    f"older_than_hours must be 0 or more, got {shown(older_than_hours)}"
                )
            hours = older_than_hours
        chunk_size = check_limit(chunk_size, "chunk_size", allow_zero=False)
        importance = (
            None
            if summary_importance is None
            else check_unit_interval(summary_importance, "summary_importance")
        )
        ns = self.core.ns(namespace)
        now = utcnow() if now is None else to_utc(now, "now")
        try:
            cutoff = now - dt.timedelta(hours=hours)
        except OverflowError:
            raise InvalidInput(
                f"older_than_hours {shown(hours)} reaches back before the year 1; pass fewer hours"
            ) from None
        report = ConsolidationReport(started_at=now, cutoff=cutoff)
        if session_id is not None:
            session_id = check_name(session_id, "session_id")
        sessions = self.core.store.events.unconsolidated_sessions(ns, report.cutoff, session_id)
        for session in sessions:
            if _stop is not None and _stop.is_set():
                break
            job = _Job(self.core, ns, session, summarizer, report, importance, now)
            job.compact = compact
            job.run(chunk_size, _stop)
        return report

    # -- the archive of compacted events ---------------------------------------------------
    def archive(
        self, *, summary_id: str | None = None, namespace: str | None = None
    ) -> pd.DataFrame:
        """The events compaction moved to the archive (those one summary replaced, with
        ``summary_id``), oldest first, with ``summary_id`` and ``archived_at``."""
        if summary_id is not None:
            summary_id = check_name(summary_id, "summary_id")
        return self.core.store.archive.frame(self.core.ns(namespace), summary_id).reset_index(
            drop=True
        )

    def restore(
        self,
        summary_id: str | None = None,
        *,
        ids: list[str] | None = None,
        namespace: str | None = None,
    ) -> int:
        """Move archived events back into the conversation: those one summary replaced
        (``summary_id``) or these ``ids``; returns how many (0: none in the archive).

        They come back as they were, in their place (their order among the others)
        and with their vectors and passages, marked consolidated as a consolidation
        without compaction leaves them; the summary stays.  Audited (``restore``).
        """
        if (summary_id is None) == (ids is None):
            raise InvalidInput("restore takes summary_id or ids=[...], one of the two")
        if summary_id is not None:
            summary_id = check_name(summary_id, "summary_id")
        if ids is not None:
            ids = check_names(ids, "ids")
        ns = self.core.ns(namespace)
        with self.core.writer.transaction() as tx:
            records = tx.archive.restore(ns, summary_id=summary_id, ids=ids)
            if records:
                details: dict[str, Any] = {"events": len(records)}
                if summary_id is not None:
                    details["summary_id"] = summary_id
                tx.audit("restore", [r["id"] for r in records], ns, details)
        return len(records)

    def cleanup_archive(self, *, dry_run: bool = False) -> int:
        """Apply the archive's retention (``archive_retention_days``, 90): delete the
        events archived longer ago, for good; returns how many (would be) deleted.

        Audited per namespace (``cleanup``, ``what`` ``event_archive``); upkeep runs
        it with the other cleanups while a store is open."""
        check_flag(dry_run, "dry_run")
        days = self.core.settings.archive_retention_days
        cutoff = self.core.clock() - dt.timedelta(days=days)
        old = self.core.store.archive.older_than(cutoff)
        count = sum(len(ids) for ids in old.values())
        if dry_run or not count:
            return count
        with self.core.writer.transaction() as tx:
            for ns, ids in tx.archive.older_than(cutoff).items():
                tx.archive.delete_ids(ns, ids)
                tx.audit(
                    "cleanup", ids, ns, {"what": "event_archive", "rows": len(ids), "days": days}
                )
        return count

    # -- background ------------------------------------------------------------------------
    def start(
        self,
        *,
        summarizer: Summarizer | None = None,
        interval_hours: float | None = None,
        older_than_hours: float | None = None,
        namespace: str | None = None,
        compact: bool | None = None,
    ) -> Consolidator:
        """Consolidate in a background thread every ``interval_hours`` (default 6).

        The first run happens after one interval (``.trigger()`` runs one now).  The
        thread stops with :meth:`stop` or ``mem.close()``.  A store
        starts one with the default summarizer when it opens (unless
        ``Settings.background_consolidation`` is false); calling this again replaces
        it, e.g. with an LLM summarizer.  ``compact``: as for :meth:`run` (default:
        ``Settings.consolidation_compact`` at each run).
        """
        settings = self.core.settings
        hours = settings.consolidation_interval_hours if interval_hours is None else interval_hours
        if isinstance(hours, bool) or not isinstance(hours, (int, float)) or not hours > 0:
            raise InvalidInput(f"interval_hours must be a positive number, got {shown(hours)}")
        if summarizer is not None and not callable(summarizer):
            raise InvalidInput(f"summarizer must be callable, got {type(summarizer).__name__}")
        if compact is not None:
            check_flag(compact, "compact")
        ns = self.core.ns(namespace)

        def job(stop: threading.Event) -> ConsolidationReport:
            return self.run(  # at the store's time (core.clock, which tests move)
                summarizer=summarizer,
                older_than_hours=older_than_hours,
                namespace=ns,
                compact=compact,
                now=self.core.clock(),
                _stop=stop,
            )

        self.stop()  # the new settings replace the running thread
        self.consolidator = Consolidator(job, float(hours) * 3600.0)
        return self.consolidator

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop the background consolidation; True if one was running."""
        consolidator, self.consolidator = self.consolidator, None
        if consolidator is None:
            return False
        consolidator.stop(timeout)
        return True


class _Job:
    """Consolidating one session: its old messages chunk by chunk, in order."""

    def __init__(
        self,
        core: Core,
        namespace: str,
        session: str,
        summarizer: Summarizer,
        report: ConsolidationReport,
        importance: float | None,
        now: dt.datetime,
    ) -> None:
        self.core, self.namespace, self.session = core, namespace, session
        self.summarizer, self.report = summarizer, report
        self.importance, self.now = importance, now
        #: Move the originals to the archive instead of marking them.
        self.compact = False
        self.name = getattr(summarizer, "__name__", type(summarizer).__name__)

    def run(self, chunk_size: int, stop: threading.Event | None) -> None:
        records = self.core.store.events.unconsolidated(
            self.namespace, self.session, self.report.cutoff, SUMMARIZER_FIELDS
        )
        self.report.sessions.append(self.session)
        for start in range(0, len(records), chunk_size):
            if stop is not None and stop.is_set():
                return
            if not self._chunk(records[start : start + chunk_size]):
                return  # later chunks wait too, so summaries stay in order

    def _chunk(self, chunk: list[dict[str, Any]]) -> bool:
        try:
            summary = to_summary(self.summarizer([dict(r) for r in chunk]))
        except Exception as exc:
            self.report.failures[self.session] = f"{type(exc).__name__}: {exc}"
            log.warning("consolidation of session %r failed: %s", self.session, exc)
            return False
        ids = [r["id"] for r in chunk]
        row = build_row(
            self.core.settings,
            session_id=self.session,
            role="system",
            content=summary.text,
            namespace=self.namespace,
            kind="summary",
            importance=self._importance(chunk),
            # where its content happened (the chunk is in time order), not at the run
            created_at=chunk[-1]["created_at"],
            metadata={
                "source_ids": ids,
                "first_at": chunk[0]["created_at"].isoformat(),
                "last_at": chunk[-1]["created_at"].isoformat(),
                "consolidated_at": self.now.isoformat(),
                "summarizer": self.name,
                **({"compacted": True} if self.compact else {}),
            },
        )
        try:
            self._store(row, summary.facts, ids)
        except _Deferred as exc:
            self.report.failures[self.session] = str(exc)
            log.warning("consolidation of session %r deferred: %s", self.session, exc)
            return False
        self.report.summary_ids.append(row["id"])
        self.report.consolidated += len(ids)
        self.report.archived += len(ids) if self.compact else 0
        self.report.facts += len(summary.facts)
        return True

    def _importance(self, chunk: list[dict[str, Any]]) -> float:
        """The run's ``summary_importance``, else the largest importance of the chunk's
        turns (the summary repeats them: it should reach salience when one of them
        did, and not outrank it), else the summary role's default."""
        if self.importance is not None:
            return self.importance
        known = [r["importance"] for r in chunk if r.get("importance") is not None]
        default = self.core.settings.importance_by_role.get("system", 0.5)
        return float(max(known, default=default))

    def _store(
        self, row: dict[str, Any], facts: list[tuple[str, str, str]], ids: list[str]
    ) -> None:
        """Summary, facts and the originals' ``consolidated_at`` (or their move to the
        archive) in one transaction.

        An LLM may echo what redaction would catch: the summary and the fact values
        pass the same write path as everything else.  The count check refuses a
        chunk someone consolidated or deleted meanwhile.
        """
        ns = self.namespace
        with self.core.writer.transaction() as tx:
            tx.events.insert([row], bulk=True)
            for category, key, value in facts:
                tx.facts.upsert(ns, category, key, value, "consolidation", self.now)
            # only now, with the summary stored, are the originals marked (or archived)
            if self.compact:
                marked = tx.archive.move(ns, ids, row["id"], self.now)
            else:
                marked = tx.events.mark_consolidated(ns, ids, self.now)
            if len(marked) != len(ids):
                raise _Deferred(
                    f"{len(ids) - len(marked)} of {len(ids)} events were consolidated "
                    "or deleted meanwhile; the chunk is retried next run"
                )
            tx.audit(
                "consolidate",
                [row["id"], *ids],
                ns,
                {
                    "session_id": self.session,
                    "events": len(ids),
                    "facts": len(facts),
                    **({"archived": len(ids)} if self.compact else {}),
                },
            )
