"""Memory consolidation (seed 000): old conversation compressed into summaries and facts.

Every ``consolidation_interval_hours`` (6) in a background thread
(:meth:`ConsolidationMixin.start_consolidation`), or on demand
(:meth:`ConsolidationMixin.consolidate`), the unconsolidated messages of each
session older than that interval are cut into chunks and handed to a
*summarizer*: any callable taking the chunk's events (a list of dicts) and
returning the summary text, a ``{"summary": ..., "facts": [...]}`` dict or a
:class:`Summary`.  An LLM client wrapped in a function is a summarizer; the
default, :func:`extractive_summary`, works offline.

For each chunk the summary is stored as an event (``kind="summary"``, high
importance, so the salience strategy of ``get_context`` brings it back), its
facts are upserted (source ``"consolidation"``), and only then, in the same
transaction, are the originals marked ``consolidated_at``.  A summarizer that
raises or returns nothing usable leaves every event of that chunk unconsolidated
for the next run (the seed's original lost them).  The originals are never
deleted: they stay searchable.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import math
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import duckdb

from . import events as ev
from . import facts as fx
from .config import check_limit, check_unit_interval
from .errors import InvalidInput

log = logging.getLogger(__name__)

#: Columns of each event handed to a summarizer.
SUMMARIZER_FIELDS = ("id", "session_id", "role", "content", "created_at", "tool_name", "kind")

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[^\W\d_]{3,}", re.UNICODE)
_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "are",
        "but",
        "not",
        "you",
        "your",
        "with",
        "this",
        "that",
        "have",
        "has",
        "had",
        "was",
        "were",
        "will",
        "would",
        "can",
        "could",
        "should",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "how",
        "all",
        "any",
        "our",
        "out",
        "his",
        "her",
        "its",
        "they",
        "them",
        "their",
        "there",
        "then",
        "than",
        "from",
        "into",
        "about",
        "just",
        "like",
        "also",
        "very",
        "been",
        "being",
        "some",
    ]
)
_ROLE_WEIGHT = {"user": 1.0, "assistant": 0.8, "tool": 0.5, "system": 0.3}
_END = r"(?=[.,;!?]|\s+(?:and|but|because|so)\b|$)"
_FACT_PATTERNS = [
    (re.compile(r"\b(?i:my name is) ([A-Z][\w'-]*(?: [A-Z][\w'-]*)?)"), "user", "name"),
    (re.compile(r"\bI(?: am|'m) called ([A-Z][\w'-]*)"), "user", "name"),
    (
        re.compile(rf"\bI (?:live|am based|'m based) in ([A-Z][\w .'-]{{1,60}}?){_END}"),
        "user",
        "location",
    ),
    (re.compile(rf"\bI work (?:at|for) ([A-Z][\w&.' -]{{1,60}}?){_END}"), "user", "employer"),
]
_LIKES = re.compile(
    rf"\bI (?:really |also )?(love|like|prefer|enjoy|hate|dislike) ([\w#+.' -]{{2,60}}?){_END}",
    re.IGNORECASE,
)
_FAVOURITE = re.compile(rf"\bmy favou?rite ([\w ]{{2,30}}?) is ([\w#+.' -]{{1,60}}?){_END}", re.I)


@dataclass
class Summary:
    """What a summarizer returns: the summary text and facts ``(category, key, value)``."""

    text: str
    facts: list[tuple[str, str, str]] = field(default_factory=list)


Summarizer = Callable[[list[dict[str, Any]]], Any]


@dataclass
class ConsolidationReport:
    """What one consolidation run did."""

    started_at: dt.datetime
    cutoff: dt.datetime
    sessions: list[str] = field(default_factory=list)
    summary_ids: list[str] = field(default_factory=list)
    consolidated: int = 0
    facts: int = 0
    failures: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures

    def __repr__(self) -> str:
        failed = f", {len(self.failures)} failed session(s)" if self.failures else ""
        return (
            f"<ConsolidationReport {self.consolidated} events -> {len(self.summary_ids)} "
            f"summaries, {self.facts} facts, {len(self.sessions)} sessions{failed}>"
        )


def extractive_summary(events: list[dict[str, Any]], *, max_sentences: int = 5) -> Summary:
    """The offline default summarizer: the chunk's most central sentences, plus facts.

    Sentences are scored by how many of the chunk's frequent words they carry
    (normalised by length, weighted by role) and the best ``max_sentences`` are kept
    in conversation order.  Facts come from simple first-person patterns in the
    user's messages ("my name is ...", "I live in ...", "I love ...").
    """
    sentences: list[tuple[int, str, str, list[str]]] = []
    for event in events:
        for part in _SENTENCE.split(event.get("content") or ""):
            part = part.strip()
            if part:
                words = [w.lower() for w in _WORD.findall(part) if w.lower() not in _STOP]
                sentences.append((len(sentences), event.get("role") or "user", part, words))
    if not sentences:
        raise ValueError("nothing to summarise: the events have no text")
    freq = Counter(w for _, _, _, words in sentences for w in set(words))

    def score(item: tuple[int, str, str, list[str]]) -> float:
        _, role, _, words = item
        if not words:
            return 0.0
        return (
            _ROLE_WEIGHT.get(role, 0.5) * sum(freq[w] for w in set(words)) / math.sqrt(len(words))
        )

    best = sorted(sentences, key=lambda s: (-score(s), s[0]))[:max_sentences]
    first, last = events[0].get("created_at"), events[-1].get("created_at")
    span = ""
    if isinstance(first, dt.datetime) and isinstance(last, dt.datetime):
        span = f" ({first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M})"
    lines = [f"Summary of {len(events)} events{span}:"]
    lines += [f"- {role}: {text}" for _, role, text, _ in sorted(best)]
    return Summary("\n".join(lines), extract_facts(events))


def extract_facts(events: Iterable[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """First-person facts stated in user messages, last statement wins."""
    found: dict[tuple[str, str], str] = {}
    for event in events:
        if event.get("role") != "user" or not event.get("content"):
            continue
        text = event["content"]
        for pattern, category, key in _FACT_PATTERNS:
            for match in pattern.finditer(text):
                found[(category, key)] = match.group(1).strip()
        for match in _LIKES.finditer(text):
            verb, thing = match.group(1).lower(), match.group(2).strip()
            found[("preference", thing.lower()[:60])] = f"{verb}s {thing}"
        for match in _FAVOURITE.finditer(text):
            found[("preference", f"favourite {match.group(1).strip().lower()}")] = match.group(
                2
            ).strip()
    return [(category, key, value) for (category, key), value in found.items()]


def normalise(result: Any) -> Summary:
    """A summarizer's return value as a validated :class:`Summary` (or a ValueError)."""
    if isinstance(result, Summary):
        summary = result
    elif isinstance(result, str):
        summary = Summary(result)
    elif isinstance(result, Mapping):
        text = result.get("summary", result.get("text"))
        summary = Summary(text, _fact_list(result.get("facts")))
    else:
        raise ValueError(
            f"the summarizer returned {type(result).__name__}; return the summary text, "
            "a dict {'summary': ..., 'facts': [...]} or a Summary"
        )
    if not isinstance(summary.text, str) or not summary.text.strip():
        raise ValueError("the summarizer returned an empty summary")
    summary.facts = [fx.check_fact(c, k, v, "consolidation")[:3] for c, k, v in summary.facts]
    return summary


