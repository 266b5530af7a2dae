"""The research toolkit: real conversations with labels, retrieval evaluation,
DataFrames of how memory behaves, and plotly figures of it.

* :mod:`.datasets` — LoCoMo conversations loaded into a store;
* :mod:`.corpora` — development corpora of other shapes built in the repository
  (LoCoMo re-shaped into long messages, LoCoMo stored without speakers' names,
  a generated technical chat);
* :mod:`.evaluation` — recall@k, precision@k, MRR per strategy, threshold sweeps;
* :mod:`.generalisation` — the default ranking beside cosine, keywords and RRF on
  every corpus (``nbmemory.research.evaluate_corpora``);
* :mod:`.frames` — pandas views (no plotting library needed);
* :mod:`.figures` — plotly figures (the ``notebook`` extra).
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    """``evaluate_corpora`` and ``ablate_corpora``, imported when first asked for (the
    facade imports this package; the corpora are only built when evaluated)."""
    if name in ("evaluate_corpora", "ablate_corpora"):
        from . import generalisation

        return getattr(generalisation, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
