"""BM25 keyword search over memory content, kept in step with the ``events`` table.

Why our own index: DuckDB's ``fts`` extension builds a static index that must be
rebuilt by hand after every change (and is not installable offline for DuckDB
2.0), and the Python libraries (``bm25s``, ``rank-bm25``) index a fixed corpus
too.  ``tantivy`` (Rust, on disk) was measured against this index
(``benchmarks/bench_keyword_engines.py``, results in ``docs/performance.md``,
"Keyword engines: tantivy"): it opens instantly and builds faster, but makes a
document searchable only after a commit, many times what adding one costs here,
and its analysers find less on LoCoMo.  Memory changes on every ``add_event``,
so this is an incremental inverted index: BM25 statistics per namespace (one
namespace's documents never change another's scores), documents added and
removed one by one, and a bulk build in numpy that can be saved and loaded as
arrays (:mod:`nbmemory.retrieval.index_cache`).  Like
:mod:`nbmemory.retrieval.vector_index` it is a cache kept in step by the store's
change announcements; when a change cannot be applied it is marked stale, and
the next search rebuilds it from the table.

It also knows each document's place in its session (by ``created_at``, then
insertion order), which gives the "neighbouring turns" signal of hybrid search,
and what each text says besides its words (speaker, time, question).

* :mod:`.tokens` — the tokeniser (words, stop words, Snowball stems);
* :mod:`.features` — speaker, time and form of a text, read when it is indexed;
* :mod:`.scores` — BM25 of one query, common terms added only where they matter;
* :mod:`.postings` — the documents and postings, kept in step with the table;
* :mod:`.persist` — the named arrays a saved copy is made of, checked on loading;
* :mod:`.index` — :class:`KeywordIndex`, the queries over all of it.
"""

from __future__ import annotations

from .features import (
    DocumentFacts,
    asks_when,
    mentions_time,
    question_share,
    said_days,
    speaker_of,
)
from .index import KeywordIndex
from .scores import K1, B, KeywordScores
from .tokens import tokenize

__all__ = [
    "B",
    "DocumentFacts",
    "K1",
    "KeywordIndex",
    "KeywordScores",
    "asks_when",
    "mentions_time",
    "question_share",
    "said_days",
    "speaker_of",
    "tokenize",
]
