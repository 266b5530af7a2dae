"""A generated user–assistant technical chat (development corpus ``tech-chat``).

An agent helps a user with a codebase over several days.  Each *project* is one
conversation: sessions on dates a day or three apart, each a few exchanges of
a short user message (a request, sometimes a correction) and a long assistant
answer of 2,000-3,000 characters made of explanation paragraphs, pasted code,
shell sessions and logs (:mod:`.blocks`), and the project's *facts*: decisions,
preferences, causes found (:data:`.tech_facts.KINDS`).

* Each project (30 exchanges in 10 sessions) states 18 facts, at most one per
  answer, at the **start** (first paragraph), in the **middle** or at the **end**
  (last paragraph) of the answer; each position 6 times, in a shuffled order.
* 6 of those facts (stated in the first 6 answers) are **corrected** later ("it moves from 8080 to port 8443"),
  half in an answer, half in a user message.
* Questions ask for each fact in other words than its statement (category 1, 2
  or 3: where in the message the answer sits), for a corrected fact its value now
  (category 4, evidence: the correcting message) and its first value (category 1-3,
  evidence: the original message).  The ``answer`` is the value, ``statement``
  the sentence that states it, ``position`` where it sits (or ``user message``).

With the default three projects: 180 messages and 72 questions (one namespace
per project, as LoCoMo's one per conversation).  The same seed
gives the same corpus; another seed other values, sentences and fillers.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass, field

import pandas as pd

from ..datasets import LocomoConversation
from .blocks import KINDS as BLOCK_KINDS
from .blocks import MODULES, NOUNS, any_block, identifier
from .tech_facts import (
    BLOCK_INTROS,
    CLOSINGS,
    FILLER,
    KINDS,
    OPENINGS,
    USER_ASKS,
    USER_CORRECTION,
    FactKind,
)

#: Projects: conversation id, the service its facts talk about, first day.
PROJECTS = (
    ("ledger", "the ledger API", dt.datetime(2025, 3, 3, 9, 0)),
    ("atlas", "the tile server", dt.datetime(2025, 3, 10, 10, 0)),
    ("beacon", "the notification worker", dt.datetime(2025, 4, 1, 8, 30)),
    ("quarry", "the ingest pipeline", dt.datetime(2025, 4, 14, 13, 0)),
    ("harbor", "the admin dashboard", dt.datetime(2025, 5, 5, 9, 30)),
)

#: Question categories of this corpus: where the answer sits, or an updated fact.
CATEGORY_NAMES = {1: "start", 2: "middle", 3: "end", 4: "updated"}
POSITIONS = ("start", "middle", "end")

#: Length bounds of an assistant answer (characters; the tests hold them).
ANSWER_MIN = 2000
ANSWER_MAX = 3000
FACTS_PER_PROJECT = 18
CORRECTED_PER_PROJECT = 6
SESSIONS = 10
EXCHANGES_PER_SESSION = 3


@dataclass
class _Exchange:
    """One user message and its answer, with the facts each carries."""

    session: int
    ask: str
    user_correction: str | None = None
    facts: dict[str, str] = field(default_factory=dict)  # position -> sentence


def tech_chat(seed: int = 0, projects: int = 3) -> list[LocomoConversation]:
    """The generated chats, one :class:`LocomoConversation` per project (see the
    module's docstring) for the first ``projects`` of :data:`PROJECTS` (1-5)."""
    return [_project(seed, *PROJECTS[i]) for i in range(max(1, min(projects, len(PROJECTS))))]


def _project(seed: int, name: str, service: str, first_day: dt.datetime) -> LocomoConversation:
    rng = random.Random(f"{seed}:{name}")
    count = SESSIONS * EXCHANGES_PER_SESSION
    exchanges = [
        _Exchange(i // EXCHANGES_PER_SESSION + 1, _fill(rng, rng.choice(USER_ASKS)))
        for i in range(count)
    ]
    correctable = [k for k in KINDS if k.corrections]
    fixed = [k for k in KINDS if not k.corrections]
    corrected = rng.sample(correctable, CORRECTED_PER_PROJECT)
    others = rng.sample(
        [k for k in correctable if k not in corrected] + fixed,
        FACTS_PER_PROJECT - CORRECTED_PER_PROJECT,
    )
    positions = [POSITIONS[i % 3] for i in range(FACTS_PER_PROJECT)]
    rng.shuffle(positions)
    # the facts that will be corrected are stated in the first exchanges, the others anywhere
    order = corrected + others
    early = CORRECTED_PER_PROJECT
    slots = [
        *rng.sample(range(early), early),
        *rng.sample(range(early, count), FACTS_PER_PROJECT - early),
    ]
    questions: list[dict[str, object]] = []
    originals: list[tuple[FactKind, str, int]] = []
    for kind, slot, position in zip(order, slots, positions, strict=True):
        value = rng.choice(kind.values)
        statement = _fill(rng, rng.choice(kind.statements), v=value, service=service)
        exchanges[slot].facts[position] = statement
        originals.append((kind, value, slot))
        wording = rng.choice(kind.first_questions if kind in corrected else kind.questions)
        questions.append(
            {
                "question": wording.format(service=service),
                "answer": value,
                "evidence": [_answer_id(exchanges, slot)],
                "category": POSITIONS.index(position) + 1,
                "position": position,
                "kind": kind.key,
                "statement": statement,
            }
        )
    for kind, old, slot in originals[:CORRECTED_PER_PROJECT]:
        new = rng.choice([v for v in kind.values if v != old])
        sentence = _fill(rng, rng.choice(kind.corrections), v=new, old=old, service=service)
        later = [i for i in range(slot + 3, count) if exchanges[i].user_correction is None]
        target = rng.choice(later)
        free = [p for p in POSITIONS if p not in exchanges[target].facts]
        if rng.random() < 0.5 or not free:
            exchanges[target].user_correction = rng.choice(USER_CORRECTION).format(c=sentence)
            evidence, position = _user_id(exchanges, target), "user message"
        else:
            position = rng.choice(free)
            exchanges[target].facts[position] = sentence
            evidence = _answer_id(exchanges, target)
        questions.append(
            {
                "question": rng.choice(kind.now_questions).format(service=service),
                "answer": new,
                "evidence": [evidence],
                "category": 4,
                "position": position,
                "kind": kind.key,
                "statement": sentence,
            }
        )
    turns = _turns(rng, name, exchanges, first_day)
    return LocomoConversation(name, ("user", "assistant"), turns, pd.DataFrame(questions))


def _user_id(exchanges: list[_Exchange], index: int) -> str:
    session = exchanges[index].session
    return f"D{session}:{2 * (index % EXCHANGES_PER_SESSION) + 1}"


def _answer_id(exchanges: list[_Exchange], index: int) -> str:
    session = exchanges[index].session
    return f"D{session}:{2 * (index % EXCHANGES_PER_SESSION) + 2}"


def _turns(
    rng: random.Random, name: str, exchanges: list[_Exchange], first_day: dt.datetime
) -> pd.DataFrame:
    rows = []
    day = first_day
    at = day
    for index, exchange in enumerate(exchanges):
        if index % EXCHANGES_PER_SESSION == 0:
            if index:
                day += dt.timedelta(days=rng.randint(1, 3))
            at = day + dt.timedelta(minutes=rng.randint(0, 120))
        user = exchange.ask
        if exchange.user_correction:
            user = f"{exchange.user_correction}\n\n{user}"
        elif rng.random() < 0.25:
            user = f"{user}\n\n{any_block(rng, at)}"
        answer = _answer(rng, exchange.facts, at)
        for dia_id, speaker, text in (
            (_user_id(exchanges, index), "user", user),
            (_answer_id(exchanges, index), "assistant", answer),
        ):
            rows.append(
                {
                    "dia_id": dia_id,
                    "session": exchange.session,
                    "speaker": speaker,
                    "text": text,
                    "content": text,
                    "caption": None,
                    "created_at": at,
                }
            )
            at += dt.timedelta(minutes=rng.randint(2, 25))
    return pd.DataFrame(rows)


def _answer(rng: random.Random, facts: dict[str, str], at: dt.datetime) -> str:
    """An answer of ANSWER_MIN-ANSWER_MAX characters with ``facts`` at their positions."""
    unused = list(FILLER)  # no paragraph twice in one answer
    rng.shuffle(unused)
    head = _fill(rng, unused.pop())
    head = f"{facts['start']} {head}" if "start" in facts else f"{rng.choice(OPENINGS)} {head}"
    tail = _fill(rng, unused.pop())
    tail = f"{tail} {facts['end']}" if "end" in facts else f"{tail} {rng.choice(CLOSINGS)}"
    middle = f"{facts['middle']} {_fill(rng, unused.pop())}" if "middle" in facts else None
    target = rng.randint(ANSWER_MIN + 150, ANSWER_MAX - 150)
    fixed = len(head) + len(tail) + (len(middle) + 2 if middle else 0) + 2
    body: list[str] = []
    for _ in range(40):
        size = fixed + sum(len(p) + 2 for p in body)
        if size >= target:
            break
        if rng.random() < 0.4 or not unused:
            kind = rng.choice(BLOCK_KINDS)
            piece = f"{rng.choice(BLOCK_INTROS[kind])}\n\n{any_block(rng, at, kind)}"
        else:
            piece = _fill(rng, unused.pop())
        if size + len(piece) + 2 <= ANSWER_MAX:
            body.append(piece)
    if middle is not None:
        # where the running length is nearest half of the answer
        total = fixed + sum(len(p) + 2 for p in body)
        running = len(head) + 2
        best, best_gap = 0, abs(running + len(middle) / 2 - total / 2)
        for index, piece in enumerate(body, start=1):
            running += len(piece) + 2
            gap = abs(running + len(middle) / 2 - total / 2)
            if gap < best_gap:
                best, best_gap = index, gap
        body.insert(best, middle)
    return "\n\n".join([head, *body, tail])


def _fill(rng: random.Random, template: str, **given: str) -> str:
    module, module2 = rng.sample(MODULES, 2)
    values = {
        "module": module,
        "module2": module2,
        "ident": identifier(rng),
        "ident2": identifier(rng),
        "noun": rng.choice(NOUNS),
        "n": str(rng.randint(2, 9)),
        "ms": str(rng.randint(8, 90)),
        "ms2": str(rng.randint(100, 900)),
        **given,
    }
    return template.format(**values)
