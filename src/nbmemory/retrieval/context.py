"""The tri-hybrid context (recency + salience + relevance), with provenance.

Each strategy proposes candidates; they are merged by id, and every item keeps
which strategies found it and with what score (recency rank, importance,
similarity).  Items are then ranked by their best position in any strategy
(``1 / (1 + position)``, ties broken relevance > salience > recency), which is
the order in which :meth:`Context.to_prompt` drops them to fit the token budget.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..config import Settings
from ..event_rows import turn_text
from ..validation import check_limit, check_text, check_unit_interval
from .excerpts import cut_to_fit, line_start, start_earlier, whole
from .token_count import count_tokens


def estimate_tokens(text: str) -> int:
    """Rough token count (about four characters a token for English under BPE tokenizers)."""
    return max(1, math.ceil(len(text) / 4))


STRATEGIES = ("relevance", "salience", "recency")
_PRIORITY = {name: i for i, name in enumerate(STRATEGIES)}

FRAME_COLUMNS = [
    "id",
    "role",
    "content",
    "created_at",
    "importance",
    "similarity",
    "relevance_score",
    "signals",
    "recency_rank",
    "strategies",
    "rank",
    "session_id",
    "kind",
    "tool_calls_json",
    "passage_start",
    "passage_stop",
]

#: The columns of a context's display (HTML and text), best-ranked first.
DISPLAY_COLUMNS = [
    "strategies",
    "role",
    "content",
    "similarity",
    "importance",
    "recency_rank",
    "created_at",
]


@dataclass
class ContextItem:
    """One memory in a context, with the evidence of why it is there."""

    id: str
    role: str
    content: str | None
    created_at: dt.datetime
    importance: float
    session_id: str
    kind: str = "message"
    #: The turn's tool calls as stored JSON (a tool-call turn may have no content)
    tool_calls: str | None = None
    similarity: float | None = None
    #: What the relevance strategy ranked by (the fused score in the hybrid profile)
    relevance_score: float | None = None
    #: Signals of the relevance strategy: vector, keyword, neighbour
    signals: str | None = None
    recency_rank: int | None = None
    #: The characters of ``content`` of the passage that matched (a long memory found
    #: by relevance), or None
    passage: tuple[int, int] | None = None
    #: The tool whose result this turn is (a ``tool`` turn), when it was given
    tool_name: str | None = None
    strategies: list[str] = field(default_factory=list)
    positions: dict[str, int] = field(default_factory=dict)
    rank: int = 0

    @property
    def text(self) -> str:
        """What the turn says: its content, then its tool calls (names and arguments,
        as stored: redacted), e.g. ``called get_weather({"city": "Paris"})``."""
        return turn_text(self.content, self.tool_calls)

    @property
    def score(self) -> float:
        """Best reciprocal position over the strategies that found it."""
        return max(1.0 / (1 + p) for p in self.positions.values())

    def sort_key(self) -> tuple:
        best = min(self.positions, key=lambda s: (self.positions[s], _PRIORITY[s]))
        return (-self.score, _PRIORITY[best], -(self.relevance_score or -2.0))


class Prompt(str):
    """The text of a context for an agent's prompt; ``.dropped`` names what did not
    fit, ``.shortened`` what went in as an excerpt, ``.repeated`` what said word for
    word what a better-ranked memory said."""

    dropped: list[str]
    kept: list[str]
    shortened: list[str]
    repeated: list[str]
    tokens: int
    max_tokens: int

    def __new__(
        cls,
        text: str,
        *,
        kept: list[str],
        dropped: list[str],
        tokens: int,
        budget: int,
        shortened: list[str] | None = None,
        repeated: list[str] | None = None,
    ):
        obj = super().__new__(cls, text)
        obj.kept = kept
        obj.dropped = dropped
        obj.shortened = list(shortened or [])
        obj.repeated = list(repeated or [])
        obj.tokens = tokens
        obj.max_tokens = budget
        return obj

    def report(self) -> str:
        """One line on what the budget did to the context."""
        line = f"{len(self.kept)} memories, ~{self.tokens} of {self.max_tokens} tokens"
        if self.shortened:
            line += f"; {len(self.shortened)} shortened to an excerpt: {', '.join(self.shortened)}"
        if self.dropped:
            line += f"; dropped {len(self.dropped)} lowest-ranked: {', '.join(self.dropped)}"
        if self.repeated:
            line += f"; left out {len(self.repeated)} repeating a better-ranked one"
        return line


#: The fewest tokens of a memory worth an excerpt: under this, it is dropped.
MIN_EXCERPT_TOKENS = 24

#: The fewest characters of a text said again that make it a repeat to leave out.
#: A shorter turn ("yes", "OK", "done", "go ahead", "tests pass") is a reply: the
#: same words later answer another question, and a line of them costs a few tokens.
MIN_REPEAT_CHARS = 24


@dataclass
class Context:
    """What :meth:`nbmemory.Memory.get_context` returns."""

    session_id: str
    query: str | None
    namespace: str
    items: list[ContextItem]
    parameters: dict[str, Any]
    max_tokens: int
    token_counter: Callable[[str], int] = estimate_tokens
    near_misses: pd.DataFrame | None = None

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[ContextItem]:
        return iter(self.items)

    @property
    def ids(self) -> list[str]:
        return [item.id for item in self.items]

    def by_strategy(self, strategy: str) -> list[ContextItem]:
        return [item for item in self.items if strategy in item.strategies]

    def to_frame(self) -> pd.DataFrame:
        """One row per item, best-ranked first, with the scores that put it here."""
        rows = [
            {
                "id": item.id,
                "role": item.role,
                "content": item.content,
                "created_at": item.created_at,
                "importance": item.importance,
                "similarity": item.similarity,
                "relevance_score": item.relevance_score,
                "signals": item.signals,
                "recency_rank": item.recency_rank,
                "strategies": ", ".join(item.strategies),
                "rank": item.rank,
                "session_id": item.session_id,
                "kind": item.kind,
                "tool_calls_json": item.tool_calls,
                "passage_start": item.passage[0] if item.passage else None,
                "passage_stop": item.passage[1] if item.passage else None,
            }
            for item in self.items
        ]
        frame = pd.DataFrame(rows, columns=FRAME_COLUMNS)
        frame["similarity"] = frame["similarity"].astype("float64")
        frame["relevance_score"] = frame["relevance_score"].astype("float64")
        for column in ("recency_rank", "passage_start", "passage_stop"):
            frame[column] = frame[column].astype("Int64")
        return frame

    @staticmethod
    def format_item(item: ContextItem) -> str:
        """``[time] role: text``; a tool's result names its tool (``tool run_tests:``),
        and the lines after the first are indented, so a line of the text that starts
        like ``[Unit]`` never reads as the start of another memory; a text that
        starts with a code fence starts on the next line, where the fence is one."""
        return whole(Context._lead(item), item.text)

    @staticmethod
    def _lead(item: ContextItem) -> str:
        when = item.created_at.strftime("%Y-%m-%d %H:%M") if item.created_at else "?"
        return f"[{when}] {Context._who(item)}: "

    @staticmethod
    def _who(item: ContextItem) -> str:
        """The role, and for a tool's result its tool (``tool run_tests``)."""
        return (
            f"{item.role} {item.tool_name}" if item.role == "tool" and item.tool_name else item.role
        )

    @staticmethod
    def _repeat_key(item: ContextItem) -> tuple[str, str] | None:
        """What makes ``item`` a repeat of a better-ranked memory: its line without the
        time (who said it, a tool's result with its tool, and the text with its spaces
        evened out); None when it is never one.

        The rule is for the same text written again (a cell run twice, a retried
        write), whenever that was.  A text under :data:`MIN_REPEAT_CHARS` is a reply
        of the dialogue ("yes" to a second question, a second tool's "OK"), and a turn
        with only tool calls is an action (the tests run again after a fix): leaving
        either out would make the conversation read wrong."""
        words = " ".join(item.text.split())
        if item.content is None or len(words) < MIN_REPEAT_CHARS:
            return None
        return Context._who(item), words

    def to_prompt(self, max_tokens: int | None = None, *, header: str = "Memory:") -> Prompt:
        """The context as prompt text within ``max_tokens``: a whole number, 0 or more;
        None (the default) is the budget the context was built with (``get_context``'s
        ``max_tokens``, else ``Settings.max_memory_tokens``: 4096).  ``header`` is the
        first line ("" for none; left out too when even it does not fit, or when no
        memory is kept: the prompt is then "").

        Items go in best-ranked first; the first one that does not fit whole goes in
        as an excerpt (for a long memory relevance found, the passage that matched the
        query; else its beginning) of what fits, and the items ranked below it go on in
        whole while they fit: the first that does not is dropped with every item below
        it, so the lowest-ranked go first, never a better one for a worse one that is
        shorter (an excerpt that ran on past its passage took the room of the user's
        latest turn).  Room still left then goes to the text after the passage, then
        to the text before it.  An excerpt keeps its code fences balanced (see
        :mod:`nbmemory.retrieval.excerpts`).

        An item whose line says word for word what a better-ranked one's said, but
        for the time (a cell run twice, a retried write), is left out; not a short
        reply ("yes", "OK") nor a turn that only calls tools, which said again are
        the next turn of the dialogue (see :meth:`_repeat_key`).  The kept ones are
        written oldest first so the conversation reads in order.  Each line is
        charged with the line break before it, and the prompt as written is counted
        again at the end (the lowest-ranked go while it is over), so
        ``token_counter(result) <= max_tokens`` for any counter; ``result.tokens`` is
        that count.  ``result.dropped``, ``result.shortened`` and ``result.repeated``
        list the ids, and ``result.report()`` says so in one line.
        """
        budget = self.max_tokens if max_tokens is None else check_limit(max_tokens, "max_tokens")
        header = check_text(header, "header", allow_empty=True)
        used = count_tokens(self.token_counter, header) if header else 0
        if used > budget:
            header, used = "", 0
        kept: list[tuple[ContextItem, str]] = []
        dropped: list[str] = []
        shortened: list[str] = []
        repeated: list[str] = []
        said: set[tuple[str, str]] = set()
        excerpt: tuple[int, int, int] | None = None  # its place in kept, start, stop
        full = False
        for item in self.items:  # already best-first
            words = self._repeat_key(item)
            if words is not None and words in said:
                repeated.append(item.id)
                continue
            if full:
                dropped.append(item.id)
                continue
            line = self.format_item(item)
            cost = self._charge(line)
            if used + cost > budget:
                found = None if excerpt else self._excerpt(item, budget - used)
                if found is None:  # it and every item ranked below it are dropped
                    full = True
                    dropped.append(item.id)
                    continue
                line, start, stop = found
                excerpt = (len(kept), start, stop)
                cost = self._charge(line)
                shortened.append(item.id)
            if words is not None:
                said.add(words)
            kept.append((item, line))
            used += cost
        if excerpt is not None:
            self._extend(kept, excerpt, budget - used)
        text = self._joined(header, kept)
        while kept and count_tokens(self.token_counter, text) > budget:
            # a counter for which lines cost more together than apart: the
            # lowest-ranked goes, until the prompt as written fits
            item, _ = kept.pop()
            dropped.insert(0, item.id)
            if item.id in shortened:
                shortened.remove(item.id)
            text = self._joined(header, kept)
        ordered = sorted(kept, key=lambda pair: (pair[0].created_at, pair[0].id))
        return Prompt(
            text,
            kept=[item.id for item, _ in ordered],
            dropped=dropped,
            tokens=count_tokens(self.token_counter, text) if text else 0,
            budget=budget,
            shortened=shortened,
            repeated=repeated,
        )

    def _charge(self, line: str) -> int:
        """What a line costs in the prompt: its tokens with the line break before it
        (the header's or the previous line's), so that ``token_counter(prompt)``
        stays within the budget for a counter that counts "\n" (``len``)."""
        return count_tokens(self.token_counter, "\n" + line)

    @staticmethod
    def _joined(header: str, kept: list[tuple[ContextItem, str]]) -> str:
        """The prompt: the header, then the kept lines oldest first; "" when no line
        is kept (a header over nothing is noise in an agent's prompt)."""
        if not kept:
            return ""
        ordered = sorted(kept, key=lambda pair: (pair[0].created_at, pair[0].id))
        return "\n".join(([header] if header else []) + [line for _, line in ordered])

    def _extend(
        self, kept: list[tuple[ContextItem, str]], excerpt: tuple[int, int, int], left: int
    ) -> None:
        """The excerpt ``kept[excerpt[0]]`` given the ``left`` tokens once the items
        ranked below it are in: they go to the text after its stop, then, once it
        runs to the end of its text, to what leads up to its start, rather than
        unused."""
        at, start, stop = excerpt
        item, line = kept[at]
        room = left + self._charge(line)

        def fits(line: str) -> bool:
            return self._charge(line) <= room

        lead, text = self._lead(item), item.text
        if left > 0 and stop < len(text):
            longer = cut_to_fit(lead, text, start, fits)
            if longer is not None and longer[1] > stop:
                line, stop = longer
                kept[at] = (item, line)
        if not start or stop < len(text) or self._charge(line) >= room:
            return
        earlier = start_earlier(lead, text, start, stop, fits)
        if earlier is not None:
            kept[at] = (item, earlier[0])

    def _excerpt(self, item: ContextItem, room: int) -> tuple[str, int, int] | None:
        """The item cut to ``room`` tokens, its line and the characters of its text it
        holds (None when the room is under :data:`MIN_EXCERPT_TOKENS`): the passage
        that matched, from the beginning of its line to its end, else the text from
        its beginning, as far as fits (see :mod:`nbmemory.retrieval.excerpts`)."""
        if room < MIN_EXCERPT_TOKENS:
            return None
        text = item.text
        start, limit = 0, None
        if item.passage and item.content:
            start, limit = line_start(text, item.passage[0]), item.passage[1]
        found = cut_to_fit(self._lead(item), text, start, lambda x: self._charge(x) <= room, limit)
        return None if found is None else (found[0], start, found[1])

    def summary(self) -> str:
        counts = {s: len(self.by_strategy(s)) for s in STRATEGIES}
        found = ", ".join(f"{n} {s}" for s, n in counts.items())
        query = f" for {self.query!r}" if self.query else ""
        memories = "1 memory" if len(self) == 1 else f"{len(self)} memories"
        return f"context of session {self.session_id!r}{query}: {memories} ({found})"

    def _display_frame(self) -> pd.DataFrame:
        """The columns a person reads: which strategy found each row, and its scores."""
        frame = self.to_frame()
        frame["content"] = [item.text for item in self.items]
        return frame[DISPLAY_COLUMNS]

    def to_text(self, max_colwidth: int = 60) -> str:
        """The summary line, then a plain-text table (and the near misses, if any).

        What a plain-text frontend shows (terminal IPython, ``print(ctx)``, nbconvert
        to text); notebooks show the same as HTML.  ``content`` is cut to
        ``max_colwidth`` characters, as pandas does.
        """
        lines = [self.summary()]
        frame = self._display_frame()
        if frame.empty:
            lines.append("(no memories)")
        else:
            frame = frame.assign(
                created_at=[_minute(value) for value in frame["created_at"]],
            )
            lines.append(_text_table(frame, max_colwidth))
        if self.near_misses is not None and not self.near_misses.empty:
            lines += ["", "Near misses:", _text_table(self.near_misses, max_colwidth)]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.to_text()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text("Context(...)" if cycle else self.to_text())

    def _repr_html_(self) -> str:
        frame = self._display_frame()
        body = frame.to_html(index=False, na_rep="", float_format=lambda v: f"{v:.3f}")
        extra = ""
        if self.near_misses is not None and not self.near_misses.empty:
            extra = "<p><b>Near misses</b></p>" + self.near_misses.to_html(
                index=False, na_rep="", float_format=lambda v: f"{v:.3f}"
            )
        return f"<p>{html.escape(self.summary())}</p>{body}{extra}"


