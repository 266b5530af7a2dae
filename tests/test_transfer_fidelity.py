"""Export / import keeps what a user stored: the order of turns, and a bad file is one
clean refusal that changes nothing."""

from __future__ import annotations

from pathlib import Path

from nbmemory import Memory

_IN_ORDER = "SELECT content FROM events WHERE namespace = ? ORDER BY created_at, seq"


def _turns(mem: Memory, namespace: str = "default") -> list[str]:
    return [row[0] for row in mem.store.run(_IN_ORDER, [namespace])]


def test_turns_written_at_one_time_keep_their_order(tmp_path: Path) -> None:
    """``add_events`` stamps a conversation with one clock reading: its turns' order is
    their insertion order (``seq``), which an import must keep, not the ids' order."""
    turns = [
        {"session_id": "s", "role": ("user", "assistant")[i % 2], "content": f"turn {i:02d}"}
        for i in range(40)
    ]
    file = tmp_path / "export.json"
    with Memory(tmp_path / "source.duckdb", embedder="hash") as source:
        source.add_events(turns)
        source.add_events([{"session_id": "s", "role": "user", "content": "later"}])
        source.flush()
        before = _turns(source)
        assert before == [t["content"] for t in turns] + ["later"]
        source.export_json(file)
    with Memory(tmp_path / "target.duckdb", embedder="hash") as target:
        target.add_event("other", "user", "already here")
        target.import_json(file)
        assert [t for t in _turns(target) if t != "already here"] == before
        target.import_json(file, namespace="copy")  # derived ids: still in order
        assert _turns(target, "copy") == before
