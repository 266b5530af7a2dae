"""Long-term memory methods of :class:`~nbmemory.Memory` (issue 5).

Seed 004's Astreus memory API (``add_memory``, ``search_memories`` ...) and seed
000's facts, macros, allowed prefixes, scheduled tasks and consolidation live in
this mixin so :mod:`nbmemory.memory` stays the small core.
"""

from __future__ import annotations


class LongTermMixin:
    """Mixed into :class:`nbmemory.Memory`; uses its store, namespace and audit hook."""
