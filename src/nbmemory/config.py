"""Every default in one settings object.

The numbers come from the three systems nbmemory is drawn from:

* a Rust agent's state and memory layer: working memory of 50 events per
  session, the tri-hybrid context (recency 10; salience importance >= 0.8, 5;
  relevance similarity > 0.65, 5), importance by role, consolidation every
  6 hours and the all-MiniLM-L6-v2 model;
* Vectora's state persistence: sessions with a 24 h TTL and at most 5 per
  user, 90 days of audit, secret redaction, a 4096-token context budget;
* the Astreus memory API: similarity search at 0.7.

They are defaults, not truths: every one can be changed per store
(``Memory(..., settings=Settings(relevance_threshold=0.4))`` or
``mem.configure(...)``) and most per call.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidInput
from .redaction import compile_pattern
from .validation import check_limit, check_unit_interval, is_number

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_NAMESPACE = "default"
DEFAULT_STORE_FILENAME = "nbmemory.duckdb"

#: Environment variable naming the default store path.
ENV_STORE_PATH = "NBMEMORY_PATH"
#: Environment variable naming a local directory holding the fastembed model.
ENV_MODEL_PATH = "NBMEMORY_MODEL_PATH"


def _default_importance() -> dict[str, float]:
    return {"user": 0.5, "assistant": 0.5, "tool": 0.3, "system": 0.1}


@dataclass(frozen=True)
class Settings:
    """Tunable numbers of a store.  Frozen: use :meth:`replace` to change them."""

    # the Rust agent layer: working memory and the tri-hybrid context
    working_memory_cap: int = 50
    recency_limit: int = 10
    salience_threshold: float = 0.8
    salience_limit: int = 5
    #: Cosine similarity a memory must exceed to be "relevant" in get_context.
    #: ``None`` takes the profile's value: 0.65 for ``spec`` (the Rust agent layer's),
    #: 0.2 for ``hybrid``.
    relevance_threshold: float | None = None
    relevance_limit: int = 5
    importance_by_role: dict[str, float] = field(default_factory=_default_importance)
    #: Raise a new event's role default to nbmemory.importance's estimate from its text.
    estimate_importance: bool = True
    consolidation_interval_hours: float = 6.0
    #: Run consolidation in a background thread every interval (``start_consolidation``).
    background_consolidation: bool = True
    # the Astreus memory API: similarity search
    similarity_threshold: float = 0.7
    # retrieval profile: "hybrid" (default) fuses cosine similarity with
    # BM25 keywords and neighbouring turns and ranks salient memories by the
    # query; "spec" is the Rust agent layer's: cosine-only relevance, salience
    # by importance alone.
    profile: str = "hybrid"
    keyword_weight: float = 0.5
    neighbor_weight: float = 0.5
    #: hybrid: a turn written by a speaker the query names ("Name: text") scores x (1 + w)
    speaker_weight: float = 0.2
    #: hybrid: on a "when" question, a turn that places something in time scores x (1 + w)
    time_weight: float = 0.3
    hybrid_candidates: int = 50
    #: Save the in-memory indexes beside the store file (``<store>.nbmemory-index/``)
    #: so a new process loads them instead of rebuilding: seconds instead of a
    #: minute at a million memories.  Only indexes of at least
    #: ``index_cache_min_rows`` rows are saved (smaller ones build in well under a second).
    index_cache: bool = True
    index_cache_min_rows: int = 20_000
    #: With a reranker (``Memory(reranker=...)``): how many of the best candidates it re-scores
    rerank_top_n: int = 20
    relevance_threshold_explicit: bool | None = field(default=None, repr=False, compare=False)
    # Vectora's state persistence: sessions, audit, injected context
    session_ttl_hours: float = 24.0
    max_concurrent_sessions: int = 5
    audit_retention_days: int = 90
    max_memory_tokens: int = 4096
    # secrets redacted before storing/embedding (nbmemory.redaction)
    redaction: bool = True
    redact_patterns: tuple[str, ...] = ()
    # embeddings
    embedding_model: str = DEFAULT_MODEL
    embed_batch_size: int = 64
    # guard rails
    max_content_bytes: int = 1_000_000

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise InvalidInput(f"unknown profile {self.profile!r}; profiles: {', '.join(PROFILES)}")
        if self.relevance_threshold_explicit is None:
            object.__setattr__(
                self, "relevance_threshold_explicit", self.relevance_threshold is not None
            )
        if self.relevance_threshold is None:
            object.__setattr__(
                self, "relevance_threshold", PROFILES[self.profile]["relevance_threshold"]
            )
        for name in ("keyword_weight", "neighbor_weight", "speaker_weight", "time_weight"):
            check_unit_interval(getattr(self, name), name)
        check_limit(self.hybrid_candidates, "hybrid_candidates", allow_zero=False)
        for name in ("salience_threshold", "relevance_threshold", "similarity_threshold"):
            check_unit_interval(getattr(self, name), name, low=-1.0)
        for name in (
            "working_memory_cap",
            "recency_limit",
            "salience_limit",
            "relevance_limit",
            "max_concurrent_sessions",
            "audit_retention_days",
            "max_memory_tokens",
            "embed_batch_size",
            "max_content_bytes",
            "rerank_top_n",
        ):
            check_limit(getattr(self, name), name, allow_zero=name.endswith("_limit"))
        for name in ("consolidation_interval_hours", "session_ttl_hours"):
            value = getattr(self, name)
            if not is_number(value) or not math.isfinite(value) or value <= 0:
                raise InvalidInput(f"{name} must be a positive number of hours, got {value!r}")
        if not isinstance(self.background_consolidation, bool):
            raise InvalidInput(
                f"background_consolidation must be True or False, got "
                f"{self.background_consolidation!r}"
            )
        if not isinstance(self.estimate_importance, bool):
            raise InvalidInput(
                f"estimate_importance must be True or False, got {self.estimate_importance!r}"
            )
        if not isinstance(self.redaction, bool):
            raise InvalidInput(f"redaction must be True or False, got {self.redaction!r}")
        if isinstance(self.redact_patterns, str):
            raise InvalidInput("redact_patterns must be a list of regex strings, not one string")
        object.__setattr__(self, "redact_patterns", tuple(self.redact_patterns))
        for index, pattern in enumerate(self.redact_patterns):
            compile_pattern(pattern, f"redact_patterns[{index}]")
        if not isinstance(self.importance_by_role, dict) or not self.importance_by_role:
            raise InvalidInput("importance_by_role must be a non-empty dict of role -> 0..1")
        for role, value in self.importance_by_role.items():
            check_unit_interval(value, f"importance_by_role[{role!r}]")

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes`` applied (and validated); unknown names are an error."""
        known = {f.name for f in dataclasses.fields(self)} - {"relevance_threshold_explicit"}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise InvalidInput(
                f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        explicit = bool(self.relevance_threshold_explicit) or (
            changes.get("relevance_threshold") is not None
        )
        if "relevance_threshold" in changes and changes["relevance_threshold"] is None:
            explicit = False  # back to the profile's value
        if "profile" in changes and not explicit:
            changes["relevance_threshold"] = None  # follow the new profile
        return dataclasses.replace(self, relevance_threshold_explicit=explicit, **changes)

    @property
    def search_mode(self) -> str:
        """How :meth:`Memory.search` ranks by default: ``"hybrid"`` or ``"vector"``."""
        return PROFILES[self.profile]["search_mode"]

    @property
    def salience_order(self) -> str:
        """How get_context picks among salient memories: ``"query"`` (closest to the
        query first) or ``"importance"`` (most important first, whatever the query)."""
        return PROFILES[self.profile]["salience_order"]

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every setting (for display, export and audit)."""
        values = dataclasses.asdict(self)
        values.pop("relevance_threshold_explicit", None)
        return values


#: Retrieval profiles.  ``spec`` is the Rust agent layer's exactly; ``hybrid`` is
#: the default because it finds more of what answers a question (LoCoMo recall,
#: docs/retrieval.md).
PROFILES: dict[str, dict[str, Any]] = {
    "spec": {"relevance_threshold": 0.65, "search_mode": "vector", "salience_order": "importance"},
    "hybrid": {"relevance_threshold": 0.2, "search_mode": "hybrid", "salience_order": "query"},
}


def default_store_path() -> str:
    """``$NBMEMORY_PATH`` when set, else ``nbmemory.duckdb`` in the working directory."""
    return os.environ.get(ENV_STORE_PATH) or DEFAULT_STORE_FILENAME
