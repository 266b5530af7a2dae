"""The event log: storing, reading, changing and deleting the events of conversations."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..core import Core
from ..errors import InvalidInput, MemoryNotFound, StoreError
from ..event_rows import Event, build_row, build_rows
from ..pseudonyms import PSEUDONYM_KEY
from ..retrieval.index_cache import remove_saved_indexes
from ..store import READ_COLUMNS
from ..validation import (
    check_flag,
    check_limit,
    check_name,
    check_names,
    check_text,
    date_range,
    dump_metadata,
    scope_filters,
)


class EventLog:
    """``add_event``, ``add_events``, ``get``, ``update``, ``events``, ``recent``, ``delete``,
    ``purge`` and ``status``."""

    def __init__(self, core: Core) -> None:
        self.core = core
        #: Shared mode: add_event appends to a journal written at the next turn (group commit).
        self._journal = core.store.journal_for(core.writer)

    def add_event(
        self,
        session_id: str,
        role: str,
        content: str | None,
        *,
        namespace: str | None = None,
        kind: str = "message",
        metadata: dict[str, Any] | None = None,
        importance: float | None = None,
        tool_call_id: str | None = None,
        tool_name: str | None = None,
        tool_calls: Any = None,
        created_at: Any = None,
        graph_id: str | None = None,
        task_id: str | None = None,
    ) -> Event:
        """Store one event and queue its embedding; returns at once with the stored event.

        Without ``importance``, the role's default (user 0.5, assistant 0.5, tool
        0.3, system 0.1), raised to :func:`nbmemory.importance.estimate_importance`
        of the text when that is higher (``estimate_importance=False`` turns the
        estimate off); an explicit value must be a number in 0..1.  The row is durable when
        this returns; its vector follows in the background (see ``flush``).

        A turn that only calls tools passes ``content=None`` (or ``""``) with
        ``tool_calls=[...]``: it is stored with no text and never embedded.
        """
        row = build_row(
            self.core.settings,
            session_id=session_id,
            role=role,
            content=content,
            namespace=self.core.ns(namespace),
            kind=kind,
            metadata=metadata,
            importance=importance,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            tool_calls=tool_calls,
            created_at=created_at,
            graph_id=graph_id,
            task_id=task_id,
        )
        if self._journal is not None:
            return Event.from_record(self._journal(row))
        (record,) = self.core.writer.add_events([row])
        return Event.from_record(record)

    def add_events(
        self, rows: Any, *, session_id: str | None = None, namespace: str | None = None
    ) -> list[str]:
        """Store many events in one Arrow insert; returns their ids in input order.

        ``rows`` is a DataFrame or an iterable of dicts with the keyword arguments of
        ``add_event`` as keys (``session_id``, ``role``, ``content``, ...).  Every
        row is validated first: one bad row stores nothing and the error names it.
        """
        built = build_rows(
            self.core.settings, rows, namespace=self.core.ns(namespace), session_id=session_id
        )
        if not built:
            return []
        self.core.writer.add_events(built, bulk=True)
        return [row["id"] for row in built]

    def get(self, event_id: str, *, namespace: str | None = None) -> Event:
        """One event by id; :class:`MemoryNotFound` when there is none in the namespace."""
        ns = self.core.ns(namespace)
        record = self.core.store.events.get(check_name(event_id, "id"), ns)
        if record is None:
            raise MemoryNotFound(event_id, ns)
        return Event.from_record(record)

    def update(
        self,
        event_id: str,
        *,
        content: str | None = None,
        metadata: dict[str, Any] | None = None,
        namespace: str | None = None,
    ) -> Event:
        """Change an event's content and/or metadata (metadata is replaced whole).

        Any kind of event: a message, a memory, a summary.  Changed content is
        redacted like new content, loses its vector and is queued for embedding
        again, so search never ranks the new text by the old vector; the same text
        keeps its vector.  :class:`~nbmemory.errors.MemoryNotFound` when there is
        no such event in the namespace (nothing is changed).
        """
        ns = self.core.ns(namespace)
        event_id = change_event(self.core, event_id, ns, content, metadata, None, "update")
        return self.get(event_id, namespace=ns)

    def events(
        self,
        *,
        namespace: str | None = None,
        session_id: str | None = None,
        role: str | None = None,
        kind: str | None = None,
        since: Any = None,
        until: Any = None,
        limit: int | None = None,
        filters: dict[str, Any] | None = None,
    ) -> pd.DataFrame:
        """Stored events as a DataFrame, oldest first and, within one time, in the order
        they were written (``add_events`` stamps a batch with one clock reading), filtered
        like ``search``."""
        flt = scope_filters(filters, session_id=session_id, role=role, kind=kind)
        start, end = date_range(since, until)
        if limit is not None:
            limit = check_limit(limit, "limit")
        frame = self.core.store.events.frame(
            namespace=self.core.ns(namespace), filters=flt, since=start, until=end, limit=limit,
            order="created_at, seq",
        )  # fmt: skip
        return frame.reset_index(drop=True)

    def recent(
        self, session_id: str, limit: int | None = None, *, namespace: str | None = None
    ) -> pd.DataFrame:
        """The session's latest events, newest first, from working memory (no SQL once cached)."""
        limit = self.core.settings.recency_limit if limit is None else check_limit(limit, "limit")
        records = self.core.working.recent(
            self.core.ns(namespace), check_name(session_id, "session_id"), limit
        )
        return pd.DataFrame(records, columns=list(READ_COLUMNS))

    def delete(self, ids: str | list[str], *, namespace: str | None = None) -> int:
        """Delete events by id (within the namespace); returns how many were deleted."""
        wanted = [check_name(ids, "id")] if isinstance(ids, str) else check_names(ids, "ids")
        ns = self.core.ns(namespace)
        if not wanted:
            return 0
        with self.core.writer.transaction() as tx:
            deleted = tx.events.delete(wanted, namespace=ns)
            if deleted:
                tx.audit("delete", deleted, ns)
        return len(deleted)

    def purge(
        self,
        *,
        fact_history: bool = False,
        rotate_pseudonym_key: bool = False,
        expire_snapshots: bool = False,
    ) -> dict[str, Any]:
        """Rewrite the store so forgotten text is gone from its bytes; returns sizes.

        ``delete``, ``forget`` and ``update`` remove text from every query at
        once, but DuckDB leaves the old bytes in the file's free blocks until they
        are reused.  ``purge`` copies the live rows into a new file and swaps it in,
        so nothing deleted can be read back from the disk (an export taken before
        stays as it was, and so do backups and copies of the file).  The saved
        indexes beside the store (``<store>.nbmemory-index/``) are removed with it:
        they are built again from the live rows when next needed.  Other ``Memory``
        objects of the file in this process wait while it runs and then use the new
        file (what they write after it is kept); one that stays busy past
        ``$NBMEMORY_LOCK_TIMEOUT`` seconds (30) makes it refuse, nothing changed.
        Other processes share the file only with ``shared=True``, where purge runs
        in its turn and they open the new file at theirs.

        On a lake the old text lives on in every snapshot before now (time
        travel), in the Parquet files they use and in the catalog's statistics of
        those files.  There ``purge`` writes the live rows into new files and then
        expires **every snapshot before now**, which ends time travel to any
        earlier moment: it runs only with ``expire_snapshots=True`` (refused,
        nothing changed, without it; a file keeps no snapshots, so the flag changes
        nothing there).  Other processes keep writing meanwhile; see docs/lake.md.

        ``fact_history=True`` first erases the history of every fact that no longer
        exists (the values a deleted fact had).  ``rotate_pseudonym_key=True`` drops
        the key that made the pseudonyms of forgotten users and sessions: nobody can
        then test a guessed id against the pseudonyms written so far (see
        ``forget_user``).  Both are audited (counts, never values).
        """
        check_flag(fact_history, "fact_history")
        check_flag(rotate_pseudonym_key, "rotate_pseudonym_key")
        check_flag(expire_snapshots, "expire_snapshots")
        store = self.core.store
        store.check_rewritable(expire_snapshots=expire_snapshots)
        if store.read_only:  # before anything, the saved indexes too, is removed
            raise StoreError(
                f"the store {store.path} is open read-only; open it without read_only=True"
            )
        erased = 0
        # every other Memory of the file in this process is held still from here (refused,
        # nothing changed, when one stays busy): they all open the new file afterwards
        with store.rewriting():
            if fact_history or rotate_pseudonym_key:
                with self.core.writer.transaction() as tx:
                    if fact_history:
                        for ns, ids in tx.facts.erase_deleted_history().items():
                            erased += len(ids)
                            tx.audit("erase_fact_history", sorted({str(i) for i in ids}), ns,
                                     {"rows": len(ids)})  # fmt: skip
                    if rotate_pseudonym_key and tx.store.meta.delete(PSEUDONYM_KEY):
                        tx.audit("rotate_pseudonym_key", [], None)
            before = store.stored_bytes()
            done = store.rewrite(expire_snapshots=expire_snapshots)
        saved = store.backend == "file" and store.path != ":memory:"
        removed = remove_saved_indexes(store.path) if saved else 0
        after = store.stored_bytes()
        details: dict[str, Any] = {"bytes_before": before, "bytes_after": after}
        details.update(done)
        details["saved_index_files"] = removed
        if fact_history:
            details["fact_history_erased"] = erased
        self.core.writer.audit("purge", [], None, details)
        result: dict[str, Any] = {"path": store.path, "bytes_before": before, "bytes_after": after}
        result.update(done)
        if fact_history:
            result["fact_history_erased"] = erased
        return result

    def status(self) -> dict[str, Any]:
        """Path, model, counts per namespace/session/kind and the embedding backlog.

        ``without_text`` counts the events with no text (tool-call turns): they are
        never embedded, so they are neither pending nor failed.  ``archived``: the
        events compacting consolidation moved to the archive (not in ``events``).
        """
        core = self.core
        counts = core.store.events.counts(core.model)

        def total(column: str) -> int:
            return int(counts[column].sum()) if not counts.empty else 0

        return {
            "path": core.store.path,
            "namespace": core.namespace,
            "model": core.model,
            "schema_version": core.store.catalog.schema_version(),
            "events": total("events"),
            "embedded": total("embedded"),
            # embedded by another model (another Memory of the file): vector search does
            # not see them; mem.embeddings.reembed() embeds them with this one
            "other_model": total("other_model"),
            "pending": total("pending"),
            "failed": total("failed"),
            "without_text": core.store.events.without_text(),
            # events a compacting consolidation moved out (restorable; not in "events")
            "archived": core.store.archive.count(),
            "backlog": 0 if core.worker is None else core.worker.backlog,
            "passages": _passage_progress(core),
            "counts": counts,
        }


