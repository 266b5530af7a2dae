"""``%memory consolidate``, ``%memory restore`` and ``%memory learn``: the source
systems' upkeep from a notebook (000's consolidation and its archive, 003's AGENTS.md
learnings), each a thin call on the magics' store.  Methods of
:class:`~nbmemory.notebook.magics.MemoryMagics` (``self`` is the magics)."""

from __future__ import annotations

import argparse
from typing import Any

from IPython.core.error import UsageError


def consolidate(self: Any, args: argparse.Namespace) -> Any:
    """Summarise the old messages now (``--compact``: the originals archived)."""
    report = self.memory.consolidation.run(
        compact=args.compact or None,
        older_than_hours=args.older_than_hours,
        session_id=args.session,
    )
    if report.summary_ids and report.archived:
        print(f"%memory restore {report.summary_ids[0]} brings its messages back")
    return report


def restore(self: Any, args: argparse.Namespace) -> int:
    """Bring back the messages one summary replaced."""
    restored = int(self.memory.consolidation.restore(args.summary_id))
    if not restored:
        raise UsageError(
            f"nothing in the archive for summary {args.summary_id}; "
            "mem.consolidation.archive() lists what is there"
        )
    print(f"restored {restored} messages")
    return restored


def learn(self: Any, args: argparse.Namespace) -> Any:
    """Append a learning to AGENTS.md (redacted), then sync it."""
    return self.memory.agents_md.add_learning(args.section, " ".join(args.text))
