"""Turns written at one time are listed in the order they were written.

``add_events`` stamps a batch with one clock reading, and a transcript logged to the
minute gives many turns one ``created_at``.  Whatever lists turns by ``(created_at,
id)`` (the prompt of a context, search's ties) read them in the order of their ids,
which were random within a millisecond: an agent's prompt read "turn 4, turn 0,
turn 5 …".  Ids now count up within a millisecond (a version 7 UUID's counter).
"""

from __future__ import annotations

import datetime as dt
import uuid

from nbmemory import Memory
from nbmemory.event_rows import new_id, new_ids


def test_ids_sort_in_the_order_they_were_made():
    made = [new_id() for _ in range(50)] + new_ids(500) + [new_id() for _ in range(50)]
    made += new_ids(3)
    assert made == sorted(made) and len(set(made)) == len(made)
    for event_id in made[:60]:
        parsed = uuid.UUID(event_id)
        assert parsed.version == 7 and parsed.variant == uuid.RFC_4122


def test_a_prompt_lists_turns_of_one_time_in_the_order_written(tmp_path):
    with Memory(str(tmp_path / "m.duckdb"), embedder="hash", config=False) as mem:
        mem.add_events(
            [{"session_id": "s", "role": "user", "content": f"turn {i}"} for i in range(8)]
        )
        at = dt.datetime(2026, 3, 2, 9, 0)
        for i in range(8, 16):
            mem.add_event("s", "assistant", f"turn {i}", created_at=at)
        mem.flush()
        prompt = mem.get_context("s", recency_limit=16).to_prompt()
        batch = [line.split(": ", 1)[1] for line in prompt.splitlines()[1:]]
        assert batch == [f"turn {i}" for i in range(8, 16)] + [f"turn {i}" for i in range(8)]
