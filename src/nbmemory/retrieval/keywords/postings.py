"""The documents and postings of the keyword index, kept in step with the table.

Postings live in two tiers.  The *frozen* tier is three flat arrays, grouped by
term (offsets, document positions, term frequencies): built in bulk with numpy
from a full read of the table, and saved and loaded as arrays (:mod:`.persist`,
:mod:`nbmemory.retrieval.index_cache`).  Documents added since go to the *new*
tier, a pair of growable arrays per term; it merges into the frozen one when it
holds half as many postings, and when half the documents are dead.  Beside the
postings, each document's namespace, length, session and place in it, speaker,
time and form are kept as per-document arrays (:mod:`.features`).  The queries
over all this are :class:`nbmemory.retrieval.keywords.KeywordIndex`'s.
"""

from __future__ import annotations

import bisect
import threading
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from ..encoding import codes_of
from ..id_rows import IdRows
from .columns import as_text_array, column_words, texts_at
from .features import (
    NO_DAY_FROM,
    NO_DAY_TO,
    mentions_time_in,
    micros,
    question_share,
    said_days,
    speaker_of,
)
from .persist import DOCUMENT_ARRAYS, pack, unpack
from .scores import K1, B
from .tokens import WORD_RE, word_term

#: Cached word -> term id entries before the cache starts again (words are unbounded).
_WORD_CACHE_SIZE = 500_000


class Postings:
    """The documents of a keyword index and their postings, per namespace, kept in
    step with the table one change at a time (or rebuilt, or loaded, in bulk).

    Document frequencies are counted at query time from the live postings of the
    asked namespace, so forgetting a document is clearing one flag.
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
        #: id -> row (:mod:`nbmemory.retrieval.id_rows`: no dictionary of every id until one is needed)
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
        #: documents, the average length it was computed at): see
        #: :meth:`KeywordIndex._ratio_bound <.index.KeywordIndex._ratio_bound>`
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
        self._question = np.zeros(capacity, dtype=np.float32)
        self._said_from = np.full(capacity, NO_DAY_FROM, dtype=np.int32)
        self._said_to = np.full(capacity, NO_DAY_TO, dtype=np.int32)

    #: The per-document arrays: the saved ones (:data:`.persist.DOCUMENT_ARRAYS`) and
    #: whether each document is alive (every one is in a saved copy).
    _PER_DOCUMENT = ("_alive", *(f"_{name}" for name in DOCUMENT_ARRAYS))
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
        contents: Sequence[str | None] | pa.Array | pa.ChunkedArray,
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
                if isinstance(contents, pa.Array | pa.ChunkedArray):
                    contents = contents.to_pylist()
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
        contents: Sequence[str | None] | pa.Array | pa.ChunkedArray,
        created: np.ndarray,
        seqs: np.ndarray,
    ) -> None:
        n = len(ids)
        self._allocate(max(1024, n))
        texts = as_text_array(contents)
        words = column_words(texts, self._word_id)
        spoken, timed = words.maybe_spoken, words.timed
        for i, text in zip(spoken.tolist(), texts_at(texts, spoken), strict=True):
            speaker = speaker_of(text)
            if speaker is not None:
                self._speakers[i] = self._speaker_code(speaker)
        self._timed[timed] = True
        for i, text in zip(timed.tolist(), texts_at(texts, timed), strict=True):
            self._said_from[i], self._said_to[i] = said_days(text, int(created[i]))
        asked = words.maybe_asked
        for i, text in zip(asked.tolist(), texts_at(texts, asked), strict=True):
            self._question[i] = question_share(text)
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
        tokens, doc_of = words.term_ids, words.doc_of
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
        self._question[pos] = question_share(text)
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

    # -- saving and loading (the format: :mod:`.persist`) ---------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        """Everything the index holds, as named arrays (merged and compacted first)."""
        with self._lock:
            self._freeze()  # every document is alive after a freeze
            n = self._size
            return pack(
                documents={name: getattr(self, f"_{name}")[:n] for name in DOCUMENT_ARRAYS},
                offsets=self._offsets,
                post_docs=self._post_docs,
                post_tfs=self._post_tfs,
                ids=self._ids,  # type: ignore[arg-type]
                vocab=self._vocab,
                namespaces=sorted(self._ns, key=self._ns.__getitem__),
                speakers=self._speaker_names,
                session_keys=self._session_keys,
            )

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Replace the content with what :meth:`to_arrays` gave (checked for shape
        first: arrays that do not fit together leave the index as it was)."""
        saved = unpack(arrays)
        n = len(saved.ids)
        with self._lock:
            self._reset()
            self._allocate(max(1024, n))
            for name, values in saved.documents.items():
                getattr(self, f"_{name}")[:n] = values
            self._alive[:n] = True
            self._ids = saved.ids  # type: ignore[assignment]
            self._pos = IdRows(self._ids, saved.id_order, saved.saved_ids)
            self._size = n
            self._vocab = saved.vocab
            self._term_ids = {t: i for i, t in enumerate(saved.vocab)}
            self._ns = {name: i for i, name in enumerate(saved.namespaces)}
            self._speaker_names = saved.speakers
            self._speaker_codes = {s: i for i, s in enumerate(saved.speakers)}
            self._session_keys = saved.session_keys
            self._session_codes = {key: i for i, key in enumerate(saved.session_keys)}
            self._offsets = saved.offsets
            self._post_docs = saved.post_docs
            self._post_tfs = saved.post_tfs
            self._count_documents()
            self._sort_sessions(n)
            self.stale = False
            self.loads += 1

    # -- reading -------------------------------------------------------------------------
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
