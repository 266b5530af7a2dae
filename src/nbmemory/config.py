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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidInput
from .redaction import compile_pattern
from .validation import (
    MAX_JSON_DEPTH,
    MAX_KEY_CHARS,
    MAX_METADATA_BYTES,
    JsonLimits,
    check_limit,
    check_unit_interval,
    is_number,
    is_one_of,
    shown,
)

#: The deepest ``max_json_depth`` may be: Python's json module recurses once a level.
MAX_JSON_DEPTH_CEILING = 500

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_NAMESPACE = "default"
#: Padded word-pieces per batch the model embeds at most (``Settings.embed_batch_tokens``).
DEFAULT_BATCH_TOKENS = 4096
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
    #: Run consolidation in a background thread every interval (``mem.consolidation.start``).
    background_consolidation: bool = True
    #: Consolidation replaces the events it summarised by their summary (the Rust
    #: agent layer "reducing storage and context-window use"): the originals move to
    #: an archive (``mem.consolidation.restore`` brings them back) that keeps them
    #: ``archive_retention_days``.  False (default): they stay, marked consolidated.
    consolidation_compact: bool = False
    archive_retention_days: int = 90
    #: Remove expired sessions and audit rows past retention by themselves while a
    #: store is open: at open, then every ``upkeep_interval_hours`` of the store's
    #: clock (``nbmemory.facade.upkeep``); the thread looks at the clock every
    #: ``upkeep_check_seconds``.
    upkeep: bool = True
    upkeep_interval_hours: float = 1.0
    upkeep_check_seconds: float = 60.0
    # the Astreus memory API: similarity search
    similarity_threshold: float = 0.7
    # retrieval profile: "hybrid" (default) fuses cosine similarity with
    # BM25 keywords and neighbouring turns and ranks salient memories by the
    # query; "spec" is the Rust agent layer's: cosine-only relevance, salience
    # by importance alone.
    profile: str = "hybrid"
    #: hybrid: feature -> weight of the fused score, over the fitted defaults
    #: (``nbmemory.retrieval.fusion.FEATURES``; ``nbmemory eval ... --fit`` fits them)
    fusion_weights: dict[str, float] | None = None
    #: hybrid: signal -> how much of it (1 as fitted, 0 off), e.g. {"speaker": 0}
    #: (``nbmemory.retrieval.fusion.SIGNALS``)
    signal_weights: dict[str, float] = field(default_factory=dict)
    #: hybrid: on a question asking for several things, what each further pick
    #: from an already picked session costs (0: no re-ordering)
    diversity_weight: float = 0.5
    hybrid_candidates: int = 50
    #: Save the in-memory indexes beside the store file (``<store>.nbmemory-index/``)
    #: so a new process loads them instead of rebuilding: seconds instead of a
    #: minute at a million memories.  Only indexes of at least
    #: ``index_cache_min_rows`` rows are saved (smaller ones build in well under a second).
    index_cache: bool = True
    index_cache_min_rows: int = 20_000
    #: The most MB one model's vectors may take in memory (None: no limit).  Over it,
    #: each namespace searched gets an index of its own while it is among the most
    #: recently used that fit; the others, and searches across namespaces, are
    #: answered exactly by DuckDB (the same results, slower).
    vector_budget_mb: float | None = None
    #: With a reranker (``Memory(reranker=...)``): how many of the best candidates it re-scores
    rerank_top_n: int = 20
    relevance_threshold_explicit: bool | None = field(default=None, repr=False, compare=False)
    # Vectora's state persistence: sessions, audit, injected context
    session_ttl_hours: float = 24.0
    max_concurrent_sessions: int = 5
    #: Vectora's ``persist_on_exit``: sessions' state outlives the process.  nbmemory
    #: writes a session's state when it changes, so it always does (False is refused).
    persist_on_exit: bool = True
    #: Vectora's ``agents_file``: an AGENTS.md synced into memory when the store opens
    #: (None: none; a configuration file's path is relative to the file's folder).
    agents_file: str | None = None
    #: Vectora's ``auto_update``: keep watching ``agents_file`` until close.
    agents_auto_update: bool = True
    #: Vectora's ``audit.enabled``: False writes no audit rows (no compliance log),
    #: except the record of whom a session was started for, which erasure needs.
    audit_enabled: bool = True
    audit_retention_days: int = 90
    max_memory_tokens: int = 4096
    # secrets redacted before storing/embedding (nbmemory.redaction)
    redaction: bool = True
    redact_patterns: tuple[str, ...] = ()
    #: Also redact personal data: e-mail addresses, phone numbers, IBANs, US SSNs,
    #: Brazilian CPFs, Spanish DNI/NIE numbers (card numbers are redacted always).
    redact_pii: bool = False
    # embeddings
    embedding_model: str = DEFAULT_MODEL
    #: Texts the background worker takes from its queue per round; a backlog of
    #: short texts is taken in larger rounds (up to 1,024 texts of 128k characters),
    #: which the embedder cuts by tokens (``embed_batch_tokens``) after sorting them
    #: by length, so short turns pad little.
    embed_batch_size: int = 64
    #: The memory ceiling of embedding: padded word-pieces per batch the model runs at
    #: most (rows x the longest row, each cut at the model's trained length).  The
    #: model's working memory grows with it; ``docs/performance.md``, "Memory", has the
    #: peak resident memory and the speed measured at several values.
    embed_batch_tokens: int = DEFAULT_BATCH_TOKENS
    # passages of long memories (nbmemory.retrieval.passages)
    #: The model window, in tokens, of an embedder that does not declare its own
    #: (``max_tokens``): a longer text is embedded as overlapping passages.
    passage_tokens: int = 256
    # guard rails: the largest input accepted (each error names the setting to raise)
    #: content of an event or memory, a task's prompt; and, as they carry content,
    #: tool calls (a write_file call holds the file), session state and macro arguments
    max_content_bytes: int = 1_000_000
    #: metadata of an event or memory, as stored JSON
    max_metadata_bytes: int = MAX_METADATA_BYTES
    #: any key of metadata, tool calls, session state or macro arguments, at every depth
    max_key_chars: int = MAX_KEY_CHARS
    #: nesting of metadata, tool calls, session state or macro arguments
    max_json_depth: int = MAX_JSON_DEPTH

    def __post_init__(self) -> None:
        if not is_one_of(self.profile, PROFILES):
            raise InvalidInput(
                f"unknown profile {shown(self.profile)}; profiles: {', '.join(PROFILES)}"
            )
        if self.relevance_threshold_explicit is None:
            object.__setattr__(
                self, "relevance_threshold_explicit", self.relevance_threshold is not None
            )
        if self.relevance_threshold is None:
            object.__setattr__(
                self, "relevance_threshold", PROFILES[self.profile]["relevance_threshold"]
            )
        object.__setattr__(self, "fusion_weights", check_fusion_weights(self.fusion_weights))
        object.__setattr__(self, "signal_weights", check_signal_weights(self.signal_weights))
        if (
            isinstance(self.diversity_weight, bool)
            or not is_number(self.diversity_weight)
            or not math.isfinite(self.diversity_weight)
            or self.diversity_weight < 0
        ):
            raise InvalidInput(
                f"diversity_weight must be a number >= 0 (0: off), got {self.diversity_weight!r}"
            )
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
            "archive_retention_days",
            "max_memory_tokens",
            "embed_batch_size",
            "embed_batch_tokens",
            "passage_tokens",
            "max_content_bytes",
            "max_metadata_bytes",
            "max_key_chars",
            "max_json_depth",
            "rerank_top_n",
        ):
            check_limit(getattr(self, name), name, allow_zero=name.endswith("_limit"))
        if self.passage_tokens < 32:
            raise InvalidInput(
                f"passage_tokens must be at least 32 (a model window in tokens), got "
                f"{self.passage_tokens!r}"
            )
        if self.max_json_depth > MAX_JSON_DEPTH_CEILING:
            raise InvalidInput(
                f"max_json_depth must be at most {MAX_JSON_DEPTH_CEILING} (deeper JSON "
                f"exhausts Python's stack), got {self.max_json_depth!r}"
            )
        for name in ("consolidation_interval_hours", "session_ttl_hours", "upkeep_interval_hours"):
            value = getattr(self, name)
            if not is_number(value) or not math.isfinite(value) or value <= 0:
                raise InvalidInput(f"{name} must be a positive number of hours, got {value!r}")
        value = self.upkeep_check_seconds
        if (
            isinstance(value, bool)
            or not is_number(value)
            or not math.isfinite(value)
            or value <= 0
        ):
            raise InvalidInput(f"upkeep_check_seconds must be a positive number, got {value!r}")
        budget = self.vector_budget_mb
        if budget is not None and (
            isinstance(budget, bool)
            or not is_number(budget)
            or not math.isfinite(budget)
            or budget < 0
        ):
            raise InvalidInput(
                f"vector_budget_mb must be a number of MB >= 0 or None (no limit), got {budget!r}"
            )
        for name in (
            "persist_on_exit",
            "agents_auto_update",
            "audit_enabled",
            "upkeep",
            "consolidation_compact",
        ):
            if not isinstance(getattr(self, name), bool):
                raise InvalidInput(f"{name} must be True or False, got {getattr(self, name)!r}")
        if not self.persist_on_exit:
            raise InvalidInput(
                "persist_on_exit=False is not supported: nbmemory writes a session's state "
                "when it changes, so sessions always outlive the process; delete a session "
                "with mem.sessions.delete(...) instead"
            )
        if self.agents_file is not None and (
            not isinstance(self.agents_file, str) or not self.agents_file.strip()
        ):
            raise InvalidInput(
                f"agents_file must be the path of an AGENTS.md or None, got {self.agents_file!r}"
            )
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
        if not isinstance(self.redact_pii, bool):
            raise InvalidInput(f"redact_pii must be True or False, got {self.redact_pii!r}")
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
        retired = [RETIRED[name] for name in unknown if name in RETIRED]
        if retired:
            raise InvalidInput(retired[0])
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
    def metadata_limits(self) -> JsonLimits:
        """How large metadata may be (``max_metadata_bytes``, keys, depth)."""
        return JsonLimits(
            self.max_metadata_bytes, "max_metadata_bytes", self.max_key_chars, self.max_json_depth
        )

    @property
    def payload_limits(self) -> JsonLimits:
        """How large JSON that carries content may be: tool calls, session state, macro
        arguments (``max_content_bytes``, keys, depth)."""
        return JsonLimits(
            self.max_content_bytes, "max_content_bytes", self.max_key_chars, self.max_json_depth
        )

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


