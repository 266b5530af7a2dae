"""Development corpora of several shapes, built in the repository (no download).

A retrieval ranking fitted on one kind of conversation can fail on another: the
corpora here let ``nbmemory eval corpora`` (and the tests) measure it on
conversations of other shapes than LoCoMo's short turns:

* ``locomo`` — the LoCoMo conversations as they are (read from
  ``$NBMEMORY_LOCOMO_PATH``, never copied into the repository);
* ``locomo-long`` — the same conversations re-shaped into messages of
  1,500-3,500 characters, some with pasted code or logs (:mod:`.long_locomo`);
* ``locomo-plain`` — the same conversations as an agent stores them: each turn's
  text alone, without the ``"Name: "`` prefix (:mod:`.plain_locomo`);
* ``tech-chat`` — a generated user–assistant technical chat over several days,
  long answers with code and logs, facts at the start, middle and end of a
  message, and facts corrected later (:mod:`.tech_chat`).

Every corpus is a list of :class:`~nbmemory.research.datasets.LocomoConversation`
and loads into a store as LoCoMo does (:func:`load_corpus` ->
:class:`~nbmemory.research.datasets.LoadedConversation`), so every evaluation
function takes them unchanged.  :func:`leave_one_out` gives the (fit, held-out)
splits a fit is judged on.  Building is deterministic: the same seed (and the
same LoCoMo files) give the same corpus.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from ...errors import InvalidInput
from ..datasets import LoadedConversation, LocomoConversation, load_conversation, locomo_files
from ..datasets import read_locomo as _read_locomo
from ..evaluation import CATEGORIES as LOCOMO_CATEGORIES
from .long_locomo import reshape_long
from .plain_locomo import strip_speakers
from .tech_chat import CATEGORY_NAMES as TECH_CATEGORIES
from .tech_chat import tech_chat

if TYPE_CHECKING:
    from ..subject import MemoryLike as Memory

T = TypeVar("T")


@dataclass
class Corpus:
    """A named development corpus: its conversations and its question categories."""

    name: str
    description: str
    conversations: list[LocomoConversation]
    category_names: dict[int, str]

    @property
    def messages(self) -> int:
        return sum(len(c.turns) for c in self.conversations)

    @property
    def questions(self) -> int:
        """Answerable questions (category 1-4 with evidence among the messages)."""
        return sum(len(c.answerable()) for c in self.conversations)


def _locomo(path: str | os.PathLike[str] | None, seed: int) -> list[LocomoConversation]:
    return [_read_locomo(f) for f in locomo_files(path)]


def _locomo_long(path: str | os.PathLike[str] | None, seed: int) -> list[LocomoConversation]:
    return [reshape_long(c, seed=seed) for c in _locomo(path, seed)]


def _locomo_plain(path: str | os.PathLike[str] | None, seed: int) -> list[LocomoConversation]:
    return [strip_speakers(c) for c in _locomo(path, seed)]


def _tech_chat(path: str | os.PathLike[str] | None, seed: int) -> list[LocomoConversation]:
    return tech_chat(seed)


#: name -> (builder(locomo path, seed), description, category names, needs LoCoMo data).
CORPORA: dict[
    str,
    tuple[
        Callable[[str | os.PathLike[str] | None, int], list[LocomoConversation]],
        str,
        dict[int, str],
        bool,
    ],
] = {
    "locomo": (_locomo, "LoCoMo conversations, short turns", LOCOMO_CATEGORIES, True),
    "locomo-long": (
        _locomo_long,
        "LoCoMo re-shaped: 1.5-3.5k-character messages, some with code or logs",
        LOCOMO_CATEGORIES,
        True,
    ),
    "locomo-plain": (
        _locomo_plain,
        "LoCoMo turns as an agent stores them: the text alone, no 'Name:' prefix",
        LOCOMO_CATEGORIES,
        True,
    ),
    "tech-chat": (
        _tech_chat,
        "generated user-assistant technical chat: 2-3k-character answers, corrected facts",
        TECH_CATEGORIES,
        False,
    ),
}


def parse_corpora(text: str | Sequence[str] | None) -> list[str]:
    """``"locomo,tech-chat"`` (or a list) -> known corpus names; None -> all of them."""
    if text is None:
        return list(CORPORA)
    names = [n.strip() for n in text.split(",")] if isinstance(text, str) else list(text)
    names = [n for n in dict.fromkeys(names) if n]
    unknown = [n for n in names if n not in CORPORA]
    if unknown or not names:
        raise InvalidInput(
            f"unknown corpus {', '.join(unknown) or repr(text)}; corpora: {', '.join(CORPORA)}"
        )
    return names


def build_corpus(
    name: str, *, locomo_path: str | os.PathLike[str] | None = None, seed: int = 0
) -> Corpus:
    """The corpus ``name`` (one of :data:`CORPORA`); LoCoMo-based ones read
    ``locomo_path`` (else ``$NBMEMORY_LOCOMO_PATH``)."""
    (chosen,) = parse_corpora([name])
    builder, description, categories, _ = CORPORA[chosen]
    return Corpus(chosen, description, builder(locomo_path, seed), dict(categories))


def needs_locomo(name: str) -> bool:
    """Whether corpus ``name`` is built from the LoCoMo files."""
    return CORPORA[parse_corpora([name])[0]][3]


def load_corpus(corpus: Corpus, memory: Memory, *, flush: bool = True) -> list[LoadedConversation]:
    """Store every conversation of ``corpus``, each in namespace
    ``<corpus>/<conversation id>`` (event ids ``<corpus>:<conversation id>:<id>``)."""
    loaded = [
        load_conversation(c, memory, source=corpus.name, flush=False) for c in corpus.conversations
    ]
    if flush:
        memory.flush()
    return loaded


def leave_one_out(items: Sequence[T]) -> Iterator[tuple[list[T], T]]:
    """``(all but one, the one)`` for each item in turn: fit on the first, judge on
    the second (:func:`nbmemory.research.fitting.fit` does it for weights)."""
    if len(items) < 2:
        raise InvalidInput("leave-one-out needs at least two conversations")
    for index, held_out in enumerate(items):
        yield [item for i, item in enumerate(items) if i != index], held_out


__all__ = [
    "CORPORA",
    "Corpus",
    "build_corpus",
    "leave_one_out",
    "load_corpus",
    "needs_locomo",
    "parse_corpora",
]
