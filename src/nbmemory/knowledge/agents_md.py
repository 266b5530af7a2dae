"""AGENTS.md as human-editable memory.

The file is split into sections by its Markdown headings; each section becomes
one memory of kind ``agents_md`` (role ``system``, importance 1.0, so the
salience strategy of ``get_context`` always considers it and reports it as
such).  A sync compares a SHA-256 of each section's (redacted) text with the
``content_hash`` kept in the memory's metadata:

* a new section is added and embedded;
* a section whose text changed is updated in place and re-embedded;
* a section that disappeared is deleted;
* every other section is left untouched (same row, same vector, no model call).

Sections are identified by their heading path (``Project > Preferences``), with
``#2``, ``#3`` appended to repeated headings, and by the file they came from, so
several files can be synced into one namespace.  Headings inside fenced code
blocks are text, not sections.  :class:`AgentsWatcher` re-syncs whenever the
file changes (watchfiles' native notifications; with ``force_polling=True`` a
thread compares the file's hash every half second, for network file systems)
until it is stopped or the store is closed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import Core
from ..errors import InvalidInput
from ..event_rows import build_row
from ..file_kinds import HEAD_BYTES, database_kind
from ..redaction import blocked_reason, check_ingestable
from ..store.files import read_span
from ..validation import check_flag, check_path, dump_metadata, parse_metadata

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)

KIND = "agents_md"
#: The session id AGENTS.md memories are filed under.
SESSION_ID = "agents_md"
#: Importance of AGENTS.md sections: at the top of the salience strategy.
IMPORTANCE = 1.0
PREAMBLE = "(preamble)"
#: Seconds between the two reads that must agree before a changed file is synced,
#: and the most a sync waits for the file to settle.
SETTLE_S = 0.1
SETTLE_MAX_S = 2.0

_HEADING_RE = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE_RE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class Section:
    """One heading section of an AGENTS.md file."""

    key: str  # heading path, unique in the file
    heading: str
    level: int  # 1-6, 0 for text before the first heading
    text: str  # the heading line and its body, as written

    @property
    def content_hash(self) -> str:
        return content_hash(self.text)


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def parse_sections(markdown: str) -> list[Section]:
    """Split Markdown into heading sections (a section ends at the next heading of any level).

    Sections with no text under their heading (a title right above a sub-heading)
    are skipped: their heading still appears in the keys of the sections below.
    """
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []
    seen: dict[str, int] = {}
    current: tuple[str, int, list[str]] = (PREAMBLE, 0, [])

    def finish() -> None:
        heading, level, lines = current
        body = "\n".join(lines[1:] if level else lines).strip()
        if not body:
            return
        path = " > ".join(h for _, h in stack) if level else PREAMBLE
        seen[path] = seen.get(path, 0) + 1
        key = path if seen[path] == 1 else f"{path} #{seen[path]}"
        text = (lines[0].strip() + "\n\n" + body) if level else body
        sections.append(Section(key=key, heading=heading, level=level, text=text))

    for line, found in scan_lines(markdown):
        if found is None:
            current[2].append(line)
            continue
        finish()
        level, heading = found
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, heading))
        current = (heading, level, [line])
    finish()
    return sections


def scan_lines(markdown: str) -> Iterator[tuple[str, tuple[int, str] | None]]:
    """Each line of ``markdown`` with ``(level, heading)`` when it is a heading
    (headings inside fenced code blocks are text)."""
    fence: str | None = None
    for line in markdown.splitlines():
        fence_match = _FENCE_RE.match(line)
        if fence_match:
            marker = fence_match.group(1)
            if fence is None:
                fence = marker[0] * 3
            elif marker.startswith(fence):
                fence = None
        match = _HEADING_RE.match(line) if fence is None and not fence_match else None
        yield line, None if match is None else (len(match.group(1)), match.group(2).strip())


def section_id(namespace: str, source: str, key: str) -> str:
    """A stable event id for a section (ids are unique across namespaces)."""
    digest = hashlib.sha256(f"{namespace}\0{source}\0{key}".encode()).hexdigest()[:24]
    return f"agents_md:{digest}"


@dataclass
class SyncResult:
    """What a sync did, by section key."""

    path: str
    namespace: str
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    redacted: int = 0
    #: The section a learning was appended to (``mem.agents_md.add_learning``), if any.
    learning: str | None = None

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "namespace": self.namespace,
            "added": list(self.added),
            "updated": list(self.updated),
            "removed": list(self.removed),
            "unchanged": list(self.unchanged),
            "redacted": self.redacted,
            "learning": self.learning,
        }

    def __str__(self) -> str:
        return (
            f"AGENTS.md {self.path} -> namespace {self.namespace!r}: {len(self.added)} added, "
            f"{len(self.updated)} updated, {len(self.removed)} removed, "
            f"{len(self.unchanged)} unchanged"
        )


def read_agents_file(path: str | os.PathLike[str]) -> tuple[Path, str]:
    """The resolved path and text of an AGENTS.md-like file (blocklist checked first)."""
    file = check_ingestable(path).resolve()
    if file.is_dir():
        raise InvalidInput(
            f"{file} is a directory, not a file; pass the path of the AGENTS.md in it "
            f"({file / 'AGENTS.md'})"
        )
    if not file.is_file():
        raise InvalidInput(
            f"no file {file}; pass the path of your AGENTS.md (mem.agents_md.sync('AGENTS.md'))"
        )
    # a database is refused before a plain read: closing a descriptor of a store file
    # this process has open drops DuckDB's lock on it, and another writer gets in
    kind = database_kind(read_span(file, 0, HEAD_BYTES))
    if kind is not None:
        raise InvalidInput(
            f"{file} is a {kind} database, not an AGENTS.md; nothing was read. Pass the path "
            "of your AGENTS.md"
        )
    try:
        return file, file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{file} is not UTF-8 text ({exc.reason}); save it as UTF-8") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read {file}: {exc.strerror}") from None


def sync(core: Core, path: str | os.PathLike[str], *, namespace: str) -> SyncResult:
    """Bring the namespace's memories of ``path`` in line with the file (see module doc).

    One transaction: removed sections deleted, changed ones updated (and queued
    for a new vector), new ones added, with their audit rows.
    """
    pattern = blocked_reason(path)
    if pattern is not None and not core.store.read_only:
        # the Guardian's log (003: "logs --filter guardian"): which file, which pattern,
        # never its content; the refusal itself is raised by read_agents_file below
        core.writer.audit(
            "blocked_file",
            [],
            namespace,
            {"file": core.redact(Path(path).name)[0], "pattern": pattern},
        )
    file, text = read_agents_file(path)
    source = str(file)
    result = SyncResult(path=source, namespace=namespace)
    wanted: dict[str, tuple[Section, str]] = {}
    for section in parse_sections(text):
        safe, count = core.redact(section.text)
        result.redacted += count
        key, heading = core.redact(section.key)[0], core.redact(section.heading)[0]
        wanted[key] = (Section(key, heading, section.level, section.text), safe)
    with core.writer.transaction() as tx:
        existing = _synced_sections(core, namespace, source)
        new_rows: list[dict[str, Any]] = []
        changed: list[tuple[str, str, str]] = []  # id, text, metadata json
        for key, (section, safe) in wanted.items():
            meta = {
                "source": source,
                "section": key,
                "heading": section.heading,
                "level": section.level,
                "content_hash": content_hash(safe),
            }
            if key not in existing:
                result.added.append(key)
                new_rows.append(_section_row(core, namespace, source, key, safe, meta))
            elif existing[key][1] != meta["content_hash"]:
                result.updated.append(key)
                changed.append((existing[key][0], safe, dump_metadata(meta) or "{}"))
            else:
                result.unchanged.append(key)
        gone = {key: value[0] for key, value in existing.items() if key not in wanted}
        result.removed.extend(sorted(gone))
        if gone:
            tx.audit(
                "delete", tx.events.delete(list(gone.values()), namespace=namespace), namespace
            )
        now = core.clock()
        for event_id, safe, meta_json in changed:
            tx.events.update_text(event_id, namespace, now=now, content=safe, metadata=meta_json)
        if changed:
            ids = [c[0] for c in changed]
            tx.audit("update", ids, namespace, {"kind": KIND, "reembed": True})
        if new_rows:
            records = tx.events.insert(new_rows, bulk=True)
            tx.audit("add", [r["id"] for r in records], namespace, {"count": len(records)})
        if result.changed:
            tx.audit(
                "agents_md_sync",
                [section_id(namespace, source, k) for k in result.added + result.updated],
                namespace,
                {
                    "source": source,
                    "added": len(result.added),
                    "updated": len(result.updated),
                    "removed": len(result.removed),
                    "unchanged": len(result.unchanged),
                    **({"redacted": result.redacted} if result.redacted else {}),
                },
            )
    return result


def _synced_sections(core: Core, namespace: str, source: str) -> dict[str, tuple[str, Any]]:
    """section key -> (event id, content hash) of the sections synced from ``source``."""
    existing: dict[str, tuple[str, Any]] = {}
    for event_id, raw in core.store.events.metadata_of_kind(namespace, KIND):
        meta = parse_metadata(raw)
        if meta.get("source") == source and isinstance(meta.get("section"), str):
            existing[meta["section"]] = (event_id, meta.get("content_hash"))
    return existing


def _section_row(
    core: Core, namespace: str, source: str, key: str, text: str, meta: dict[str, Any]
) -> dict[str, Any]:
    return build_row(
        core.settings,
        id=section_id(namespace, source, key),
        session_id=SESSION_ID,
        role="system",
        kind=KIND,
        content=text,
        namespace=namespace,
        importance=IMPORTANCE,
        metadata=meta,
    )


class AgentsWatcher:
    """Re-syncs an AGENTS.md file into a store whenever it changes, on a daemon thread.

    Created by ``mem.agents_md.watch``, which syncs once before returning;
    the file system watch is in place when the constructor returns.  ``syncs``
    counts the syncs run after a change and :meth:`wait_for_sync` blocks until one
    happens, so tests wait on the event rather than sleeping.
    """

    def __init__(
        self,
        core: Core,
        path: str | os.PathLike[str],
        *,
        namespace: str,
        on_sync: Callable[[SyncResult], None] | None = None,
        force_polling: bool = False,
        debounce_ms: int = 200,
        poll_interval: float = 0.5,
    ) -> None:
        try:
            import watchfiles
        except ImportError as exc:  # pragma: no cover - a dependency
            raise InvalidInput(
                "watching AGENTS.md needs watchfiles: pip install watchfiles"
            ) from exc
        self._watchfiles = watchfiles
        self.core = core
        self.namespace = namespace
        self.path, _ = read_agents_file(path)
        self.on_sync = on_sync
        self.force_polling = force_polling
        self.debounce_ms = debounce_ms
        self.poll_interval = poll_interval
        self.syncs = 0
        self._initial_signature = self._signature()
        self.last_result: SyncResult | None = sync(core, self.path, namespace=namespace)
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._changed = threading.Condition()
        self._thread = threading.Thread(
            target=self._run, name=f"nbmemory-agents-md-{self.path.name}", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(10):
            self.stop()
            raise InvalidInput(f"could not start watching {self.path}: {self.last_error}")

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self._stop.is_set()

    def _matches(self, _change: Any, changed_path: str) -> bool:
        return Path(changed_path).name == self.path.name

    def _signature(self) -> str | None:
        try:
            return content_hash(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            return None

    def _poll(self) -> None:
        """The polling fallback: compare the file's hash every ``poll_interval`` seconds."""
        last = self._initial_signature
        self._ready.set()
        while not self._stop.wait(self.poll_interval):
            current = self._signature()
            if current is not None and current != last:
                last = current
                self._sync_once()

    def _run(self) -> None:
        if self.force_polling:
            try:
                self._poll()
            finally:
                self._ready.set()
            return
        try:
            for changes in self._watchfiles.watch(
                self.path.parent,
                watch_filter=self._matches,
                debounce=self.debounce_ms,
                step=50,
                stop_event=self._stop,
                rust_timeout=200,
                yield_on_timeout=True,
                recursive=False,
                raise_interrupt=False,
            ):
                # the first (empty) yield comes after the watch is set up; a change
                # made between the first sync and now is caught here
                if not self._ready.is_set():
                    self._ready.set()
                    if self._signature() != self._initial_signature:
                        self._sync_once()
                        continue
                if self._stop.is_set():
                    break
                if changes and self.path.exists():
                    self._sync_once()
        except Exception as exc:  # report, never kill the kernel
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.exception("nbmemory: watching %s failed", self.path)
        finally:
            self._ready.set()
            with self._changed:
                self._changed.notify_all()

    def _settle(self) -> None:
        """Wait until the file stops changing: an editor or ``write_text`` truncates it
        and then writes, and a sync between the two would forget every section and
        learn them again.  Read twice :data:`SETTLE_S` apart with the same content, or
        :data:`SETTLE_MAX_S` at most (a file rewritten all the time is read as it is)."""
        waited = 0.0
        last = self._signature()
        while waited < SETTLE_MAX_S and not self._stop.wait(SETTLE_S):
            waited += SETTLE_S
            current = self._signature()
            if current == last:
                return
            last = current

    def _sync_once(self) -> None:
        self._settle()
        try:
            result = sync(self.core, self.path, namespace=self.namespace)
        except Exception as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("nbmemory: AGENTS.md sync failed: %s", self.last_error)
            result = None
        with self._changed:
            self.syncs += 1
            if result is not None:
                self.last_result = result
            self._changed.notify_all()
        if result is not None and self.on_sync is not None:
            try:
                self.on_sync(result)
            except Exception:
                log.exception("nbmemory: on_sync callback failed")

    def wait_for_sync(self, count: int = 1, timeout: float = 30.0) -> bool:
        """Block until ``count`` syncs have run since the watcher started (False on timeout)."""
        with self._changed:
            return self._changed.wait_for(
                lambda: self.syncs >= count or not self._thread.is_alive(), timeout
            ) and (self.syncs >= count)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop watching (idempotent); returns when the thread has ended."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return (
            f"<AgentsWatcher {self.path} namespace={self.namespace!r} {state} syncs={self.syncs}>"
        )