# -- the fused ranking of the hybrid profile (nbmemory.retrieval.fusion) ------------
#: feature -> what it measures, and why it means the same on any agent's memory.
#: Every feature is bounded (0..1) and scale-free: a rank, a share, a yes/no, or a
#: score divided by the query's best, never a raw count or length, so a weight
#: fitted on one corpus reads the same on another (docs/retrieval.md, "Development corpora").
FEATURES: dict[str, str] = {
    "cosine": "cosine similarity (a long memory's best passage), min-max normalised "
    "over the searched memories; holds anywhere: the query's own scale, not the corpus's",
    "cosine_rank": "1 / rank among the cosine candidates (0 outside them); a rank "
    "means the same whatever the model's similarity range",
    "keywords": "BM25 score / the best BM25 score of the query; BM25 divides by the "
    "memory's length over the namespace's average, so long memories do not win by length",
    "keyword_rank": "1 / rank among the BM25 candidates (0 outside them); a rank "
    "means the same whatever the corpus's term statistics",
    "agreement": "cosine x keywords: both rankers agree (both factors in 0..1)",
    "neighbour": "the stronger fused score (0.5 cosine + 0.5 keywords) of the memory "
    "before and after it in its session: an answer often follows the message that "
    "matches the question, in any dialogue",
    "neighbour_cosine": "the stronger cosine of its two neighbours (0..1, as cosine)",
    "neighbour_keywords": "the stronger keyword score of its two neighbours (0..1, as keywords)",
    "speaker": "written (as 'Name: text') by a speaker the question names; a yes/no "
    "read from the text, never from a list of names",
    "speaker_fused": "speaker x its fused score (0..1)",
    "other_speaker": "the question names a speaker, and not this memory's (yes/no)",
    "mention": "share of the names the question mentions (capitalised words that "
    "are not speakers) that the memory's text holds (0..1); weight 0 by default: its "
    "sign depends on the corpus (+-0 on LoCoMo; where turns are stored without "
    "'Name:', the name a question asks about is mostly written by the other person, "
    "addressing her, and +0.85 cost locomo-plain recall@10 0.049), opt in with fusion_weights",
    "time": "a when-question, and the memory places something in time (yes/no)",
    "time_fused": "time x its fused score (0..1)",
    "date_written": "written in the period the question names ('in May 2023', "
    "'on 7 July, 2023'); yes/no, read from dates, not from the corpus",
    "date_said": "says something happened in that period ('last week', read "
    "against when it was written); yes/no",
    "date_after": "written in the two weeks after that period (people tell what "
    "happened afterwards); yes/no",
    "session": "the best fused score in its session (0..1): a session that answers "
    "part of the question holds more of it",
    "question_turn": "how much of the memory asks: the share of its words in sentences "
    "ending with '?' (0..1); a question rarely holds its own answer, but a message that "
    "states a fact and then asks does (a yes/no 'ends with ?' said neither)",
    "length": "log(1 + its number of keyword terms) over the same of the query's longest "
    "candidate: a longer turn says more, but on a corpus of 3k-character messages a raw "
    "length outweighed every other signal (tech-chat recall@10 0.694 -> 0.750)",
}