def merge(
    recency: Sequence[dict[str, Any]],
    salience: Sequence[dict[str, Any]],
    relevance: Sequence[dict[str, Any]],
) -> list[ContextItem]:
    """Deduplicate the three candidate lists by id and rank the union.

    ``recency`` is newest first; ``salience`` by importance; ``relevance`` by
    similarity (each record carries ``similarity``).
    """
    items: dict[str, ContextItem] = {}

    def add(record: dict[str, Any], strategy: str, position: int) -> ContextItem:
        item = items.get(record["id"])
        if item is None:
            item = ContextItem(
                id=record["id"],
                role=record["role"],
                content=_text_or_none(record["content"]),
                created_at=_as_datetime(record["created_at"]),
                importance=float(record["importance"]),
                session_id=record["session_id"],
                kind=record.get("kind", "message"),
                tool_calls=_text_or_none(record.get("tool_calls_json")),
            )
            items[item.id] = item
        if item.tool_name is None:  # relevance's rows do not carry it; the others' do
            item.tool_name = _text_or_none(record.get("tool_name"))
        if strategy not in item.strategies:
            item.strategies.append(strategy)
            item.positions[strategy] = position
        return item

    for position, record in enumerate(relevance):
        item = add(record, "relevance", position)
        item.similarity = _number(record.get("similarity"))
        item.relevance_score = _number(record.get("score", record.get("similarity")))
        item.signals = record.get("signals") or "vector"
        start, stop = record.get("passage_start"), record.get("passage_stop")
        if start is not None and stop is not None and not pd.isna(start):
            item.passage = (int(start), int(stop))
    for position, record in enumerate(salience):
        add(record, "salience", position)
    for position, record in enumerate(recency):
        add(record, "recency", position).recency_rank = position + 1
    _name_tool_results(items.values(), [*relevance, *salience, *recency])
    ranked = sorted(items.values(), key=ContextItem.sort_key)
    for rank, item in enumerate(ranked, start=1):
        item.strategies.sort(key=_PRIORITY.__getitem__)
        item.rank = rank
    return ranked


