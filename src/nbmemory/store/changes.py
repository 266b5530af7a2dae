"""What a committed write did to the store, announced to whoever keeps a cache of it.

The store's table objects record each change as they make it; when the
transaction commits, the store hands one :class:`Change` to its listeners (the
vector and keyword indexes, working memory, the embedding queue, the session
touch cache).  Nobody inspects SQL text to find out what changed: a change the
store cannot describe (plain SQL through the escape hatch, another process
writing the file) is announced as ``unknown`` and every cache rebuilds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: (id, namespace, session_id, content, created_at, seq): an event's place and text.
TextRow = tuple[str, str, str, Any, Any, Any]


@dataclass
class Vectors:
    """Vectors of one model written for some events: one row per event, or, for a long
    text, one row per passage (its id repeated)."""

    model: str
    ids: list[str]
    namespaces: list[str]
    matrix: np.ndarray
    #: Each row's passage number (None: every row is the vector of its whole text).
    passages: list[int | None] | None = None
    #: Each row's characters ``(start, stop)`` of its event's text (None: whole texts).
    spans: list[tuple[int, int] | None] | None = None


@dataclass
class Change:
    """Everything one transaction changed, by kind of change."""

    #: New events: their whole records (read columns and ``seq``), in insertion order.
    added: list[dict[str, Any]] = field(default_factory=list)
    #: True when ``added`` came from a bulk write (caches reload rather than append).
    bulk: bool = False
    #: Events whose text changed (their vectors were cleared with it).
    retexted: list[TextRow] = field(default_factory=list)
    #: Events whose other columns changed (metadata, consolidated_at ...).
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    vectors: list[Vectors] = field(default_factory=list)
    #: Events that lost their vector (a failed embedding, a re-embed).
    unvectored: list[str] = field(default_factory=list)
    #: (id, text) of events that now wait for a vector.
    to_embed: list[tuple[str, str]] = field(default_factory=list)
    #: Sessions started or reopened -> last activity; and sessions closed or deleted.
    sessions_active: dict[tuple[str, str], Any] = field(default_factory=dict)
    sessions_inactive: set[tuple[str, str]] = field(default_factory=set)
    #: Anything may have changed: every cache rebuilds from the table.
    unknown: bool = False
    #: Secrets redacted from the written text, per namespace (for the audit row).
    redacted: dict[str | None, int] = field(default_factory=dict)
    #: The deleted rows stay in the working memory of the sessions that hold them
    #: (the Astreus ``clearMemories({syncWithContext: false})``).
    keep_context: bool = False

    def __bool__(self) -> bool:
        return any(
            (
                self.added,
                self.retexted,
                self.updated,
                self.deleted,
                self.vectors,
                self.unvectored,
                self.to_embed,
                self.sessions_active,
                self.sessions_inactive,
                self.unknown,
            )
        )

    def merge(self, other: Change) -> None:
        """Add ``other`` (a later change of the same transaction) to this one."""
        self.added += other.added
        self.bulk = self.bulk or other.bulk
        self.retexted += other.retexted
        self.updated += other.updated
        self.deleted += other.deleted
        self.vectors += other.vectors
        self.unvectored += other.unvectored
        self.to_embed += other.to_embed
        for key in other.sessions_active:
            self.sessions_inactive.discard(key)
        self.sessions_active.update(other.sessions_active)
        for key in other.sessions_inactive:
            self.sessions_active.pop(key, None)
        self.sessions_inactive |= other.sessions_inactive
        self.unknown = self.unknown or other.unknown
        for namespace, count in other.redacted.items():
            self.redacted[namespace] = self.redacted.get(namespace, 0) + count

    @property
    def event_ids(self) -> set[str]:
        """Ids of every event this change touched."""
        ids = {r["id"] for r in self.added} | {r[0] for r in self.retexted}
        ids |= set(self.updated) | set(self.deleted) | set(self.unvectored)
        for vectors in self.vectors:
            ids |= set(vectors.ids)
        return ids


Listener = Callable[[Change], None]