#: signal -> its features (a feature may serve two signals).
SIGNALS: dict[str, tuple[str, ...]] = {
    "keywords": ("keywords", "keyword_rank", "agreement", "neighbour_keywords"),
    "neighbours": ("neighbour", "neighbour_cosine", "neighbour_keywords"),
    "speaker": ("speaker", "speaker_fused", "other_speaker"),
    "mentions": ("mention",),
    "time": ("time", "time_fused"),
    "dates": ("date_written", "date_said", "date_after"),
    "session": ("session",),
    "form": ("question_turn", "length"),
    # no feature: a later change of what the question asks about is shown above the
    # older hit it changes (nbmemory.retrieval.corrections); 0 turns that off
    "corrections": (),
}

#: Fitted on every development corpus at once (the five LoCoMo conversations, the
#: same re-shaped into long messages and stored without speakers' names, the
#: generated technical chat of seeds 0-2), each question weighted 1 / sqrt(its
#: corpus's questions), the technical chat's three seeds one corpus counted twice (so
#: it weighs about as much as each LoCoMo form), L2 0.03, ``mention`` held at 0;
#: judged by leaving out one of five folds of conversations (a LoCoMo conversation
#: always with its other forms); all-MiniLM-L6-v2 (docs/retrieval.md).  The recipe is
#: ``nbmemory.research.default_weights``; ``benchmarks/default_weights.py`` runs it.
#: ``mention`` is 0 (it was fitted at 0.85 before): a signal whose sign depends on
#: whether speakers' names are written in the text is not a default.  Refitted
#: 2026-12-07 when ``question_turn`` became the share of a memory that asks.
DEFAULT_WEIGHTS: dict[str, float] = {name: 0.0 for name in FEATURES}
DEFAULT_WEIGHTS.update(
    {
        "cosine": 3.1,
        "cosine_rank": 0.21,
        "keywords": 2.5,
        "keyword_rank": 1.24,
        "agreement": -0.78,
        "neighbour": 0.87,
        "neighbour_cosine": 0.0,
        "neighbour_keywords": 0.69,
        "speaker": 0.58,
        "speaker_fused": -0.58,
        "other_speaker": -0.57,
        "mention": 0.0,
        "time": 0.55,
        "time_fused": 2.61,
        "date_written": 5.51,
        "date_said": 1.06,
        "date_after": 2.9,
        "session": 3.54,
        "question_turn": -2.27,
        "length": 3.5,
    }
)