def _fact_list(raw: Any) -> list[tuple[str, str, str]]:
    if raw is None:
        return []
    if isinstance(raw, Mapping):  # {category: {key: value}}
        return [(c, k, v) for c, inner in raw.items() for k, v in dict(inner).items()]
    out = []
    for item in raw:
        if isinstance(item, Mapping):
            out.append((item.get("category"), item.get("key"), item.get("value")))
        else:
            category, key, value = item
            out.append((category, key, value))
    return out


_ATTEMPTS = 5


class _Conflict(Exception):
    """The chunk could not be stored as read; it stays unconsolidated for the next run."""


class Consolidator:
    """The background thread: runs ``job`` every ``interval`` seconds or when woken.

    A daemon thread waiting on an event, so :meth:`stop` returns at once when idle
    and interpreter exit never waits for it.
    """

    def __init__(self, job: Callable[[threading.Event], ConsolidationReport], interval: float):
        self.job = job
        self.interval = interval
        self.runs = 0
        self.last_report: ConsolidationReport | None = None
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._done = threading.Condition()
        self._thread = threading.Thread(
            target=self._loop, name="nbmemory-consolidation", daemon=True
        )
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


class ConsolidationMixin:
    """Consolidation methods of :class:`nbmemory.Memory`."""

    def consolidate(
        self,
        *,
        summarizer: Summarizer | None = None,
        older_than_hours: float | None = None,
        now: Any = None,
        session_id: str | None = None,
        chunk_size: int = 50,
        summary_importance: float = 0.9,
        namespace: str | None = None,
        _stop: threading.Event | None = None,
    ) -> ConsolidationReport:
        """Summarise the unconsolidated messages older than ``older_than_hours`` now.

        ``older_than_hours`` defaults to ``consolidation_interval_hours`` (6);
        ``summarizer`` to :func:`extractive_summary`.  Each session's old messages
        are cut into chunks of ``chunk_size``; a chunk whose summarizer fails stays
        unconsolidated (and so do the later chunks of that session, keeping order)
        and is retried next run.  Returns a :class:`ConsolidationReport`.
        """
        self._check_open()
        summarizer = extractive_summary if summarizer is None else summarizer
        if not callable(summarizer):
            raise InvalidInput(f"summarizer must be callable, got {type(summarizer).__name__}")
        hours = self._settings.consolidation_interval_hours
        if older_than_hours is not None:
            if isinstance(older_than_hours, bool) or not isinstance(older_than_hours, (int, float)):
                raise InvalidInput(f"older_than_hours must be a number, got {older_than_hours!r}")
            if not math.isfinite(older_than_hours) or older_than_hours < 0:
                raise InvalidInput(f"older_than_hours must be 0 or more, got {older_than_hours!r}")
            hours = older_than_hours
        chunk_size = check_limit(chunk_size, "chunk_size", allow_zero=False)
        summary_importance = check_unit_interval(summary_importance, "summary_importance")
        ns = self._ns(namespace)
        now = ev.utcnow() if now is None else ev.to_utc(now, "now")
        report = ConsolidationReport(started_at=now, cutoff=now - dt.timedelta(hours=hours))
        params: list[Any] = [ns, report.cutoff]
        sql = (
            "SELECT DISTINCT session_id FROM events WHERE namespace = ? AND created_at < ?"
            " AND kind = 'message' AND consolidated_at IS NULL AND content IS NOT NULL"
        )
        if session_id is not None:
            sql += " AND session_id = ?"
            params.append(ev.check_name(session_id, "session_id"))
        sessions = [r[0] for r in self.store.fetchall(sql + " ORDER BY session_id", params)]
        for session in sessions:
            if _stop is not None and _stop.is_set():
                break
            self._consolidate_session(
                ns, session, summarizer, report, chunk_size, summary_importance, now, _stop
            )
        return report

    def _consolidate_session(
        self,
        ns: str,
        session: str,
        summarizer: Summarizer,
        report: ConsolidationReport,
        chunk_size: int,
        importance: float,
        now: dt.datetime,
        stop: threading.Event | None,
    ) -> None:
        records = self.store.records(
            f"SELECT {', '.join(SUMMARIZER_FIELDS)} FROM events WHERE namespace = ?"
            " AND session_id = ? AND created_at < ? AND kind = 'message'"
            " AND consolidated_at IS NULL AND content IS NOT NULL ORDER BY created_at, seq",
            [ns, session, report.cutoff],
        )
        name = getattr(summarizer, "__name__", type(summarizer).__name__)
        report.sessions.append(session)
        for start in range(0, len(records), chunk_size):
            if stop is not None and stop.is_set():
                return
            chunk = records[start : start + chunk_size]
            try:
                summary = normalise(summarizer([dict(r) for r in chunk]))
            except Exception as exc:
                report.failures[session] = f"{type(exc).__name__}: {exc}"
                log.warning("consolidation of session %r failed: %s", session, exc)
                return  # later chunks wait too, so summaries stay in order
            # an LLM may echo what redaction would have caught: same write-path rule
            summary.text = self._prepare_content(summary.text)[0]
            summary.facts = [(c, k, self._prepare_content(v)[0]) for c, k, v in summary.facts]
            ids = [r["id"] for r in chunk]
            row = ev.build_row(
                self._settings,
                session_id=session,
                role="system",
                content=summary.text,
                namespace=ns,
                kind="summary",
                importance=importance,
                created_at=now,
                metadata={
                    "source_ids": ids,
                    "first_at": chunk[0]["created_at"].isoformat(),
                    "last_at": chunk[-1]["created_at"].isoformat(),
                    "summarizer": name,
                },
            )
            try:
                self._store_summary(ns, row, summary.facts, ids, now)
            except _Conflict as exc:
                report.failures[session] = str(exc)
                log.warning("consolidation of session %r deferred: %s", session, exc)
                return
            self._audit(
                "consolidate",
                [row["id"], *ids],
                ns,
                {"session_id": session, "events": len(ids), "facts": len(summary.facts)},
            )
            self.working.invalidate([(ns, session)])
            if self.worker is not None:
                with contextlib.suppress(Exception):  # closed meanwhile: picked up on reopen
                    self.worker.submit([(row["id"], row["content"])])
            report.summary_ids.append(row["id"])
            report.consolidated += len(ids)
            report.facts += len(summary.facts)

    def _store_summary(
        self,
        ns: str,
        row: dict[str, Any],
        facts: list[tuple[str, str, str]],
        ids: list[str],
        now: dt.datetime,
    ) -> None:
        """Summary, facts and the originals' ``consolidated_at`` in one transaction.

        The embedding worker writes the same rows from its own thread; a write-write
        conflict rolls everything back and the chunk is tried again (a few times).
        ``RETURNING`` makes DuckDB report such a conflict instead of dropping the
        update, and the count check refuses a chunk someone else changed meanwhile.
        """
        for attempt in range(_ATTEMPTS):
            try:
                with self.store.transaction():
                    self.store.insert_events(ev.rows_to_arrow([row]))
                    for category, key, value in facts:
                        fx.upsert(self.store, ns, category, key, value, "consolidation", now)
                    # only now, with the summary stored, are the originals marked
                    marked = self.store.fetchall(
                        "UPDATE events SET consolidated_at = ? WHERE namespace = ?"
                        " AND id IN (SELECT unnest(?::VARCHAR[])) AND consolidated_at IS NULL"
                        " RETURNING id",
                        [now, ns, ids],
                    )
                    if len(marked) != len(ids):
                        raise _Conflict(
                            f"{len(ids) - len(marked)} of {len(ids)} events were consolidated "
                            "or deleted meanwhile; the chunk is retried next run"
                        )
                return
            except duckdb.TransactionException as exc:
                if attempt == _ATTEMPTS - 1:
                    raise _Conflict(f"write conflict, retried next run: {exc}") from exc

    # -- background ------------------------------------------------------------------------
    @property
    def consolidator(self) -> Consolidator | None:
        """The running background consolidation, if any."""
        return self.__dict__.get("_nbmemory_consolidator")

    def start_consolidation(
        self,
        *,
        summarizer: Summarizer | None = None,
        interval_hours: float | None = None,
        older_than_hours: float | None = None,
        namespace: str | None = None,
    ) -> Consolidator:
        """Consolidate in a background thread every ``interval_hours`` (default 6).

        The first run happens after one interval (``.trigger()`` runs one now).  The
        thread stops with :meth:`stop_consolidation` or ``mem.close()``.  A store
        starts one with the default summarizer when it opens (unless
        ``Settings.background_consolidation`` is false); calling this again replaces
        it, e.g. with an LLM summarizer.
        """
        self._check_open()
        hours = (
            self._settings.consolidation_interval_hours
            if interval_hours is None
            else interval_hours
        )
        if isinstance(hours, bool) or not isinstance(hours, (int, float)) or not hours > 0:
            raise InvalidInput(f"interval_hours must be a positive number, got {hours!r}")
        if summarizer is not None and not callable(summarizer):
            raise InvalidInput(f"summarizer must be callable, got {type(summarizer).__name__}")
        ns = self._ns(namespace)

        def job(stop: threading.Event) -> ConsolidationReport:
            return self.consolidate(
                summarizer=summarizer, older_than_hours=older_than_hours, namespace=ns, _stop=stop
            )

        self.stop_consolidation()  # the new settings replace the running thread
        consolidator = Consolidator(job, float(hours) * 3600.0)
        self.__dict__["_nbmemory_consolidator"] = consolidator
        return consolidator

    def stop_consolidation(self, timeout: float = 10.0) -> bool:
        """Stop the background consolidation; True if one was running."""
        consolidator = self.__dict__.pop("_nbmemory_consolidator", None)
        if consolidator is None:
            return False
        consolidator.stop(timeout)
        return True
