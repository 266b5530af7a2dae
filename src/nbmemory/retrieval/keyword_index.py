"""BM25 keyword search over memory content, kept in step with the ``events`` table.

Why our own index: DuckDB's ``fts`` extension builds a static index that must be
rebuilt by hand after every change (and is not installable offline for DuckDB
2.0), and the Python libraries (``bm25s``, ``rank-bm25``) index a fixed corpus
too.  ``tantivy`` (Rust, on disk) was measured against this index
(``benchmarks/bench_keyword_engines.py``): it opens instantly and builds faster,
but makes a searchable document cost a commit (8-20 ms each, against ~40 us
here) and its analysers find less on LoCoMo (recall@10 0.564 against 0.596).
Memory changes on every ``add_event``, so this is an incremental inverted index:
BM25 statistics per namespace (one namespace's documents never change another's
scores), documents added and removed one by one, and a bulk build in numpy that
can be saved and loaded as arrays (:mod:`nbmemory.retrieval.index_cache`).  Like
:mod:`nbmemory.retrieval.vector_index` it is a cache kept in step by the store's
change announcements; when a change cannot be applied it is marked stale, and
the next search rebuilds it from the table.

It also knows each document's place in its session (by ``created_at``, then
insertion order), which gives the "neighbouring turns" signal of hybrid search.
"""

from __future__ import annotations

import bisect
import math
import threading
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from .encoding import (
    codes_of,
    pack_strings,
    permutation,
    sort_order,
    unpack_string_array,
    unpack_strings,
)
from .id_rows import IdRows
from .keywords.features import (
    DAY_MICROS,
    NO_DAY_FROM,
    NO_DAY_TO,
    NO_TIME,
    DocumentFacts,
    asks_when,
    mentions_time,
    mentions_time_in,
    micros,
    said_days,
    speaker_of,
)
from .keywords.tokens import WORD_RE, tokenize, word_term, word_terms
from .vector_index import positions_mask

__all__ = [
    "B",
    "DAY_MICROS",
    "DEFER_POSTINGS",
    "K1",
    "NO_DAY_FROM",
    "NO_DAY_TO",
    "DocumentFacts",
    "KeywordIndex",
    "KeywordScores",
    "asks_when",
    "mentions_time",
    "micros",
    "said_days",
    "speaker_of",
    "tokenize",
]

K1 = 1.2
B = 0.75
#: A query term held by at least this many documents (or a fiftieth of them) is
#: added lazily, only where it can change the answer (:class:`KeywordScores`).
DEFER_POSTINGS = 50_000

#: Cached word -> term id entries before the cache starts again (words are unbounded).
_WORD_CACHE_SIZE = 500_000


