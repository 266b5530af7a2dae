"""The keyword index's queries: BM25 scores, speakers, facts and session neighbours.

:class:`KeywordIndex` answers what search and the hybrid ranking ask of the
documents and postings kept in step by :class:`~.postings.Postings`.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..vector_index import positions_mask
from .features import DAY_MICROS, NO_DAY_FROM, NO_DAY_TO, NO_TIME, DocumentFacts
from .postings import Postings
from .scores import K1, B, KeywordScores, TermPart
from .tokens import WORD_RE, tokenize, word_terms

#: A query term held by at least this many documents (or a fiftieth of them) is
#: added lazily, only where it can change the answer (:class:`KeywordScores`).
DEFER_POSTINGS = 50_000


class KeywordIndex(Postings):
    """BM25 over the content of events, per namespace, with session neighbours.

    What it holds and how it is kept in step is :class:`~.postings.Postings`'s;
    this class adds what is asked of it: BM25 scores of a query
    (:meth:`score_array`), the speakers a question names, each document's facts
    for the hybrid ranking, and a document's neighbours in its session.
    """

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
                return KeywordScores(self._ids, self._pos, total)
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
                    parts.append(TermPart(idf, p, tf, norms, ratio))
            # rare terms first: they decide the best documents; common ones last
            parts.sort(key=lambda part: part.positions.size)
            if allowed is not None:
                mask = positions_mask(self._pos, allowed, n)
                for part in parts:
                    kept = mask[part.positions]
                    part.positions, part.tfs = part.positions[kept], part.tfs[kept]
            else:
                mask = None
            deferred: list[TermPart] = []
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
            return KeywordScores(
                self._ids, self._pos, total, deferred, scored if deferred else None
            )

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
                question=read(self._question, 0.0),
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
