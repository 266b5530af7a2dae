"""A later memory that changes what an earlier hit says is shown above it.

Agents' memories hold facts that were corrected later: "Heads up: the API moved to
port 8443", "we switched from Postgres 15 to 16", "the port is now 8443". Search
ranks each memory by how well it matches the question, and the statement that was
replaced often matches better than its correction: it is the long message written
when the thing was set up, full of the question's words, while the correction is
one line.  Asked "which port does the API listen on?", an agent's store ranked the
8080 set-up first and the move to 8443 third, so a prompt cut short kept the stale
port and lost the new one.

This step does not weigh anything and is not fitted: among the hits already found,
a memory that *states a change* (:data:`nbmemory.importance.SIGNALS`' "correction"
kind: "moved to", "is now", "no longer", "from 15 to 16", "instead of", "actually,
…") of something the question asks about (a term of the question in the sentence
that states the change) goes just above the highest-ranked *older* hit that speaks
of that thing too.  Both stay in the results, in time order for that thing, the
correction first: the history is kept, the current value leads.  Nothing is
promoted from outside the hits, so what search finds is unchanged; only its order.
A hit moved this way names the signal ``correction``.

The step looks at the best :data:`POOL` hits (more when more are asked for), then
keeps the number asked for: an agent's ``search(q, limit=1)`` got the stale port
while ``limit=5`` put the move first, since the move was ranked third.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from ..importance import SENTENCES as _SENTENCES
from ..importance import SIGNALS
from .hybrid import HybridHit
from .keywords.features import SPEAKER_RE as _SPEAKER
from .keywords.tokens import tokenize, word_terms

T = TypeVar("T")

#: The "correction" kind of the importance estimate: one definition of a change.
CHANGE = next(pattern for kind, _, pattern in SIGNALS if kind == "correction")
#: Words of a question that say how it asks, not what about (stemmed like the index).
_ASKING_WORDS = (
    "what which who whom whose when where why how do does did doing done have has had "
    "can could would should will shall may might must now currently current today "
    "still yet anymore again ever also just this that these those there here any some "
    "all not no yes about so than then get got make made use used using go going know "
    "tell say want need like thing things one new old before after first last earlier "
    "later previous change changed move moved switch switched replace replaced update "
    "updated rename renamed bump bumped"
)
_ASKING = frozenset(word_terms(_ASKING_WORDS.split()))
#: A question about what was true before a change ("which port did it use before
#: the move?", "at first", "originally"): the older statement is its answer.
_EARLIER = re.compile(
    r"\b(?:before|at first|originally|original|initially|initial|used to|previously|previous|"
    r"earlier|formerly|old|first|start(?:ed|ing)? (?:with|out)|began with|begin with)\b",
    re.IGNORECASE,
)
#: Longest text read for change sentences (a pasted log's tail is not a correction).
MAX_CHARS = 8000


#: A value a fact can have: a number, a version, a path or name with dots, slashes,
#: colons or underscores, a CamelCase or capitalised name (read in a sentence's rest).
_VALUE = re.compile(r"\b(?:\w*\d[\w.:/-]*|\w+(?:[._/:-]\w+)+|[A-Z][a-z]+[A-Z]\w*|[A-Z]\w+)")
#: Longest sentence read as a correction: one that states a change says it briefly.
MAX_WORDS = 30
#: A message this short is one statement: the values of all of it belong to its change
#: ("the API moved to port 8443. 8080 is closed on the firewall.").
SHORT_WORDS = 60


def change_sentences(text: str) -> list[tuple[set[str], set[str]]]:
    """(terms, values) of each short sentence of ``text`` that states a change
    (speaker prefixes left out): what it is about, and the values it names (in a
    short message, the values of the whole message)."""
    parts = [_SPEAKER.sub("", p) for p in _SENTENCES.split(text[:MAX_CHARS])]
    found = []
    whole: set[str] = set()
    if len(text.split()) <= SHORT_WORDS:
        whole = {v for p in parts for v in _values(p)}
    for sentence in parts:
        if len(sentence.split()) <= MAX_WORDS and CHANGE.search(sentence.lower()):
            found.append((set(tokenize(sentence)), _values(sentence) | whole))
    return found


def _values(sentence: str) -> set[str]:
    """The values a sentence names, lower-cased (a capitalised first word is not one:
    every sentence has it)."""
    return {
        m.group(0).lower().rstrip(".:/-")  # "8443." ends a sentence, not the value
        for m in _VALUE.finditer(sentence.strip())
        if m.start() > 0 or not m.group(0).isalpha()
    }


def corrections_first(
    hits: Sequence[T],
    query: str,
    text: Callable[[T], str | None],
    created: Callable[[T], dt.datetime | None],
    mark: Callable[[T], None] = lambda hit: None,
) -> list[T]:
    """``hits`` (best first) with each change of something the query asks about moved
    just above the best older hit that speaks of it (``mark`` is called on each moved
    hit).  Corrections are placed oldest first, so the newest of a chain ends on top."""
    order = list(hits)
    asked = set(tokenize(query)) - _ASKING
    if len(order) < 2 or not asked or _EARLIER.search(query):
        return order
    keys: dict[int, list[tuple[set[str], set[str]]]] = {}
    for hit in order:
        said = [
            (t & asked, {v for v in values if word_terms([v]) and word_terms([v])[0] not in asked})
            for t, values in change_sentences(text(hit) or "")
            if t & asked
        ]
        said = [(key, values) for key, values in said if values]
        if said and created(hit) is not None:
            keys[id(hit)] = said
    if not keys:
        return order
    bodies: dict[int, tuple[str, bool]] = {}

    def changes_it(change: T, other: T) -> bool:
        """Whether one sentence of ``other`` (all of a short one: a tool's listing, say)
        names what ``change`` changes and a value its change sentence names: the old
        value beside the thing it was the value of."""
        if id(other) not in bodies:
            body = (text(other) or "")[:MAX_CHARS].lower()
            bodies[id(other)] = body, len(body.split()) <= SHORT_WORDS
        body, short = bodies[id(other)]
        for key, values in keys[id(change)]:
            for value in values:
                for start, end in _places(value, body):  # cheap: most values are not there
                    start, end = (0, len(body)) if short else _sentence_around(body, start, end)
                    if key & set(tokenize(_SPEAKER.sub("", body[start:end]))):
                        return True
        return False

    for change in sorted((h for h in order if id(h) in keys), key=_when(created)):
        when = created(change)
        at = order.index(change)
        for above in range(at):
            then = created(order[above])
            if (
                then is not None
                and when is not None
                and then < when
                and changes_it(change, order[above])
            ):
                order.insert(above, order.pop(at))
                mark(change)
                break
    return order


#: What ends a sentence (as :data:`_SENTENCES` splits them; "127.0.0.1" does not).
_ENDS = (". ", "! ", "? ", ".\t", "\n", ";")


def _sentence_around(body: str, start: int, end: int) -> tuple[int, int]:
    """The bounds of the sentence of ``body`` that holds ``body[start:end]``."""
    before = max(body.rfind(mark, 0, start) + len(mark) for mark in _ENDS)
    after = [i for i in (body.find(mark, end) for mark in _ENDS) if i >= 0]
    return max(before, 0), min(after, default=len(body))


def _places(value: str, body: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each place lower-cased ``body`` holds ``value`` as a whole word."""
    at = body.find(value)
    while at >= 0:
        end = at + len(value)
        if (at == 0 or not body[at - 1].isalnum()) and (
            end == len(body) or not body[end].isalnum()
        ):
            yield at, end
        at = body.find(value, at + 1)


def _when(created: Callable[[T], dt.datetime | None]) -> Callable[[T], dt.datetime]:
    """Sort key: a hit's creation time (those without one are never moved)."""
    return lambda hit: created(hit) or dt.datetime.min


#: How many of the best hits the step looks at, at least (see the module).
POOL = 10


def pool(limit: int, signal_weights: Mapping[str, float]) -> int:
    """How many hits to rank for ``limit`` of them after this step: at least
    :data:`POOL` (``limit`` when the step is off, or nothing is asked for)."""
    if not limit or signal_weights.get("corrections", 1.0) == 0:
        return limit
    return max(limit, POOL)


def hits_corrections_first(
    hits: list[HybridHit],
    query: str,
    rows: Mapping[str, Mapping[str, Any]],
    signal_weights: Mapping[str, float],
) -> list[HybridHit]:
    """Search's hits with :func:`corrections_first` applied, ``rows`` their stored rows
    by id (``content``, ``created_at``); a moved hit names ``correction``.  Unchanged
    when ``signal_weights`` turns the step off (``{"corrections": 0}``)."""
    if len(hits) < 2 or signal_weights.get("corrections", 1.0) == 0:
        return hits
    return corrections_first(
        hits,
        query,
        text=lambda hit: rows.get(hit.id, {}).get("content"),
        created=lambda hit: rows.get(hit.id, {}).get("created_at"),
        mark=lambda hit: hit.signals.append("correction"),
    )