class AgentsMd:
    """``sync`` and ``watch`` (``mem.agents_md``); the watchers stop with the store."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self._watchers: list[AgentsWatcher] = []
        self._lock = threading.Lock()

    def sync(
        self, path: str | os.PathLike[str] = "AGENTS.md", *, namespace: str | None = None
    ) -> SyncResult:
        """Bring the ``agents_md`` memories of the namespace in line with the file.

        Sections (by heading) whose text changed are updated and re-embedded, new
        ones added, removed ones deleted; the rest is left untouched.
        """
        return sync(self.core, check_path(path), namespace=self.core.ns(namespace))

    def watch(
        self,
        path: str | os.PathLike[str] = "AGENTS.md",
        *,
        namespace: str | None = None,
        on_sync: Callable[[SyncResult], None] | None = None,
        force_polling: bool = False,
    ) -> AgentsWatcher:
        """Sync now, then again whenever the file changes, until stopped or the store closes."""
        watcher = AgentsWatcher(
            self.core,
            check_path(path),
            namespace=self.core.ns(namespace),
            on_sync=on_sync,
            force_polling=check_flag(force_polling, "force_polling"),
        )
        with self._lock:
            self._watchers.append(watcher)
        return watcher

    def stop(self) -> None:
        """Stop every watcher (the store is closing: they write through it)."""
        with self._lock:
            watchers, self._watchers = self._watchers, []
        for watcher in watchers:
            watcher.stop()
