"""The retrieval layer: models, indexes and rankings over the store.

* :mod:`.embedders` and :mod:`.worker` — the embedding model and the background
  worker that embeds stored events;
* :mod:`.vector_index`, :mod:`.keywords` and :mod:`.indexes` — exact
  in-memory cosine and BM25 indexes kept in step with the store;
* :mod:`.hybrid` — cosine fused with keywords and neighbouring turns;
* :mod:`.working_memory` — each session's recent events, without SQL;
* :mod:`.context` and :mod:`.retriever` — ``search`` and the tri-hybrid context.
"""

from __future__ import annotations

from .context import Context, ContextItem, Prompt, estimate_tokens
from .embedders import CallableEmbedder, Embedder, FastEmbedEmbedder, HashEmbedder, resolve_embedder
from .indexes import Indexes
from .retriever import SEARCH_COLUMNS, SEARCH_MODES, Retriever
from .worker import EmbeddingWorker
from .working_memory import WorkingMemory

__all__ = [
    "SEARCH_COLUMNS",
    "SEARCH_MODES",
    "CallableEmbedder",
    "Context",
    "ContextItem",
    "Embedder",
    "EmbeddingWorker",
    "FastEmbedEmbedder",
    "HashEmbedder",
    "Indexes",
    "Prompt",
    "Retriever",
    "WorkingMemory",
    "estimate_tokens",
    "resolve_embedder",
]
