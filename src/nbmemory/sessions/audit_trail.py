"""The audit trail: who changed what and when, and its retention.

Every change made through a :class:`~nbmemory.Memory` appends one row to
``audit_log`` in the same transaction (the writer does it): actor, action, the
namespace, target ids and a JSON ``details`` object.  Details say *that*
something happened (``{"redacted": 2}``), never the secret itself.  Nothing
updates or deletes audit rows except :meth:`Audit.cleanup`, which applies
the retention period (``Settings.audit_retention_days``, 90 by default), and
forgetting a user or a session, which replaces their ids by pseudonyms
(:mod:`nbmemory.pseudonyms`).
"""

from __future__ import annotations

import datetime as dt

import pandas as pd

from ..core import Core
from ..validation import check_flag, check_limit, check_name


class Audit:
    """``log`` and ``cleanup`` (``mem.audit``)."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def log(
        self, *, namespace: str | None = None, action: str | None = None, limit: int | None = None
    ) -> pd.DataFrame:
        """The audit trail as a DataFrame, newest first (all namespaces unless given)."""
        return self.core.store.audit.frame(
            namespace=None if namespace is None else check_name(namespace, "namespace"),
            action=None if action is None else check_name(action, "action"),
            limit=None if limit is None else check_limit(limit, "limit"),
        )

    def cleanup(self, *, dry_run: bool = False) -> int:
        """Apply the audit retention (``audit_retention_days``, 90); returns rows (to be) deleted."""
        days = self.core.settings.audit_retention_days
        cutoff = self.core.clock() - dt.timedelta(days=days)
        if check_flag(dry_run, "dry_run"):
            return self.core.store.audit.count_older(cutoff)
        with self.core.writer.transaction() as tx:
            removed = tx.store.audit.delete_older(cutoff)
            tx.audit("cleanup", [], None, {"what": "audit_log", "rows": removed, "days": days})
        return removed
