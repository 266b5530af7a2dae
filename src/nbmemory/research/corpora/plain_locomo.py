"""LoCoMo as an agent stores it: each turn's text alone (development corpus ``locomo-plain``).

``read_locomo`` writes every turn as ``"Name: text"``: the questions name the
speakers, and the name in the text helps cosine and BM25 find them.  An agent's
memory is written otherwise: a role and what was said, with no name in the text.
:func:`strip_speakers` keeps LoCoMo's turns, sessions, dates, roles and questions
and drops only the ``"Name: "`` prefix, so a ranking that leans on names being in
the text (the *speaker* signal reads them there; *mentions* reads a name the
question asks about as a name the memory should hold) shows it here.

In a chat between two people, the name a question asks about ("What did
Caroline paint?") is mostly written by the *other* person, addressing her:
without the prefix, the turns that hold the name are rarely the answer.
"""

from __future__ import annotations

from ..datasets import LocomoConversation


def strip_speakers(conversation: LocomoConversation) -> LocomoConversation:
    """``conversation`` with each turn's content its text alone (id ``<id>-plain``).

    Speakers stay in the ``speaker`` column (stored as the role and in metadata, as
    :func:`~nbmemory.research.datasets.load_conversation` does); questions, their
    evidence and categories are unchanged.
    """
    turns = conversation.turns.copy()
    turns["content"] = turns["text"]
    return LocomoConversation(
        f"{conversation.conversation_id}-plain",
        conversation.speakers,
        turns,
        conversation.questions.copy(),
    )
