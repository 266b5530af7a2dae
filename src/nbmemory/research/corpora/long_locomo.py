"""LoCoMo re-shaped into long messages (development corpus ``locomo-long``).

The LoCoMo turns are short (130-150 characters on average); an agent's memory
often holds long ones.  :func:`reshape_long` keeps LoCoMo's words, sessions,
dates and questions and changes only the shape:

* consecutive turns of one session, **both speakers alternating in their
  order**, become one message of 1,500-3,500 characters, one ``Name: text``
  line per turn (LoCoMo's speakers alternate almost every turn, so runs of one
  speaker would stay short).  A session of L characters is cut into
  ``ceil(L / target)`` messages of about equal length at turn boundaries,
  ``target`` drawn per session from 2,300-3,200;
* about a third of the messages (and every message still under 1,500
  characters, a short session) get a generated code block, shell session or
  log output pasted between two turns (:mod:`.blocks`), as long as the message
  stays within 3,500;
* a question's evidence (dia_ids) becomes the merged messages holding those
  turns (two evidence turns in one message count once); its category is kept.

Messages are ``M<session>:<n>`` with the date-time of their first turn and
its speaker; ``turns`` lists the dia_ids each holds.  The same conversation and
seed give the same corpus.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import zlib

import pandas as pd

from ..datasets import LocomoConversation
from .blocks import any_block

#: Bounds of a merged message's length in characters (the tests hold them).
MIN_CHARS = 1500
MAX_CHARS = 3500
#: Share of messages that get a pasted block although they are long enough.
INSERT_SHARE = 0.3


def reshape_long(
    conversation: LocomoConversation,
    *,
    seed: int = 0,
    min_chars: int = MIN_CHARS,
    max_chars: int = MAX_CHARS,
    insert_share: float = INSERT_SHARE,
) -> LocomoConversation:
    """``conversation`` with each session's turns merged into long messages (see
    the module's docstring); conversation id ``<id>-long``."""
    # one generator per conversation, so a conversation's shape does not depend
    # on which others are reshaped with it
    rng = random.Random(seed * 1_000_003 + zlib.crc32(conversation.conversation_id.encode()))
    rows: list[dict[str, object]] = []
    merged_of: dict[str, str] = {}
    for session, turns in conversation.turns.groupby("session", sort=True):
        lines = [str(c) for c in turns["content"]]
        groups = _split(lines, rng, min_chars, max_chars)
        start = 0
        for number, size in enumerate(groups, start=1):
            part = turns.iloc[start : start + size]
            start += size
            message_id = f"M{session}:{number}"
            body = list(part["content"])
            first_at = part["created_at"].iloc[0]
            body = _with_blocks(body, rng, first_at, min_chars, max_chars, insert_share)
            for dia_id in part["dia_id"]:
                merged_of[dia_id] = message_id
            content = "\n".join(body)
            rows.append(
                {
                    "dia_id": message_id,
                    "session": int(str(session)),
                    "speaker": part["speaker"].iloc[0],
                    "text": content,
                    "content": content,
                    "caption": None,
                    "created_at": first_at,
                    "turns": list(part["dia_id"]),
                }
            )
    questions = conversation.questions.copy()
    questions["evidence"] = questions["evidence"].map(
        lambda ids: list(dict.fromkeys(merged_of[i] for i in ids if i in merged_of))
    )
    return LocomoConversation(
        f"{conversation.conversation_id}-long",
        conversation.speakers,
        pd.DataFrame(rows),
        questions,
    )


def _split(lines: list[str], rng: random.Random, min_chars: int, max_chars: int) -> list[int]:
    """How many consecutive lines go in each message of one session."""
    sizes = [len(line) + 1 for line in lines]
    total = sum(sizes)
    if total <= max_chars:
        return [len(lines)]
    count = math.ceil(total / rng.uniform(2300, 3200))
    count = max(1, min(count, total // (min_chars + 200)))
    groups: list[int] = []
    taken = 0
    used = 0
    for index in range(1, count):
        goal = total * index / count
        end = taken
        # the turn boundary nearest to the goal, at least one turn per message
        while end < len(lines) - 1 and used + sizes[end] <= goal:
            used += sizes[end]
            end += 1
        end = max(end, taken + 1)
        groups.append(end - taken)
        taken = end
        used = sum(sizes[:taken])
    groups.append(len(lines) - taken)
    return groups


def _with_blocks(
    body: list[str],
    rng: random.Random,
    at: dt.datetime,
    min_chars: int,
    max_chars: int,
    insert_share: float,
) -> list[str]:
    """``body`` with pasted blocks: always while shorter than ``min_chars``, and
    with probability ``insert_share`` once otherwise; never over ``max_chars``."""
    wanted = rng.random() < insert_share
    for _ in range(12):
        length = sum(len(line) + 1 for line in body) - 1
        if length >= min_chars and not wanted:
            break
        block = any_block(rng, at)
        if length + len(block) + 1 > max_chars:
            continue
        position = rng.randint(1, len(body))  # after the first turn: it names the speaker
        body = [*body[:position], block, *body[position:]]
        wanted = False
    return body
