"""Long texts cut into overlapping passages the embedding model can see whole.

A model reads a fixed window of word-pieces (256 for all-MiniLM-L6-v2) and cuts
what lies beyond; a fact in the tail of a 3k-character tool output would never
reach its vector.  :func:`split_passages` cuts such a text into passages of
about ``window - 56`` word-pieces, each overlapping the previous by ~30, ending at
a line break (never inside a code line) or a sentence end when one is near.  A
text that fits the window is one passage, ``(0, len(text))``: short memories cost
nothing more.  Spans are character offsets into the text, so a search can say
which part of a memory matched.

Prose and the code, logs or JSON pasted between it are cut apart first
(:func:`segments`): a sentence stated after a code block gets a passage of its
own instead of being one line in a passage of code, where its meaning is
diluted.  A text all of one kind is cut as one run.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..store.vectors import passage_key

if TYPE_CHECKING:
    from .vector_budget import Searcher

#: ``spans_of(text)``: the character span of each token (word-piece) of the text.
SpansOf = Callable[[str], Sequence[tuple[int, int]]]

#: Word-pieces kept free below the window (special tokens, and slack for a count
#: that differs slightly from the model's own).
WINDOW_MARGIN = 56
#: Word-pieces each passage repeats of the one before.
OVERLAP = 30
#: When tokens are counted by :func:`word_spans` (no tokenizer at hand), passages
#: hold this fraction of the window: a word is one word-piece or more.
WORD_SCALE = 0.75

#: A run (prose, or code and data) of fewer tokens joins the next one.
MIN_RUN = 8

_WORD = re.compile(r"\w+|[^\w\s]")
_FENCE = re.compile(r"\s{0,3}(```|~~~)")
_PROSE_MARKS = frozenset(".,;:!?'\"()-`")
_SENTENCE_END = frozenset(".!?;")
#: A line laid out as code: indented, or a diff's added, removed or hunk line.
_CODE_LINE = re.compile(r"[ \t]|[-+](?! \S)|@@ ")
#: An item of a Markdown list, however deeply nested: ``- ``, ``* ``, ``+ ``, ``1. ``, ``2) ``.
_LIST_ITEM = re.compile(r"\s*(?:[-*+]|\d{1,3}[.)]) \S")
#: The first line of a terminal session: a shell's ``$`` or ``user@host:~$`` prompt,
#: Python's ``>>>``, IPython's ``In [1]:``, PowerShell's ``PS C:\>``.
_PROMPT = re.compile(r"\s*(?:\$|>>>|In \[\d+\]:|PS [A-Z]:\\[^>\n]*>|[\w.-]+@[\w.-]+:\S*[$#]) +\S")
#: The first line of a SQL statement: its keywords in upper case, as SQL is written
#: (the words below are upper-cased when compiled: this module recognises pasted SQL
#: and writes none, which only the store layer does, ``tests/test_architecture.py``),
#: or the lower-case forms a sentence does not start with (``select *``,
#: ``insert into t (``).
_SQL_STATEMENT = (
    r"select\s+\S|with\s+\w+\s+as\s*\(|insert\s+into\s|update\s+\S+\s+set\s|delete\s+from\s"
    r"|(?:create|drop)\s+(?:or\s+replace\s+)?(?:temp(?:orary)?\s+)?(?:unique\s+)?"
    r"(?:table|view|index|schema|sequence|macro)\s|alter\s+table\s"
)
_SQL = re.compile(
    r"\s*(?:" + re.sub(r"[a-z]{2,}", lambda word: word.group().upper(), _SQL_STATEMENT) + ")"
    r"|(?i:\s*(?:select\s+(?:\*|distinct\s|count\()|(?:insert\s+into|delete\s+from|create\s+table"
    r"|alter\s+table|drop\s+table)\s+[\w.\"]+\s*(?:\(|where\b|values\b|add\b|;|$)))"
)
#: A number as prose writes it: digits, with separators inside (8443, 04:00, 2026-03-04).
_NUMBER = re.compile(r"\d+(?:[.:,/-]\d+)*")


def word_spans(text: str) -> list[tuple[int, int]]:
    """Spans of words and punctuation marks (a stand-in for a tokenizer's word-pieces)."""
    return [match.span() for match in _WORD.finditer(text)]


def passage_size(window: int) -> tuple[int, int]:
    """(word-pieces per passage, overlap) for a model window of ``window``."""
    size = max(window - WINDOW_MARGIN, window // 2, 1)
    return size, min(OVERLAP, size // 4)


def split_passages(text: str, spans_of: SpansOf, window: int) -> list[tuple[int, int]]:
    """Character spans ``(start, stop)`` of the passages of ``text``, in order.

    A text of at most ``window`` tokens is one span ``(0, len(text))``.  Longer, it is
    cut into runs of prose and runs of code, logs or data (:func:`segments`), and each
    run into passages of at most ``window - 56`` tokens (see :func:`passage_size`),
    overlapping by ~30 tokens within the run; a passage ends after a line break, else
    after a sentence end, found in its second half, else at its size (a line with no
    break, like 4k characters of JSON, is still cut, never unbounded).  The passages
    cover the whole text: the first starts at 0 and the last stops at ``len(text)``.
    """
    spans = list(spans_of(text))
    n = len(spans)
    if n <= window:
        return [(0, len(text))]
    size, overlap = passage_size(window)
    starts = [span[0] for span in spans]
    result: list[tuple[int, int]] = []
    for start, stop in _runs(segments(text), starts):
        low, high = bisect_left(starts, start), bisect_left(starts, stop)
        result += _windows(text, spans, low, high, (start, stop), size, overlap)
    return result


def _runs(parts: list[tuple[int, int]], starts: list[int]) -> list[tuple[int, int]]:
    """``parts`` with each one of fewer than :data:`MIN_RUN` tokens joined to the next
    (the last to the one before): a caption line stays with what it introduces."""
    runs: list[tuple[int, int]] = []
    pending: int | None = None
    for start, stop in parts:
        start = pending if pending is not None else start
        if bisect_left(starts, stop) - bisect_left(starts, start) < MIN_RUN:
            pending = start
            continue
        pending = None
        runs.append((start, stop))
    if pending is not None:
        if runs:
            runs[-1] = (runs[-1][0], parts[-1][1])
        else:
            runs.append((pending, parts[-1][1]))
    return runs


def _windows(
    text: str,
    spans: Sequence[tuple[int, int]],
    low: int,
    high: int,
    bounds: tuple[int, int],
    size: int,
    overlap: int,
) -> list[tuple[int, int]]:
    """The passages of the run of tokens ``[low, high)``, spanning ``bounds`` whole."""
    result: list[tuple[int, int]] = []
    first = low
    while True:
        end = min(first + size, high)
        start = bounds[0] if first == low else spans[first][0]
        if end >= high:
            result.append((start, bounds[1]))
            return result
        cut = _cut(text, spans, first + max(1, size // 2), end)
        result.append((start, spans[cut - 1][1]))
        first = _line_start(text, spans, max(cut - overlap, first + 1), cut)


def segments(text: str) -> list[tuple[int, int]]:
    """Character spans tiling ``text``: maximal runs of prose paragraphs and of the
    rest (fenced blocks, logs, JSON, code, tracebacks, terminal sessions and SQL),
    split at blank lines and fences.

    A paragraph is prose when it reads as sentences (:func:`looks_prose`); whatever
    sits between fences is not prose."""
    return [(start, stop) for start, stop, _ in _kinds(text)]


def prose_spans(text: str) -> list[tuple[int, int]]:
    """The spans of :func:`segments` that are prose (what a summary may quote: not a
    traceback, a log, a fenced YAML file)."""
    return [(start, stop) for start, stop, prose in _kinds(text) if prose]


def _kinds(text: str) -> list[tuple[int, int, bool]]:
    """(start, stop, is prose) of the maximal runs of :func:`segments`."""
    result: list[tuple[int, bool]] = []
    for start, prose in _blocks(text):
        if not result or prose != result[-1][1]:
            result.append((start, prose))
    return [
        (start, result[i + 1][0] if i + 1 < len(result) else len(text), prose)
        for i, (start, prose) in enumerate(result)
    ]


def _blocks(text: str) -> list[tuple[int, bool]]:
    """(start, is prose) of each paragraph or fenced block of ``text``, in order."""
    blocks: list[tuple[int, bool]] = []
    fenced = False
    start: int | None = None
    offset = 0
    lines = text.splitlines(keepends=True)

    def close(at: int) -> None:
        nonlocal start
        if start is not None:
            blocks.append((start, not fenced and looks_prose(text[start:at])))
            start = None

    for line in lines:
        if _FENCE.match(line):
            if not fenced:
                close(offset)
                start, fenced = offset, True
            else:
                fenced = False
                blocks.append((start if start is not None else offset, False))
                start = None
        elif not fenced:
            if line.strip():
                if start is None:
                    start = offset
            else:
                close(offset)
        offset += len(line)
    if fenced and start is not None:
        blocks.append((start, False))
    else:
        close(len(text))
    if not blocks:
        return [(0, True)]
    blocks[0] = (0, blocks[0][1])  # leading blank lines belong to the first block
    return blocks


def looks_prose(paragraph: str) -> bool:
    """Whether a paragraph reads as sentences: at least 85% letters, digits, spaces and
    basic punctuation, few numbers, and not laid out line by line as code.

    Few numbers: at most 5% digits, or at most one number (``8443``, ``04:00``,
    ``2026-03-04``) in four words, so a short fact such as "the port is now 8443" is
    prose, and a log line is not.  JSON fails the first test.  Code, a Python
    traceback, a Java, JavaScript or Rust stack trace or a diff pasted without a
    fence is mostly words, but at least half of its lines are code lines
    (:data:`_CODE_LINE`: indented, or a diff's ``+``/``-``/``@@`` lines), which
    wrapped sentences are not; a nested list item (``  - detail``) is not a code
    line, so a Markdown answer's nested bullets stay prose.  A terminal session or a
    SQL query is mostly words and not indented either: a paragraph that opens with a
    prompt (:data:`_PROMPT`) or a statement (:data:`_SQL`) is not prose.
    """
    size = len(paragraph) or 1
    digits = sum(c.isdigit() for c in paragraph)
    words = sum(c.isalpha() or c.isspace() or c in _PROSE_MARKS for c in paragraph)
    if words + digits < 0.85 * size:
        return False
    if digits > 0.05 * size and 4 * len(_NUMBER.findall(paragraph)) > len(paragraph.split()):
        return False
    lines = [line for line in paragraph.splitlines() if line.strip()]
    if lines and (_PROMPT.match(lines[0]) or _SQL.match(lines[0])):
        return False
    code = sum(bool(_CODE_LINE.match(line)) and not _LIST_ITEM.match(line) for line in lines)
    return len(lines) < 2 or 2 * code < len(lines)


def _gap(text: str, spans: Sequence[tuple[int, int]], i: int) -> str:
    """The characters between token ``i - 1`` and token ``i``."""
    return text[spans[i - 1][1] : spans[i][0]]


def _cut(text: str, spans: Sequence[tuple[int, int]], low: int, end: int) -> int:
    """The token index to end a passage before (exclusive), in ``(low, end]``: the last
    line break there, else the last sentence end, else ``end``."""
    for i in range(end, low, -1):
        if "\n" in _gap(text, spans, i):
            return i
    for i in range(end, low, -1):
        if text[spans[i - 1][0] : spans[i - 1][1]] in _SENTENCE_END and _gap(text, spans, i):
            return i
    return end


def _line_start(text: str, spans: Sequence[tuple[int, int]], low: int, cut: int) -> int:
    """Where the next passage starts: the first token in ``[low, cut)`` that begins a
    line (so the overlap holds whole lines), else ``low``."""
    for i in range(low, cut):
        if i > 0 and "\n" in _gap(text, spans, i):
            return i
    return low


class Splitter:
    """``text -> passage spans`` for one embedder: its window (``max_tokens``) counted
    with its tokenizer (``token_spans``) when it has them; else ``fallback_window``
    (the ``passage_tokens`` setting) counted in words, at :data:`WORD_SCALE` of it.

    The window is read at the first cut, not when the splitter is made: reading a
    model's window loads its tokenizer, which must not happen (or fail) when a store
    opens, only on the embedding worker's thread, where a model that cannot load
    leaves the texts pending.
    """

    def __init__(self, embedder: object, fallback_window: int) -> None:
        self._embedder = embedder
        self._fallback = int(fallback_window)
        self._resolved: tuple[SpansOf, int] | None = None

    def _resolve(self) -> tuple[SpansOf, int]:
        if self._resolved is None:
            window = getattr(self._embedder, "max_tokens", None) or self._fallback
            spans_of: SpansOf | None = getattr(self._embedder, "token_spans", None)
            if spans_of is None:
                spans_of, window = word_spans, max(int(window * WORD_SCALE), 1)
            self._resolved = (spans_of, int(window))
        return self._resolved

    @property
    def spans_of(self) -> SpansOf:
        """How the text's tokens are found (loads the model's tokenizer)."""
        return self._resolve()[0]

    @property
    def window(self) -> int:
        """Tokens the model sees; a text of at most this many characters always fits
        (loads the model's tokenizer)."""
        return self._resolve()[1]

    @property
    def known_window(self) -> int:
        """:attr:`window` when it is known without loading a model: read already, or
        declared by the embedder (``known_max_tokens``: from the model's name or its
        folder's small config files); else the ``passage_tokens`` setting."""
        if self._resolved is not None:
            return self._resolved[1]
        if hasattr(self._embedder, "known_max_tokens"):
            return int(self._embedder.known_max_tokens or self._fallback)
        return self.window

    def __call__(self, text: str) -> list[tuple[int, int]]:
        spans_of, window = self._resolve()
        if len(text) <= window:  # a token holds a character at least: it fits
            return [(0, len(text))]
        return split_passages(text, spans_of, window)


def make_splitter(embedder: object, fallback_window: int) -> Splitter:
    """The :class:`Splitter` of ``embedder``."""
    return Splitter(embedder, fallback_window)


def matched_spans(
    index: Searcher,
    spans_of_keys: Callable[[list[str]], dict[str, tuple[int, int]]],
    vector: np.ndarray,
    ids: Sequence[str],
) -> dict[str, tuple[int, int]]:
    """event id -> the characters of its passage closest to ``vector``, for the events
    of ``ids`` the index holds as passages (``spans_of_keys`` reads them from the store)."""
    if not len(ids) or not index.passage_rows:
        return {}
    matched: dict[str, int] = {}
    index.similarities(vector, ids, matched)
    return spans_of_keys([passage_key(event_id, passage) for event_id, passage in matched.items()])


def passage_columns(frame: pd.DataFrame, spans: dict[str, tuple[int, int]]) -> None:
    """Add ``passage_start``/``passage_stop`` to a frame of memories (by ``id``): where in
    ``content`` the passage that matched lies; NA for a memory matched whole."""
    for i, column in enumerate(("passage_start", "passage_stop")):
        frame[column] = pd.array(
            [spans[event_id][i] if event_id in spans else None for event_id in frame["id"]],
            dtype="Int64",
        )
