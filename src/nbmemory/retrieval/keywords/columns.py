"""The words of a whole column of texts, read in bulk for a keyword index's build.

A fresh build reads every text of the store (200k texts at a reader's first
hybrid search).  Splitting them one by one in Python and looking each word up
took most of that build, so the texts that are ASCII (nearly all an agent
writes) are lower-cased and split by Arrow's compute functions, a slice of the
column at a time, and each *distinct* word of a slice is looked up once.  For
ASCII, ``[^a-z0-9_]+`` splits a lower-cased text exactly where
:data:`~.tokens.WORD_RE` (``\\w+``) finds its words; other texts are read one by
one as before, so every text gives the words it gave before.

Whether an ASCII text places itself in time is the same two regular expressions
run by RE2 over the column.  A speaker and a question need the Python string; a
cheap test on the column says which texts could hold them, and only those are
read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .features import TIME_PATTERNS, mentions_time_in
from .tokens import WORD_RE

#: Characters of text split at once: bounds the words held in memory while splitting.
SLICE_CHARS = 8 << 20
#: What separates two words of a lower-cased ASCII text (the complement of ``\w``).
_ASCII_SPLIT = r"[^a-z0-9_]+"


@dataclass
class ColumnWords:
    """Every word of a column, as the term id of each word and the text it is in
    (texts in no particular order), with the texts whose facts need reading."""

    term_ids: np.ndarray  # int32, -1 for a word without a term (a stop word)
    doc_of: np.ndarray  # int64, the position of each word's text
    timed: np.ndarray  # int64, positions of texts that place themselves in time
    maybe_spoken: np.ndarray  # int64, positions of texts that may start "Name: "
    maybe_asked: np.ndarray  # int64, positions of texts that hold a "?"


def as_text_array(contents: Sequence[str | None] | pa.Array | pa.ChunkedArray) -> pa.Array:
    """``contents`` as one Arrow string array (nulls kept)."""
    if isinstance(contents, pa.ChunkedArray):
        contents = contents.combine_chunks()
    if not isinstance(contents, pa.Array):
        contents = pa.array(contents, type=pa.large_string())
    return contents


def _slices(texts: pa.Array) -> Iterator[tuple[int, int]]:
    """[lo, hi) ranges of ``texts`` holding about :data:`SLICE_CHARS` characters each."""
    lengths = pc.fill_null(pc.utf8_length(texts), 0).to_numpy(zero_copy_only=False)
    ends = np.cumsum(lengths, dtype=np.int64)
    lo, n = 0, len(texts)
    while lo < n:
        base = int(ends[lo - 1]) if lo else 0
        hi = int(np.searchsorted(ends, base + SLICE_CHARS, side="right"))
        hi = min(n, max(hi, lo + 1))
        yield lo, hi
        lo = hi


def column_words(texts: pa.Array, word_id: Callable[[str], int]) -> ColumnWords:
    """The words of every text of ``texts``, each mapped by ``word_id`` (called once
    per distinct word of a slice; a text's words as ``WORD_RE.findall(text.lower())``)."""
    texts = pc.fill_null(texts, "")
    ascii_ = pc.string_is_ascii(texts).to_numpy(zero_copy_only=False)
    term_parts: list[np.ndarray] = []
    doc_parts: list[np.ndarray] = []
    timed_parts: list[np.ndarray] = []
    for lo, hi in _slices(texts):
        part = texts.slice(lo, hi - lo)
        at = np.flatnonzero(ascii_[lo:hi])
        if len(at):
            plain = part.take(at)
            lists = pc.split_pattern_regex(pc.ascii_lower(plain), _ASCII_SPLIT)
            words = pc.list_flatten(lists)
            parents = pc.list_parent_indices(lists).to_numpy()
            kept = pc.not_equal(words, "")
            words, parents = words.filter(kept), parents[kept.to_numpy(zero_copy_only=False)]
            encoded = pc.dictionary_encode(words)
            distinct = encoded.dictionary.to_pylist()
            ids = np.fromiter(map(word_id, distinct), dtype=np.int32, count=len(distinct))
            term_parts.append(ids[encoded.indices.to_numpy()])
            doc_parts.append(lo + at[parents])
            timed_parts.append(lo + at[_timed(plain)])
        for i in np.flatnonzero(~ascii_[lo:hi]).tolist():  # one by one, as before
            text = str(part[i].as_py())
            found = WORD_RE.findall(text.lower())
            term_parts.append(np.fromiter(map(word_id, found), dtype=np.int32, count=len(found)))
            doc_parts.append(np.full(len(found), lo + i, dtype=np.int64))
            if mentions_time_in(text, found):
                timed_parts.append(np.array([lo + i], dtype=np.int64))
    # a speaker's name is a capital and word characters up to the colon, on one line
    spoken = pc.match_substring_regex(texts, r"[A-Z][^\n]*:").to_numpy(zero_copy_only=False)
    asked = pc.match_substring(texts, "?").to_numpy(zero_copy_only=False)
    empty_i32, empty_i64 = np.zeros(0, np.int32), np.zeros(0, np.int64)
    return ColumnWords(
        term_ids=np.concatenate(term_parts) if term_parts else empty_i32,
        doc_of=np.concatenate(doc_parts).astype(np.int64) if doc_parts else empty_i64,
        timed=np.sort(np.concatenate(timed_parts)) if timed_parts else empty_i64,
        maybe_spoken=np.flatnonzero(spoken),
        maybe_asked=np.flatnonzero(asked),
    )


def _timed(texts: pa.Array) -> np.ndarray:
    """Positions of the ASCII ``texts`` that place themselves in time."""
    found = np.zeros(len(texts), dtype=bool)
    for pattern in TIME_PATTERNS:
        found |= pc.match_substring_regex(texts, pattern).to_numpy(zero_copy_only=False)
    return np.flatnonzero(found)


def texts_at(texts: pa.Array, positions: np.ndarray) -> list[str]:
    """The texts at ``positions`` as Python strings ("" for a null)."""
    if not len(positions):
        return []
    return [text or "" for text in texts.take(pa.array(positions)).to_pylist()]