def check_fusion_weights(value: object) -> dict[str, float] | None:
    """``Settings.fusion_weights`` validated: None, or feature -> finite number."""
    return _check_mapping(value, FEATURES, "fusion_weights", "features")


def check_signal_weights(value: object) -> dict[str, float]:
    """``Settings.signal_weights`` validated: signal -> a number >= 0."""
    checked = _check_mapping(value, SIGNALS, "signal_weights", "signals") or {}
    negative = [name for name, v in checked.items() if v < 0]
    if negative:
        raise InvalidInput(f"signal_weights[{negative[0]!r}] must be >= 0 (0 turns it off)")
    return checked


def _check_mapping(
    value: object, known: Mapping[str, object], label: str, kind: str
) -> dict[str, float] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{label} must be a dict of name -> number, got {value!r}")
    unknown = sorted(str(k) for k in value if k not in known)
    if unknown:
        raise InvalidInput(
            f"unknown {kind} in {label}: {', '.join(unknown)}; {kind}: {', '.join(known)}"
        )
    checked = {}
    for name, number in value.items():
        if isinstance(number, bool) or not is_number(number):
            raise InvalidInput(f"{label}[{name!r}] must be a number, got {number!r}")
        if not math.isfinite(number):
            raise InvalidInput(f"{label}[{name!r}] must be finite, got {number!r}")
        checked[str(name)] = float(number)
    return checked


#: Settings that were replaced, and what to use instead.
RETIRED = {
    name: (
        f"{name} was replaced by the fitted fusion weights: use "
        f"signal_weights={{{signal!r}: 0}} to turn the signal off, or fusion_weights="
        "(nbmemory eval ... --fit fits them on your own labelled questions)"
    )
    for name, signal in (
        ("keyword_weight", "keywords"),
        ("neighbor_weight", "neighbours"),
        ("speaker_weight", "speaker"),
        ("time_weight", "time"),
    )
}


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