class KeywordIndex:
    """BM25 over the content of events, per namespace, with session neighbours.

    Postings live in two tiers.  The *frozen* tier is three flat arrays, grouped by
    term (offsets, document positions, term frequencies): built in bulk with numpy
    from a full read of the table, and saved and loaded as arrays
    (:mod:`nbmemory.retrieval.index_cache`).  Documents added since go to the *new*
    tier, a pair of growable arrays per term; it merges into the frozen one when it
    holds half as many postings, and when half the documents are dead.  Document
    frequencies are counted at query time from the live postings of the asked
    namespace, so forgetting a document is clearing one flag.
    """

    def __init__(self) -> None:
        #: True until built, and whenever the table changed in a way not applied here.
        self.stale = True
        self.rebuilds = 0
        #: Times it was filled from a saved copy instead of the table.
        self.loads = 0
        self._lock = threading.RLock()
        self._reset()

    def _reset(self) -> None:
        self._ids: list[str | None] = []
        #: id -> row (see :mod:`.id_rows`: no dictionary of every id until one is needed)
        self._pos = IdRows.of(self._ids)
        self._size = 0
        self._allocate(1024)
        self._ns: dict[str, int] = {}
        self._docs: Counter[int] = Counter()
        self._total_len: Counter[int] = Counter()
        self._speaker_names: list[str] = []
        self._speaker_codes: dict[str, int] = {}
        #: (namespace code, speaker code) -> live documents by that speaker
        self._speaker_docs: Counter[tuple[int, int]] = Counter()
        self._session_keys: list[tuple[int, str]] = []
        self._session_codes: dict[tuple[int, str], int] = {}
        self._vocab: list[str] = []
        self._term_ids: dict[str, int] = {}
        #: lower-cased word -> term id (-1: a stop word)
        self._word_ids: dict[str, int] = {}
        # the frozen tier, and the frozen documents in session order
        self._offsets = np.zeros(1, dtype=np.int64)
        self._post_docs = np.zeros(0, dtype=np.int32)
        self._post_tfs = np.zeros(0, dtype=np.float32)
        self._frozen = 0  # documents [0, _frozen) are in _order
        self._order = np.zeros(0, dtype=np.int32)  # by (session, created, seq, position)
        self._order_sessions = np.zeros(0, dtype=np.int32)  # the session of each entry
        self._rank = np.zeros(0, dtype=np.int32)  # position -> its entry in _order
        # the new tier; sessions that gained a document since, in order
        self._postings: dict[int, tuple[array, array]] = {}
        self._new_postings = 0
        self._touched: dict[int, list[tuple[int, int, int]]] = {}
        #: (term, namespace code) -> (the most ``tf / (tf + norm)`` of any of its live
        #: documents, the average length it was computed at): see :meth:`_ratio_bound`
        self._ratios: dict[tuple[int, int], tuple[float, float]] = {}
        #: namespace code -> (statistics it was computed for, length norms)
        self._norms: dict[int, tuple[tuple[int, int, int, int], np.ndarray]] = {}

    def _allocate(self, capacity: int) -> None:
        self._ns_codes = np.zeros(capacity, dtype=np.int32)
        self._lengths = np.zeros(capacity, dtype=np.float32)
        self._alive = np.zeros(capacity, dtype=bool)
        self._timed = np.zeros(capacity, dtype=bool)
        self._speakers = np.full(capacity, -1, dtype=np.int32)
        self._sessions = np.zeros(capacity, dtype=np.int32)
        self._created = np.zeros(capacity, dtype=np.int64)
        self._seq = np.zeros(capacity, dtype=np.int64)
        self._question = np.zeros(capacity, dtype=bool)
        self._said_from = np.full(capacity, NO_DAY_FROM, dtype=np.int32)
        self._said_to = np.full(capacity, NO_DAY_TO, dtype=np.int32)

    _PER_DOCUMENT = (
        "_ns_codes",
        "_lengths",
        "_alive",
        "_timed",
        "_speakers",
        "_sessions",
        "_created",
        "_seq",
        "_question",
        "_said_from",
        "_said_to",
    )
    #: What a per-document array holds where there is no document (0 otherwise).
    _EMPTY = {"_speakers": -1, "_said_from": NO_DAY_FROM, "_said_to": NO_DAY_TO}

    def __len__(self) -> int:
        return len(self._pos)

    def prepare_lookups(self) -> None:
        """Make the id dictionary on a thread if ids were looked up without it."""
        self._pos.start_making()

    # -- codes -----------------------------------------------------------------------
    def _word_id(self, word: str) -> int:
        tid = self._word_ids.get(word)
        if tid is None:
            term = word_term(word)
            tid = self._term_id(term) if term else -1
            if len(self._word_ids) >= _WORD_CACHE_SIZE:
                self._word_ids.clear()
            self._word_ids[word] = tid
        return tid

    def _term_id(self, term: str) -> int:
        tid = self._term_ids.get(term)
        if tid is None:
            tid = self._term_ids[term] = len(self._vocab)
            self._vocab.append(term)
        return tid

    def _word_term_ids(self, words: list[str]) -> list[int]:
        tids = list(map(self._word_ids.get, words))
        if None in tids:
            tids = [self._word_id(word) for word in words]
        return tids  # type: ignore[return-value]

    def _speaker_code(self, speaker: str | None) -> int:
        if speaker is None:
            return -1
        code = self._speaker_codes.get(speaker)
        if code is None:
            code = self._speaker_codes[speaker] = len(self._speaker_names)
            self._speaker_names.append(speaker)
        return code

    def _session_code(self, key: tuple[int, str]) -> int:
        code = self._session_codes.get(key)
        if code is None:
            code = self._session_codes[key] = len(self._session_keys)
            self._session_keys.append(key)
        return code

    # -- keeping in step ---------------------------------------------------------------
    def rebuild(self, rows: Iterable[Sequence[Any]]) -> None:
        """Replace the content: rows of (id, namespace, session_id, content, created_at, seq)."""
        rows = [row for row in rows if row[3] is not None]
        self.rebuild_columns(
            [str(row[0]) for row in rows],
            [row[1] for row in rows],
            [row[2] for row in rows],
            [row[3] for row in rows],
            np.array([micros(row[4]) for row in rows], dtype=np.int64),
            np.array(
                [n if row[5] is None else int(row[5]) for n, row in enumerate(rows)],
                dtype=np.int64,
            ),
        )

    def rebuild_columns(
        self,
        ids: list[str],
        namespaces: Sequence[str] | pa.Array,
        sessions: Sequence[str] | pa.Array,
        contents: Sequence[str | None],
        created: np.ndarray,
        seqs: np.ndarray,
    ) -> None:
        """Replace the content from columns (``created`` as :func:`micros`), in bulk."""
        with self._lock:
            self._reset()
            if len(set(ids)) != len(ids):  # the same id twice: the later row wins, one by one
                self._allocate(max(1024, len(ids)))
                names = namespaces.to_pylist() if isinstance(namespaces, pa.Array) else namespaces
                keys = sessions.to_pylist() if isinstance(sessions, pa.Array) else sessions
                for row in zip(ids, names, keys, contents, created, seqs, strict=True):
                    self._add_row(*row)
            else:
                self._build(ids, namespaces, sessions, contents, created, seqs)
            self.stale = False
            self.rebuilds += 1

    def _build(
        self,
        ids: list[str],
        namespaces: Sequence[str] | pa.Array,
        sessions: Sequence[str] | pa.Array,
        contents: Sequence[str | None],
        created: np.ndarray,
        seqs: np.ndarray,
    ) -> None:
        n = len(ids)
        self._allocate(max(1024, n))
        flat = array("i")
        counts = np.zeros(n, dtype=np.int64)
        speakers = self._speakers
        timed = self._timed
        find_words = WORD_RE.findall
        for i, content in enumerate(contents):
            text = content or ""
            words = find_words(text.lower())
            tids = self._word_term_ids(words)
            flat.extend(tids)
            counts[i] = len(tids)
            speaker = speaker_of(text)
            if speaker is not None:
                speakers[i] = self._speaker_code(speaker)
            if mentions_time_in(text, words):
                timed[i] = True
                self._said_from[i], self._said_to[i] = said_days(text, int(created[i]))
        self._question[:n] = [(c or "").rstrip().endswith("?") for c in contents]
        ns_codes, ns_names = codes_of(namespaces)
        self._ns = {name: code for code, name in enumerate(ns_names)}
        session_ids, session_names = codes_of(sessions)
        pair = ns_codes.astype(np.int64) * max(1, len(session_names)) + session_ids
        unique_pairs, session_codes = np.unique(pair, return_inverse=True)
        width = max(1, len(session_names))
        self._session_keys = [
            (int(p // width), session_names[int(p % width)]) for p in unique_pairs.tolist()
        ]
        self._session_codes = {key: code for code, key in enumerate(self._session_keys)}
        tokens = np.frombuffer(flat, dtype=np.int32) if len(flat) else np.zeros(0, np.int32)
        doc_of = np.repeat(np.arange(n, dtype=np.int64), counts)
        kept = tokens >= 0
        tokens, doc_of = tokens[kept], doc_of[kept]
        lengths = np.bincount(doc_of, minlength=n)
        key = tokens.astype(np.int64) * max(n, 1) + doc_of
        unique_keys, tfs = np.unique(key, return_counts=True)
        terms = unique_keys // max(n, 1)
        self._post_docs = (unique_keys % max(n, 1)).astype(np.int32)
        self._post_tfs = tfs.astype(np.float32)
        self._offsets = np.zeros(len(self._vocab) + 1, dtype=np.int64)
        np.cumsum(np.bincount(terms, minlength=len(self._vocab)), out=self._offsets[1:])
        self._ids = list(ids)
        self._pos = IdRows.of(self._ids)
        self._size = n
        self._ns_codes[:n] = ns_codes
        self._lengths[:n] = lengths
        self._alive[:n] = True
        self._sessions[:n] = session_codes
        self._created[:n] = created
        self._seq[:n] = seqs
        self._count_documents()
        self._sort_sessions(n)

    def _count_documents(self) -> None:
        """The per-namespace and per-speaker counts, from the live documents."""
        n = self._size
        alive = self._alive[:n]
        codes = self._ns_codes[:n][alive]
        width = max(1, len(self._ns))
        self._docs = Counter(
            {c: int(v) for c, v in enumerate(np.bincount(codes, minlength=width)) if v}
        )
        totals = np.bincount(codes, weights=self._lengths[:n][alive], minlength=width)
        self._total_len = Counter({c: int(v) for c, v in enumerate(totals) if v})
        speakers = self._speakers[:n][alive]
        spoken = speakers >= 0
        pairs = codes[spoken].astype(np.int64) * (len(self._speaker_names) + 1) + speakers[spoken]
        values, counts = np.unique(pairs, return_counts=True)
        width = len(self._speaker_names) + 1
        self._speaker_docs = Counter(
            {
                (int(v // width), int(v % width)): int(c)
                for v, c in zip(values.tolist(), counts.tolist(), strict=True)
            }
        )

    def _sort_sessions(self, n: int) -> None:
        """Put documents [0, n) in session order (the frozen order)."""
        positions = np.arange(n, dtype=np.int64)
        sessions = self._sessions[:n]
        self._order = np.lexsort((positions, self._seq[:n], self._created[:n], sessions)).astype(
            np.int32
        )
        self._order_sessions = sessions[self._order]
        self._rank = np.empty(n, dtype=np.int32)
        self._rank[self._order] = np.arange(n, dtype=np.int32)
        self._frozen = n
        self._touched = {}

    def add(self, rows: Iterable[Sequence[Any]]) -> None:
        """Index rows of (id, namespace, session_id, content, created_at, seq)."""
        with self._lock:
            for event_id, namespace, session_id, content, created_at, seq in rows:
                self._add_row(event_id, namespace, session_id, content, micros(created_at), seq)
            if self._new_postings > max(65_536, len(self._post_docs) // 2):
                self._freeze()

    def _add_row(
        self,
        event_id: str,
        namespace: str,
        session_id: str,
        content: str | None,
        created: int,
        seq: Any,
    ) -> None:
        if event_id in self._pos:
            self.remove([event_id])
        text = content or ""
        words = WORD_RE.findall(text.lower())
        terms = Counter(tid for tid in self._word_term_ids(words) if tid >= 0)
        pos = self._size
        if pos == len(self._alive):
            self._grow()
        code = self._ns.setdefault(namespace, len(self._ns))
        length = sum(terms.values())
        speaker = self._speaker_code(speaker_of(text))
        session = self._session_code((code, session_id))
        self._ids.append(event_id)
        self._pos[event_id] = pos
        self._ns_codes[pos] = code
        self._lengths[pos] = float(length)
        self._alive[pos] = True
        self._timed[pos] = timed = mentions_time_in(text, words)
        self._said_from[pos], self._said_to[pos] = (
            said_days(text, int(created)) if timed else (NO_DAY_FROM, NO_DAY_TO)
        )
        self._question[pos] = text.rstrip().endswith("?")
        self._speakers[pos] = speaker
        self._sessions[pos] = session
        self._created[pos] = created = int(created)
        self._seq[pos] = order = pos if seq is None else int(seq)
        self._size += 1
        if speaker >= 0:
            self._speaker_docs[(code, speaker)] += 1
        bisect.insort(self._session_list(session), (created, order, pos))
        self._docs[code] += 1
        self._total_len[code] += length
        postings, ratios = self._postings, self._ratios
        for tid, tf in terms.items():
            cached = ratios.get((tid, code))
            if cached is not None:  # the bound must cover the new document too
                norm = K1 * (1.0 - B + B * length / cached[1])
                ratios[(tid, code)] = (max(cached[0], tf / (tf + norm)), cached[1])
            entry = postings.get(tid)
            if entry is None:
                entry = postings[tid] = (array("i"), array("f"))
            entry[0].append(pos)
            entry[1].append(float(tf))
        self._new_postings += len(terms)

    def _session_list(self, session: int) -> list[tuple[int, int, int]]:
        """The live documents of a session in order, as a list that takes new ones."""
        docs = self._touched.get(session)
        if docs is None:
            lo, hi = np.searchsorted(self._order_sessions, [session, session + 1])
            members = self._order[lo:hi]
            members = members[self._alive[members]]
            docs = self._touched[session] = list(
                zip(
                    self._created[members].tolist(),
                    self._seq[members].tolist(),
                    members.tolist(),
                    strict=True,
                )
            )
        return docs

    def _grow(self) -> None:
        capacity = len(self._alive) * 2
        for name in self._PER_DOCUMENT:
            old = getattr(self, name)
            new = np.full(capacity, self._EMPTY.get(name, 0), dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def compact(self) -> None:
        """Merge the new tier into the frozen one and drop the dead documents."""
        with self._lock:
            self._freeze()

    def _freeze(self) -> None:
        n = self._size
        alive = self._alive[:n]
        live = np.flatnonzero(alive)
        renumber = np.full(max(n, 1), -1, dtype=np.int64)
        renumber[live] = np.arange(live.size)
        frozen_terms = np.repeat(
            np.arange(len(self._offsets) - 1, dtype=np.int64), np.diff(self._offsets)
        )
        terms = [frozen_terms]
        docs = [self._post_docs.astype(np.int64)]
        tfs = [self._post_tfs]
        for tid, (positions, frequencies) in self._postings.items():
            terms.append(np.full(len(positions), tid, dtype=np.int64))
            docs.append(np.frombuffer(positions, dtype=np.int32).astype(np.int64))
            tfs.append(np.frombuffer(frequencies, dtype=np.float32))
        term, doc, tf = np.concatenate(terms), np.concatenate(docs), np.concatenate(tfs)
        kept = alive[doc] if doc.size else np.zeros(0, dtype=bool)
        term, doc, tf = term[kept], renumber[doc[kept]], tf[kept]
        # terms no live document holds are dropped: the vocabulary does not only grow
        counts = np.bincount(term, minlength=len(self._vocab))
        used = np.flatnonzero(counts)
        new_id = np.full(len(self._vocab), -1, dtype=np.int64)
        new_id[used] = np.arange(used.size)
        term = new_id[term]
        order = np.lexsort((doc, term))
        self._vocab = [self._vocab[i] for i in used.tolist()]
        self._term_ids = {t: i for i, t in enumerate(self._vocab)}
        self._word_ids = {}
        self._post_docs = doc[order].astype(np.int32)
        self._post_tfs = tf[order].astype(np.float32)
        self._offsets = np.zeros(len(self._vocab) + 1, dtype=np.int64)
        np.cumsum(counts[used], out=self._offsets[1:])
        for name in self._PER_DOCUMENT:
            old = getattr(self, name)
            new = np.full(max(1024, 2 * live.size), self._EMPTY.get(name, 0), old.dtype)
            new[: live.size] = old[live]
            setattr(self, name, new)
        # new objects, not changed in place: scores computed before still read theirs
        self._ids = [self._ids[i] for i in live.tolist()]
        self._pos = IdRows.of(self._ids)
        self._size = live.size
        self._postings = {}
        self._new_postings = 0
        self._ratios = {}  # term ids were renumbered
        self._sort_sessions(self._size)

    def remove(self, ids: Iterable[str]) -> None:
        """Forget documents; their postings stay, masked as dead, until half the
        documents are dead and the index compacts itself."""
        with self._lock:
            for event_id in ids:
                pos = self._pos.pop(event_id, None)
                if pos is None:
                    continue
                self._alive[pos] = False
                code = int(self._ns_codes[pos])
                self._docs[code] -= 1
                self._total_len[code] -= int(self._lengths[pos])
                speaker = int(self._speakers[pos])
                if speaker >= 0:
                    self._speaker_docs[(code, speaker)] -= 1
                docs = self._touched.get(int(self._sessions[pos]))
                if docs is not None:
                    key = (int(self._created[pos]), int(self._seq[pos]), pos)
                    at = bisect.bisect_left(docs, key)
                    if at < len(docs) and docs[at] == key:
                        del docs[at]
                self._ids[pos] = None
            dead = self._size - len(self._pos)
            if dead > 1024 and dead * 2 > self._size:
                self._freeze()

    # -- saving and loading ------------------------------------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        """Everything the index holds, as named arrays (merged and compacted first)."""
        with self._lock:
            self._freeze()
            n = self._size
            arrays = {name.strip("_"): getattr(self, name)[:n] for name in self._PER_DOCUMENT}
            del arrays["alive"]  # every document is alive after a freeze
            arrays.update(
                offsets=self._offsets,
                post_docs=self._post_docs,
                post_tfs=self._post_tfs,
                session_ns=np.array([k[0] for k in self._session_keys], dtype=np.int32),
            )
            names = sorted(self._ns, key=self._ns.__getitem__)
            arrays["id_order"] = sort_order(self._ids)  # type: ignore[arg-type]
            for name, strings in (
                ("ids", self._ids),
                ("vocab", self._vocab),
                ("namespaces", names),
                ("speakers", self._speaker_names),
                ("session_ids", [k[1] for k in self._session_keys]),
            ):
                arrays.update(pack_strings(name, strings))  # type: ignore[arg-type]
            return arrays

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Replace the content with what :meth:`to_arrays` gave (checked for shape)."""
        saved_ids = unpack_string_array(arrays, "ids")
        ids = saved_ids.to_pylist()
        vocab = unpack_strings(arrays, "vocab")
        n = len(ids)
        offsets = arrays["offsets"]
        post_docs = arrays["post_docs"]
        namespaces = unpack_strings(arrays, "namespaces")
        speakers = unpack_strings(arrays, "speakers")
        session_ids = unpack_strings(arrays, "session_ids")

        def within(name: str, low: int, high: int) -> bool:
            values = arrays[name]
            return not values.size or (values.min() >= low and values.max() < high)

        if (
            len(offsets) != len(vocab) + 1
            or offsets[0] != 0
            or offsets[-1] != len(post_docs)
            or np.any(np.diff(offsets) < 0)
            or len(arrays["post_tfs"]) != len(post_docs)
            or any(
                len(arrays[name.strip("_")]) != n for name in self._PER_DOCUMENT if name != "_alive"
            )
            or len(arrays["session_ns"]) != len(session_ids)
            or not within("post_docs", 0, n)
            or not within("ns_codes", 0, len(namespaces))
            or not within("speakers", -1, len(speakers))
            or not within("sessions", 0, len(session_ids))
            or not within("session_ns", 0, max(1, len(namespaces)))
        ):
            raise ValueError("the saved keyword index is inconsistent")
        with self._lock:
            self._reset()
            self._allocate(max(1024, n))
            for name in self._PER_DOCUMENT:
                if name != "_alive":
                    getattr(self, name)[:n] = arrays[name.strip("_")]
            self._alive[:n] = True
            self._ids = ids
            self._pos = IdRows(self._ids, permutation(arrays.get("id_order"), n), saved_ids)
            self._size = n
            self._vocab = vocab
            self._term_ids = {t: i for i, t in enumerate(vocab)}
            self._ns = {name: i for i, name in enumerate(namespaces)}
            self._speaker_names = speakers
            self._speaker_codes = {s: i for i, s in enumerate(self._speaker_names)}
            self._session_keys = list(
                zip(
                    arrays["session_ns"].tolist(),
                    session_ids,
                    strict=True,
                )
            )
            self._session_codes = {key: i for i, key in enumerate(self._session_keys)}
            self._offsets = np.asarray(offsets, dtype=np.int64)
            self._post_docs = np.asarray(post_docs, dtype=np.int32)
            self._post_tfs = np.asarray(arrays["post_tfs"], dtype=np.float32)
            self._count_documents()
            self._sort_sessions(n)
            self.stale = False
            self.loads += 1

    # -- querying ----------------------------------------------------------------------
    def _term_postings(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        """(positions, term frequencies) of a term, both tiers, in ascending positions.

        Never a view of the new tier's growable arrays: scores keep what they got
        after the lock is released, and an ``array`` cannot grow while viewed.
        """
        frozen = tid < len(self._offsets) - 1
        if frozen:
            lo, hi = self._offsets[tid], self._offsets[tid + 1]
            positions, tfs = self._post_docs[lo:hi], self._post_tfs[lo:hi]
        new = self._postings.get(tid)
        if new is None:
            if not frozen:
                return np.zeros(0, np.int32), np.zeros(0, np.float32)
            return positions, tfs
        more = (
            np.array(new[0], dtype=np.int32),
            np.array(new[1], dtype=np.float32),
        )
        if not frozen:
            return more
        return np.concatenate([positions, more[0]]), np.concatenate([tfs, more[1]])

    def score_array(
        self,
        query: str,
        namespace: str | None,
        *,
        allowed: set[str] | None = None,
        top: int = 50,
    ) -> KeywordScores:
        """BM25 scores of every document for ``query`` (zero where no term matches).

        Terms held by very many documents (``DEFER_POSTINGS``) are added to every
        document only when needed: once the rarer terms give ``top`` documents a
        score the common ones together could not make up for, the common terms are
        left to :class:`KeywordScores`, which adds them only where they can change
        the answer asked of it.  Terms are summed in one fixed order, so a
        document's score is the same float whichever way it is computed.
        """
        with self._lock:
            n = self._size
            total = np.zeros(n, dtype=np.float64)
            terms = sorted(set(tokenize(query)))
            wanted = None if namespace is None else self._ns.get(namespace)
            if not terms or n == 0 or (namespace is not None and wanted is None):
                return KeywordScores(self, total)
            codes = self._ns_codes[:n]
            alive = self._alive[:n]
            # one namespace and no dead document (the usual large store): every
            # posting counts, no masks to build
            every = len(self._pos) == n and len(self._ns) == 1
            defer_at = max(DEFER_POSTINGS, n // 50)
            parts = []
            for term in terms:
                tid = self._term_ids.get(term)
                if tid is None:
                    continue
                positions, tfs = self._term_postings(tid)
                if not every:
                    keep = alive[positions]
                    if wanted is not None:
                        keep &= codes[positions] == wanted
                    positions, tfs = positions[keep], tfs[keep]
                if positions.size == 0:
                    continue
                if every:
                    groups = [(int(codes[positions[0]]), positions, tfs)]
                elif wanted is not None:
                    groups = [(wanted, positions, tfs)]
                else:
                    doc_codes = codes[positions]
                    groups = []
                    for code in np.unique(doc_codes).tolist():
                        mask = doc_codes == code
                        groups.append((code, positions[mask], tfs[mask]))
                for code, p, tf in groups:
                    docs = self._docs[code]
                    df = p.size  # live documents of the namespace holding the term
                    if docs <= 0 or df <= 0:
                        continue
                    idf = math.log(1.0 + (docs - df + 0.5) / (df + 0.5))
                    norms = self._length_norms(code)
                    ratio = self._ratio_bound(tid, code, p, tf, norms) if df >= defer_at else 1.0
                    parts.append(_TermPart(idf, p, tf, norms, ratio))
            # rare terms first: they decide the best documents; common ones last
            parts.sort(key=lambda part: part.positions.size)
            if allowed is not None:
                mask = positions_mask(self._pos, allowed, n)
                for part in parts:
                    kept = mask[part.positions]
                    part.positions, part.tfs = part.positions[kept], part.tfs[kept]
            else:
                mask = None
            deferred: list[_TermPart] = []
            touched = (
                np.zeros(n, dtype=bool)
                if parts[-1:] and parts[-1].positions.size >= defer_at
                else None
            )
            scored = None
            for at, part in enumerate(parts):
                if touched is not None and part.positions.size >= defer_at and at and top > 0:
                    scored = np.flatnonzero(touched)
                    if scored.size >= top:
                        kth = np.partition(total[scored], scored.size - top)[scored.size - top]
                        if kth > sum(rest.bound for rest in parts[at:]):
                            deferred = parts[at:]
                            break
                part.add_to(total)
                if touched is not None:
                    touched[part.positions] = True
            if mask is not None:
                total[~mask] = 0.0
            return KeywordScores(self, total, deferred, scored if deferred else None)

    def _ratio_bound(
        self, tid: int, code: int, positions: np.ndarray, tfs: np.ndarray, norms: np.ndarray
    ) -> float:
        """At least the largest ``tf / (tf + norm)`` of the term's live documents in the
        namespace ``code`` (< 1): how much of ``idf * (K1 + 1)`` the term can add to a
        document, which decides how few documents a deferred term is added to.

        Computed over the postings once, then kept: a new document raises it (see
        :meth:`_add_row`), a removed one can only lower the true value, and when the
        average length has changed since, the kept value is scaled to an upper bound
        (a document's norm is ``K1 * (1 - B) + K1 * B * length / average``: with the
        average grown by ``1 / c``, its norm is at least ``c`` times what it was, so
        its ratio is at most ``1 / (1 + c * (1 / ratio - 1))``)."""
        docs = self._docs[code]
        average = max(self._total_len[code] / docs, 1e-9) if docs > 0 else 1.0
        cached = self._ratios.get((tid, code))
        if cached is None:
            exact = tfs.astype(np.float64) / (tfs + norms[positions]).astype(np.float64)
            ratio = float(exact.max()) if exact.size else 0.0
            self._ratios[(tid, code)] = (ratio, average)
        else:
            ratio, then = cached
            shrink = min(1.0, then / average)
            ratio = 1.0 / (1.0 + shrink * (1.0 / ratio - 1.0)) if ratio > 0 else 0.0
        # the weights are float32: a margin far above their rounding
        return min(1.0, ratio * (1.0 + 1e-5))

    def _length_norms(self, code: int) -> np.ndarray:
        """``K1 * (1 - B + B * length / average length)`` of every document, for the
        namespace ``code``'s average; kept until that namespace's statistics change."""
        docs = self._docs[code]
        key = (code, docs, self._total_len[code], self._size)
        cached = self._norms.get(code)
        if cached is None or cached[0] != key:
            average = max(self._total_len[code] / docs, 1e-9) if docs > 0 else 1.0
            # float32 like the lengths, as the scores have always been computed
            norms = K1 * (1.0 - B + B * self._lengths[: self._size] / average)
            if len(self._norms) >= 4:  # a few namespaces at a time
                self._norms.clear()
            self._norms[code] = cached = (key, norms)
        return cached[1]

    def scores(
        self, query: str, namespace: str | None, *, allowed: set[str] | None = None
    ) -> dict[str, float]:
        """BM25 score of every document of ``namespace`` sharing a term with ``query``."""
        result = self.score_array(query, namespace, allowed=allowed)
        return dict(result.top(None))

    def speakers_named(self, query: str, namespace: str | None) -> set[str]:
        """The speakers of ``namespace`` whose every name word is a word of ``query``
        ("What did Caroline research?" names "caroline")."""
        words = set(WORD_RE.findall(query.lower()))
        with self._lock:
            wanted = None if namespace is None else self._ns.get(namespace)
            names = self._speaker_names
            return {
                names[speaker]
                for (code, speaker), count in self._speaker_docs.items()
                if count > 0
                and (wanted is None or code == wanted)
                and set(WORD_RE.findall(names[speaker])) <= words
            }

    def mentions_time(self, event_id: str | None) -> bool:
        """Whether the document places something in time (see :func:`mentions_time`)."""
        pos = self._pos.get(event_id) if event_id is not None else None
        return False if pos is None else bool(self._timed[pos])

    def speaker(self, event_id: str | None) -> str | None:
        """Who wrote the document ("Name: text"), if it says."""
        pos = self._pos.get(event_id) if event_id is not None else None
        if pos is None:
            return None
        code = int(self._speakers[pos])
        return self._speaker_names[code] if code >= 0 else None

    def facts(self, ids: Sequence[str | None]) -> DocumentFacts:
        """What the hybrid ranking reads about each document of ``ids``, as arrays
        (an id not indexed reads as a document of no session, speaker or time)."""
        with self._lock:
            pos = np.fromiter(
                (self._pos.get(i, -1) if i is not None else -1 for i in ids),
                dtype=np.int64,
                count=len(ids),
            )
            known = pos >= 0
            at = np.where(known, pos, 0)

            def read(array: np.ndarray, missing: Any) -> np.ndarray:
                return np.where(known, array[at], missing)

            return DocumentFacts(
                lengths=read(self._lengths, 0.0),
                question=read(self._question, False),
                timed=read(self._timed, False),
                speakers=read(self._speakers, -1),
                sessions=read(self._sessions, -1),
                created_days=np.where(
                    known & (self._created[at] != NO_TIME), self._created[at] // DAY_MICROS, -1
                ),
                said_from=read(self._said_from, NO_DAY_FROM),
                said_to=read(self._said_to, NO_DAY_TO),
            )

    def speaker_codes(self, names: Iterable[str]) -> np.ndarray:
        """The codes :meth:`facts` gives the speakers ``names`` (unknown names: none)."""
        codes = [self._speaker_codes.get(name) for name in names]
        return np.array([c for c in codes if c is not None], dtype=np.int32)

    def mention_share(self, words: Sequence[str], ids: Sequence[str | None]) -> np.ndarray:
        """For each of ``ids``: the share of ``words`` (names a question mentions) its
        text holds, as stemmed terms."""
        share = np.zeros(len(ids), dtype=np.float64)
        terms = sorted({t for t in word_terms([w.lower() for w in words]) if t})
        if not terms or not len(ids):
            return share
        with self._lock:
            pos = np.fromiter(
                (self._pos.get(i, -1) if i is not None else -1 for i in ids),
                dtype=np.int64,
                count=len(ids),
            )
            for term in terms:
                tid = self._term_ids.get(term)
                if tid is None:
                    continue
                holders, _ = self._term_postings(tid)
                share += np.isin(pos, holders) & (pos >= 0)
        return share / len(terms)

    def neighbours(self, event_id: str) -> tuple[str | None, str | None]:
        """The previous and next document of the same session (by time), if any."""
        with self._lock:
            pos = self._pos.get(event_id)
            if pos is None:
                return None, None
            session = int(self._sessions[pos])
            docs = self._touched.get(session)
            if docs is not None:
                at = bisect.bisect_left(docs, (int(self._created[pos]), int(self._seq[pos]), pos))
                before = self._ids[docs[at - 1][2]] if at > 0 else None
                after = self._ids[docs[at + 1][2]] if at + 1 < len(docs) else None
                return before, after
            return self._frozen_neighbour(pos, -1), self._frozen_neighbour(pos, 1)

    def _frozen_neighbour(self, pos: int, step: int) -> str | None:
        """The nearest live document of the same session in the frozen order."""
        order, sessions, alive = self._order, self._order_sessions, self._alive
        session = sessions[self._rank[pos]]
        at = int(self._rank[pos]) + step
        while 0 <= at < len(order) and sessions[at] == session:
            other = int(order[at])
            if alive[other]:
                return self._ids[other]
            at += step
        return None


class _TermPart:
    """One query term's contribution over the documents holding it."""

    __slots__ = ("idf", "positions", "tfs", "norms", "ratio")

    def __init__(
        self,
        idf: float,
        positions: np.ndarray,
        tfs: np.ndarray,
        norms: np.ndarray,
        ratio: float = 1.0,
    ):
        self.idf = idf
        self.positions = positions  # ascending
        self.tfs = tfs
        self.norms = norms
        #: at least the largest tf / (tf + norm) of these documents (1: not known)
        self.ratio = ratio

    @property
    def bound(self) -> float:
        """The most it adds to any document's score."""
        return self.idf * (K1 + 1.0) * self.ratio

    def weights(self, tfs: np.ndarray, positions: np.ndarray) -> np.ndarray:
        return self.idf * tfs * (K1 + 1.0) / (tfs + self.norms[positions])

    def add_to(self, total: np.ndarray) -> None:
        # each term occurs once per document's postings: plain indexing adds
        total[self.positions] += self.weights(self.tfs, self.positions)

    def add_at(self, scores: np.ndarray, positions: np.ndarray) -> None:
        """Add this term to ``scores`` of the (ascending) ``positions``."""
        # the needles in the haystack's dtype: else numpy converts all of the haystack
        at = np.searchsorted(self.positions, positions.astype(self.positions.dtype))
        at = np.minimum(at, self.positions.size - 1)
        hit = self.positions[at] == positions
        if hit.any():
            found = at[hit]
            scores[hit] += self.weights(self.tfs[found], self.positions[found])


class KeywordScores:
    """BM25 scores of one query over every document of a :class:`KeywordIndex`.

    The scores of the common terms (``deferred``) are added lazily, and exactly:
    :meth:`top` adds them only to the documents that can still reach the top
    (those whose score without them, plus the most they can add, reaches the
    ``limit``-th best score without them: no other document can tie or pass it),
    :meth:`get` to the one document asked.  At a million short memories that
    skips adding a term to most documents.
    """

    def __init__(
        self,
        index: KeywordIndex,
        scores: np.ndarray,
        deferred: list[_TermPart] | None = None,
        scored: np.ndarray | None = None,
    ) -> None:
        self._index = index
        self._scores = scores
        self._deferred = deferred or []
        #: with deferred terms: the (ascending) positions the others gave a score
        self._scored = scored
        self._exact: dict[int, float] = {}
        # the index's id list and map now: a compaction replaces them, so these stay
        # the ones the scores were computed against
        self._ids = index._ids
        self._pos = index._pos
        self._best: float | None = None

    def _complete(self) -> None:
        """Add every deferred term to every document."""
        for part in self._deferred:  # filtered to the allowed documents already
            part.add_to(self._scores)
        self._deferred = []

    def _at(self, positions: np.ndarray) -> np.ndarray:
        """Exact scores at ascending ``positions``."""
        scores = self._scores[positions].copy()
        for part in self._deferred:
            part.add_at(scores, positions)
        return scores

    @property
    def max(self) -> float:
        if self._best is None:
            best = self.top(1)
            self._best = best[0][1] if best else 0.0
        return self._best

    def get(self, event_id: str | None, default: float = 0.0) -> float:
        pos = self._pos.get(event_id) if event_id is not None else None
        if pos is None or pos >= self._scores.size:
            return default
        if not self._deferred:
            return float(self._scores[pos])
        score = self._exact.get(pos)
        if score is None:
            score = self._exact[pos] = float(self._at(np.array([pos]))[0])
        return score

    def prefetch(self, ids: Iterable[str | None]) -> None:
        """Compute the exact scores of ``ids`` at once (what :meth:`get` then returns)."""
        if not self._deferred:
            return
        size, known = self._scores.size, self._exact
        found = {p for i in ids if i is not None and (p := self._pos.get(i)) is not None}
        positions = np.array(sorted(p for p in found if p < size and p not in known), np.int64)
        if positions.size:
            self._exact.update(zip(positions.tolist(), self._at(positions).tolist(), strict=True))

    def top(self, limit: int | None) -> list[tuple[str, float]]:
        """The ``limit`` best (id, score) with a score above zero (all when None), best first."""
        if limit is not None and limit <= 0:
            return []
        scored = self._scored
        if self._deferred and scored is not None and limit is not None and limit <= scored.size:
            bound = sum(part.bound for part in self._deferred)
            partial = self._scores[scored]
            kth = np.partition(partial, partial.size - limit)[partial.size - limit]
            if kth > bound:  # only documents already within ``bound`` of the cut can reach it
                hits = scored[partial >= kth - bound]
                return self._ranked(*self._pruned(hits, limit), limit)
        self._complete()
        hits = np.flatnonzero(self._scores > 0)  # in index order
        return self._ranked(hits, self._scores[hits], limit)

    def _pruned(self, hits: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """The exact scores of those of ``hits`` (ascending positions, at least
        ``limit``) that can still reach the ``limit`` best, adding the deferred terms
        one at a time: after each, a document whose score so far plus the most the
        terms left can add stays below the ``limit``-th best score so far cannot
        reach the final cut, and the next terms skip it.  Each kept document gets
        every term, in the same order as everywhere: the same floats."""
        scores = self._scores[hits].copy()
        deferred = self._deferred
        for at, part in enumerate(deferred):
            part.add_at(scores, hits)
            rest = sum(later.bound for later in deferred[at + 1 :])
            kth = np.partition(scores, scores.size - limit)[scores.size - limit]
            keep = scores >= kth - rest
            if not keep.all():
                hits, scores = hits[keep], scores[keep]
        return hits, scores

    def _ranked(
        self, hits: np.ndarray, scores: np.ndarray, limit: int | None
    ) -> list[tuple[str, float]]:
        """The ``limit`` best of ``hits`` (ascending positions) by ``scores``."""
        keep = scores > 0
        hits, scores = hits[keep], scores[keep]
        if limit is not None and hits.size > limit:
            # equal scores are common (BM25 of short texts): the earliest documents
            # win a tie at the cut, whatever numpy's selection algorithm does
            kth = -np.partition(-scores, limit - 1)[limit - 1]
            chosen = np.flatnonzero(scores > kth)
            ties = np.flatnonzero(scores == kth)[: limit - chosen.size]
            chosen = np.sort(np.concatenate([chosen, ties]))
            hits, scores = hits[chosen], scores[chosen]
        ids = self._ids
        ranked = sorted(
            ((ids[i], float(score)) for i, score in zip(hits.tolist(), scores, strict=True)),
            key=lambda h: -h[1],
        )
        out = [(event_id, score) for event_id, score in ranked if event_id is not None]
        if out and limit:
            self._best = out[0][1]
        return out
