"""Research methods of :class:`~nbmemory.Memory` (issue 4): importing an agent's
SQLite memory and other helpers that feed :mod:`nbmemory.analysis`.
"""

from __future__ import annotations


class ResearchMixin:
    """Mixed into :class:`nbmemory.Memory`; uses its store, namespace and audit hook."""