def _name_tool_results(items: Iterable[ContextItem], records: list[dict[str, Any]]) -> None:
    """Name the tool of a tool result stored without ``tool_name`` after the call it
    answers (its ``tool_call_id``), when that call is in the context: the result
    was written ``tool: …`` while the call beside it said ``called read_file(…)``."""
    names: dict[str, str] = {}
    for record in records:
        try:
            calls = json.loads(record.get("tool_calls_json") or "null")
        except (TypeError, ValueError, RecursionError):
            continue
        for call in calls if isinstance(calls, list) else []:
            spec = call.get("function", call) if isinstance(call, dict) else None
            name = spec.get("name") if isinstance(spec, dict) else None
            if isinstance(name, str) and name and isinstance(call.get("id"), str):
                names[call["id"]] = name
    answering = {r["id"]: r.get("tool_call_id") for r in records if r.get("role") == "tool"}
    for item in items:
        if item.role == "tool" and item.tool_name is None:
            item.tool_name = names.get(answering.get(item.id) or "")


def _text_table(frame: pd.DataFrame, max_colwidth: int) -> str:
    """A frame as aligned plain text: no index, text left-aligned and cut to
    ``max_colwidth`` characters, numbers with 3 decimals, blanks for missing."""
    columns: list[list[str]] = []
    for name, column in frame.items():
        numeric = pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)
        texts = [str(name)] + [_cell(value, max_colwidth) for value in column]
        width = max(len(t) for t in texts)
        columns.append([t.rjust(width) if numeric else t.ljust(width) for t in texts])
    return "\n".join("  ".join(row).rstrip() for row in zip(*columns, strict=True))


