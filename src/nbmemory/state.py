"""State-persistence methods of :class:`~nbmemory.Memory` (issue 6, seed 003).

Sessions with TTL, export/import, AGENTS.md sync and redaction hooks live in this
mixin so :mod:`nbmemory.memory` stays the small core.
"""

from __future__ import annotations


class StateMixin:
    """Mixed into :class:`nbmemory.Memory`; uses its store, namespace and audit hook."""
