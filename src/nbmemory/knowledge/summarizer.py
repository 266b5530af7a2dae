"""Summarizers: what turns a chunk of old conversation into a summary and facts.

A summarizer is any callable taking the chunk's events (a list of dicts) and
returning the summary text, a ``{"summary": ..., "facts": [...]}`` dict or a
:class:`Summary`.  An LLM client wrapped in a function is a summarizer; the
default, :func:`extractive_summary`, works offline.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..importance import estimate_importance
from ..retrieval.passages import looks_prose, prose_spans
from .fact_book import check_fact

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[^\W\d_]{3,}", re.UNICODE)
#: A line that is code or data even where a paragraph reads as prose: a YAML, INI
#: or dict entry (``- id: ruff-format``, ``rev: v0.6.9``), a traceback's frame or
#: its exception, a stack frame, a log line that opens with a timestamp, a test
#: runner's progress (``tests/test_api.py ....F.. [ 40%]``).
_DATA_LINE = re.compile(
    r"\s*(?:[-*]\s+)?[\w.\-/\"'\[\]]+\s*[:=]\s*\S*\s*$"
    r"|\s*(?:File \"|Traceback \(most recent|at [\w.$<>]+\()"
    r"|\s*[\w.]*(?:Error|Exception|Warning)\b:"
    r"|\s*\[?\d{4}-\d{2}-\d{2}[T ]\d"
    r"|\s*\|"
    r"|\S+\s+[.FEsxX]{4,}(?:\s+\[\s*\d+%\])?\s*$"
)
#: A line that starts a list item, a quote or a table row: never joined to the line
#: before it.
_ITEM = re.compile(r"\s*(?:[-*+>|]|\d{1,3}[.)])\s")
#: Fewer words of letters than this and a line is a label, not a sentence.
MIN_WORDS = 3
_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "are",
        "but",
        "not",
        "you",
        "your",
        "with",
        "this",
        "that",
        "have",
        "has",
        "had",
        "was",
        "were",
        "will",
        "would",
        "can",
        "could",
        "should",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "how",
        "all",
        "any",
        "our",
        "out",
        "his",
        "her",
        "its",
        "they",
        "them",
        "their",
        "there",
        "then",
        "than",
        "from",
        "into",
        "about",
        "just",
        "like",
        "also",
        "very",
        "been",
        "being",
        "some",
    ]
)
_ROLE_WEIGHT = {"user": 1.0, "assistant": 0.8, "tool": 0.5, "system": 0.3}
_END = r"(?=[.,;!?]|\s+(?:and|but|because|so)\b|$)"
_FACT_PATTERNS = [
    (re.compile(r"\b(?i:my name is) ([A-Z][\w'-]*(?: [A-Z][\w'-]*)?)"), "user", "name"),
    (re.compile(r"\bI(?: am|'m) called ([A-Z][\w'-]*)"), "user", "name"),
    (
        re.compile(rf"\bI (?:live|am based|'m based) in ([A-Z][\w .'-]{{1,60}}?){_END}"),
        "user",
        "location",
    ),
    (re.compile(rf"\bI work (?:at|for) ([A-Z][\w&.' -]{{1,60}}?){_END}"), "user", "employer"),
]
_LIKES = re.compile(
    rf"\bI (?:really |also )?(love|like|prefer|enjoy|hate|dislike) ([\w#+.' -]{{2,60}}?){_END}",
    re.IGNORECASE,
)
_FAVOURITE = re.compile(rf"\bmy favou?rite ([\w ]{{2,30}}?) is ([\w#+.' -]{{1,60}}?){_END}", re.I)


@dataclass
class Summary:
    """What a summarizer returns: the summary text and facts ``(category, key, value)``."""

    text: str
    facts: list[tuple[str, str, str]] = field(default_factory=list)


Summarizer = Callable[[list[dict[str, Any]]], Any]


def extractive_summary(events: list[dict[str, Any]], *, max_sentences: int = 5) -> Summary:
    """The offline default summarizer: the chunk's most central sentences, plus facts.

    Only prose is quoted (:func:`prose_sentences`): a traceback, a log or a YAML file
    pasted into a turn holds the chunk's most repeated words (paths, keys) and
    would win, but says nothing a reader of the summary can use; a chunk of code
    alone is summarised from its lines.  Sentences are scored by how many of the
    chunk's frequent words they carry (normalised by length, weighted by role),
    times one plus twice what the importance estimate gives the sentence alone: a
    correction ("the port is now 8443"), a decision or a stated preference is what
    the summary is kept for, and a session's most repeated words are rarely in it
    (an agent's session summarised to "Run the tests please." and a pytest line,
    without the port change or the preference).  The best ``max_sentences`` are
    kept in conversation order.  Facts come from
    simple first-person patterns in the user's messages ("my name is ...", "I live
    in ...", "I love ...").
    """
    sentences: list[tuple[int, str, str, list[str]]] = []
    for reader in (prose_sentences, _lines):
        for event in events:
            for part in reader(event.get("content") or ""):
                words = [w.lower() for w in _WORD.findall(part) if w.lower() not in _STOP]
                sentences.append((len(sentences), event.get("role") or "user", part, words))
        if sentences:
            break
    if not sentences:
        raise ValueError("nothing to summarise: the events have no text")
    freq = Counter(w for _, _, _, words in sentences for w in set(words))

    def score(item: tuple[int, str, str, list[str]]) -> float:
        _, role, text, words = item
        if not words:
            return 0.0
        central = sum(freq[w] for w in set(words)) / math.sqrt(len(words))
        kept_for = 1.0 + 2.0 * estimate_importance(text, role)
        return _ROLE_WEIGHT.get(role, 0.5) * central * kept_for

    best = sorted(sentences, key=lambda s: (-score(s), s[0]))[:max_sentences]
    first, last = events[0].get("created_at"), events[-1].get("created_at")
    span = ""
    if isinstance(first, dt.datetime) and isinstance(last, dt.datetime):
        span = f" ({first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M})"
    lines = [f"Summary of {len(events)} events{span}:"]
    lines += [f"- {role}: {text}" for _, role, text, _ in sorted(best)]
    return Summary("\n".join(lines), extract_facts(events))


def prose_sentences(text: str) -> list[str]:
    """The sentences of ``text``'s prose: its prose runs (``segments`` of the
    passages, which set fenced blocks, logs and code apart), their wrapped lines
    joined (:func:`_unwrap`), cut at sentence ends and line breaks, less the lines
    that are data (``_DATA_LINE``), read as code (``looks_prose``) or hold fewer than
    ``MIN_WORDS`` words."""
    out = []
    for start, stop in prose_spans(text):
        for part in _SENTENCE.split(_unwrap(text[start:stop])):
            part = part.strip()
            if (
                len(_WORD.findall(part)) >= MIN_WORDS
                and not _DATA_LINE.match(part)
                and looks_prose(part)
            ):
                out.append(part)
    return out


def _unwrap(prose: str) -> str:
    """``prose`` with each hard-wrapped sentence on one line: a line is joined to the
    one before unless that one ends a sentence (or a label, ``:``) or is blank, or
    this one starts a list item, a quote or a table row (or follows one unindented)."""
    lines: list[str] = []
    for line in prose.splitlines():
        before = lines[-1].rstrip() if lines else ""
        if (
            before
            and line.strip()
            and not before.endswith((".", "!", "?", ":"))
            and not _ITEM.match(line)
            and not (_ITEM.match(before) and not line[:1].isspace())
        ):
            lines[-1] = f"{before} {line.strip()}"
        else:
            lines.append(line)
    return "\n".join(lines)


def _lines(text: str) -> list[str]:
    """Every non-empty line or sentence of ``text`` (a chunk with no prose at all)."""
    return [part.strip() for part in _SENTENCE.split(text) if part.strip()]


def extract_facts(events: Iterable[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """First-person facts stated in user messages, last statement wins."""
    found: dict[tuple[str, str], str] = {}
    for event in events:
        if event.get("role") != "user" or not event.get("content"):
            continue
        text = event["content"]
        for pattern, category, key in _FACT_PATTERNS:
            for match in pattern.finditer(text):
                found[(category, key)] = match.group(1).strip()
        for match in _LIKES.finditer(text):
            verb, thing = match.group(1).lower(), match.group(2).strip()
            found[("preference", thing.lower()[:60])] = f"{verb}s {thing}"
        for match in _FAVOURITE.finditer(text):
            found[("preference", f"favourite {match.group(1).strip().lower()}")] = match.group(
                2
            ).strip()
    return [(category, key, value) for (category, key), value in found.items()]


def to_summary(result: Any) -> Summary:
    """A summarizer's return value as a validated :class:`Summary` (or a ValueError)."""
    if isinstance(result, Summary):
        summary = result
    elif isinstance(result, str):
        summary = Summary(result)
    elif isinstance(result, Mapping):
        text = result.get("summary", result.get("text"))
        summary = Summary(text, _fact_list(result.get("facts")))
    else:
        raise ValueError(
            f"the summarizer returned {type(result).__name__}; return the summary text, "
            "a dict {'summary': ..., 'facts': [...]} or a Summary"
        )
    if not isinstance(summary.text, str) or not summary.text.strip():
        raise ValueError("the summarizer returned an empty summary")
    summary.facts = [check_fact(c, k, v, "consolidation")[:3] for c, k, v in summary.facts]
    return summary


def _fact_list(raw: Any) -> list[tuple[str, str, str]]:
    if raw is None:
        return []
    if isinstance(raw, Mapping):  # {category: {key: value}}
        return [(c, k, v) for c, inner in raw.items() for k, v in dict(inner).items()]
    out: list[tuple[Any, Any, Any]] = []
    for item in raw:
        if isinstance(item, Mapping):
            out.append((item.get("category"), item.get("key"), item.get("value")))
        else:
            category, key, value = item
            out.append((category, key, value))
    return out  # checked by check_fact in to_summary