def _cell(value: Any, max_colwidth: int) -> str:
    if value is None or value is pd.NA or value is pd.NaT:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.3f}"
    text = " ".join(str(value).split())  # one line per row
    return text if len(text) <= max_colwidth else text[: max_colwidth - 3] + "..."


def _minute(value: Any) -> str:
    """A timestamp to the minute (what a reader needs to order a conversation)."""
    if value is None or value is pd.NaT:
        return ""
    return pd.Timestamp(value).strftime("%Y-%m-%d %H:%M")


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None  # a frame's NaN is no text


def _number(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return None if number != number else number


def _as_datetime(value: Any) -> dt.datetime:
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    return value


def context_parameters(s: Settings, **given: Any) -> dict[str, Any]:
    """The limits and thresholds of one context: those given, else the settings'."""

    def pick(name: str, default: Any) -> Any:
        value = given.get(name)
        return default if value is None else value

    return {
        "recency_limit": check_limit(pick("recency_limit", s.recency_limit), "recency_limit"),
        "salience_threshold": check_unit_interval(
            pick("salience_threshold", s.salience_threshold), "salience_threshold"
        ),
        "salience_limit": check_limit(pick("salience_limit", s.salience_limit), "salience_limit"),
        "relevance_threshold": check_unit_interval(
            pick("relevance_threshold", s.relevance_threshold), "relevance_threshold", low=-1.0
        ),
        "relevance_limit": check_limit(
            pick("relevance_limit", s.relevance_limit), "relevance_limit"
        ),
        "max_tokens": check_limit(pick("max_tokens", s.max_memory_tokens), "max_tokens"),
    }