def _passage_progress(core: Core) -> str | None:
    """How far the re-embedding of an older store's long memories as passages went."""
    worker = core.worker
    if worker is None:
        return None
    ids, unchecked = list(worker.passage_requeued), worker.passages_unchecked
    if not ids and not unchecked:
        return None
    left = core.store.vectors.whole_count(core.model, ids) if ids else 0
    done = f"{len(ids) - left} of {len(ids)} long memories re-embedded as passages"
    return done + (f" ({unchecked} more to look at)" if unchecked else "")


def change_event(
    core: Core,
    event_id: Any,
    namespace: str,
    content: Any,
    metadata: Any,
    kinds: tuple[str, ...] | None,
    action: str,
) -> str:
    """Change one event of ``kinds`` (any kind when None) in one transaction with its
    audit row (``action``, naming the fields changed, never their text); returns the
    validated id.  Everything is checked before anything is written."""
    event_id = check_name(event_id, "id")
    if content is None and metadata is None:
        raise InvalidInput(f"{action}: nothing to change; pass content= and/or metadata=")
    if content is not None:
        content = check_text(content, "content", max_bytes=core.settings.max_content_bytes)
    meta_json = None if metadata is None else dump_metadata(metadata, core.settings.metadata_limits)
    with core.writer.transaction() as tx:
        record = tx.events.get(event_id, namespace, kinds=kinds)
        if record is None:
            raise MemoryNotFound(event_id, namespace)
        fields = []
        if content is not None and core.redact(content)[0] != record["content"]:
            fields.append("content")  # stored redacted, and so counted, by the table
        else:
            content = None  # the same text: its vector stays
        if metadata is not None:
            fields.append("metadata")
        if not tx.events.update_text(
            event_id, namespace, now=core.clock(), content=content, metadata=meta_json
        ):
            raise MemoryNotFound(event_id, namespace)  # deleted meanwhile
        tx.audit(action, [event_id], namespace, {"fields": fields})
    return event_id
