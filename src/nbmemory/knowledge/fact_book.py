"""Facts: small named truths an agent keeps, ``(category, key) -> value``.

``set`` upserts by ``(category, key)`` within a namespace.  A replaced value is
never silently overwritten: the old value, who set it and when it was valid go to
``fact_history`` with the time it was superseded; ``delete(..., history=True)``
(or ``purge(fact_history=True)``, for every deleted fact) erases that history.
Facts are embedded lazily (the first time a query asks for relevant facts) so
``relevant`` ranks them by similarity like memories.  ``mem.facts`` is this class.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..core import Core
from ..errors import FactNotFound, InvalidInput
from ..validation import (
    check_limit,
    check_name,
    check_text,
    check_unit_interval,
    is_one_of,
    shown,
    utcnow,
)

#: Who may have stored a fact.
FACT_SOURCES = ("", "agent", "user", "consolidation")


def fact_text(category: str, key: str, value: str) -> str:
    """The text a fact is embedded as."""
    return f"{category} {key}: {value}"


def _number_text(value: float) -> str:
    """A number given as a fact's value, as text: NaN and infinity are a number gone
    wrong, not a value to remember, and an int too long for ``str`` is refused with
    the same :class:`InvalidInput` as any other bad value."""
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput(f"value must be a finite number or text, got {value!r}")
    try:
        return str(value)
    except ValueError:  # Python's limit on the digits of an int turned to text
        raise InvalidInput(
            "value is a number too long to store as text; store it as a string"
        ) from None


def check_fact(category: Any, key: Any, value: Any, source: Any) -> tuple[str, str, str, str]:
    """Validated ``(category, key, value, source)``; :class:`InvalidInput` names the bad one."""
    category = check_name(category, "category")
    key = check_name(key, "key")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = _number_text(value)
    value = check_text(value, "value", max_bytes=100_000)
    if not is_one_of(source, FACT_SOURCES):
        raise InvalidInput(
            f"source must be '' (not said) or one of {', '.join(FACT_SOURCES[1:])}, got "
            f"{shown(source)}"
        )
    return category, key, value, source


class Facts:
    """``set``, ``get``, ``list``, ``history``, ``delete``, ``relevant`` (``mem.facts``)."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def set(
        self,
        category: str,
        key: str,
        value: str,
        *,
        source: str = "",
        namespace: str | None = None,
    ) -> dict[str, Any]:
        """Store ``value`` under ``(category, key)``; a different old value goes to history.

        ``source`` says who knows it: ``"agent"``, ``"user"`` or ``"consolidation"``;
        ``""`` (the default, as in the Rust agent's facts table) when the caller does not say.
        Returns the fact as a dict with ``status`` created / updated / unchanged.
        """
        category, key, value, source = check_fact(category, key, value, source)
        ns = self.core.ns(namespace)
        with self.core.writer.transaction() as tx:
            fact_id, status = tx.facts.upsert(ns, category, key, value, source, utcnow())
            details = {"category": category, "key": key, "source": source, "status": status}
            tx.audit("set_fact", [str(fact_id)], ns, details)
        return {**self.get(category, key, namespace=ns), "status": status}

    def get(self, category: str, key: str, *, namespace: str | None = None) -> dict[str, Any]:
        """The current fact as a dict; :class:`~nbmemory.errors.FactNotFound` when there is none."""
        ns = self.core.ns(namespace)
        row = self.core.store.facts.get(
            ns, self._name(category, "category"), self._name(key, "key")
        )
        if row is None:
            raise FactNotFound((category, key), ns)
        return row

    def list(self, category: str | None = None, *, namespace: str | None = None) -> pd.DataFrame:
        """Current facts as a DataFrame (one category, or all), by category then key."""
        if category is not None:
            category = self._name(category, "category")
        return self.core.store.facts.frame(self.core.ns(namespace), category)

    def history(
        self,
        category: str | None = None,
        key: str | None = None,
        *,
        namespace: str | None = None,
    ) -> pd.DataFrame:
        """Replaced (or deleted) values, newest supersession first."""
        category = None if category is None else self._name(category, "category")
        key = None if key is None else self._name(key, "key")
        return self.core.store.facts.history(self.core.ns(namespace), category, key)

    def delete(
        self, category: str, key: str, *, namespace: str | None = None, history: bool = False
    ) -> bool:
        """Remove a fact (its last value is kept in history); True if it existed.

        ``history=True`` erases its history too: every earlier value of
        ``(category, key)``, also of a fact deleted before under that name, and the
        last value is not kept (True then if anything was removed).  The audit row
        names the category and key, never a value; ``purge()`` then erases the old
        bytes from the file.
        """
        if not isinstance(history, bool):
            raise InvalidInput(f"history must be True or False, got {shown(history)}")
        category = self._name(category, "category")
        key = self._name(key, "key")
        ns = self.core.ns(namespace)
        with self.core.writer.transaction() as tx:
            fact_id = tx.facts.delete(ns, category, key, utcnow(), history=history)
            erased = tx.facts.erase_history(ns, category, key) if history else []
            targets = sorted({*([] if fact_id is None else [fact_id]), *erased})
            if targets:
                details: dict[str, Any] = {"category": category, "key": key}
                if history:
                    details["history_erased"] = len(erased)
                tx.audit("delete_fact", [str(i) for i in targets], ns, details)
        return bool(targets)

    def relevant(
        self,
        query: str,
        *,
        limit: int = 5,
        threshold: float | None = None,
        category: str | None = None,
        namespace: str | None = None,
    ) -> pd.DataFrame:
        """Facts most similar to ``query`` (cosine), best first, with ``similarity``.

        Facts not yet embedded by the current model are embedded first (once).
        ``threshold`` keeps only facts with similarity >= it.
        """
        limit = check_limit(limit, "limit")
        if threshold is not None:
            threshold = check_unit_interval(threshold, "threshold", low=-1.0)
        if category is not None:
            category = self._name(category, "category")
        ns = self.core.ns(namespace)
        vector = self.core.retriever.embed_query(query)
        self._embed_facts(ns)
        return self.core.store.facts.similar(
            vector, self.core.model, namespace=ns, limit=limit, threshold=threshold,
            category=category,
        )  # fmt: skip

    def _name(self, value: str, label: str) -> str:
        """A category or key as stored (redacted like everything users hand in)."""
        return self.core.redact(check_name(value, label))[0]

    def _embed_facts(self, namespace: str) -> int:
        """Embed the namespace's facts that have no vector from the current model."""
        rows = self.core.store.facts.unembedded(namespace, self.core.model)
        if not rows:
            return 0
        texts = [fact_text(r[1], r[2], r[3]) for r in rows]
        vectors = np.asarray(self.core.embedder.embed(texts), dtype=np.float32)
        with self.core.writer.transaction() as tx:
            tx.facts.write_vectors([r[0] for r in rows], vectors, self.core.model)
        return len(rows)
