"""Export / import keeps what a user stored: the order of turns, and a bad file is one
clean refusal that changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nbmemory import InvalidInput, Memory

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


def _export(tmp_path: Path) -> tuple[Memory, Path, dict]:
    mem = Memory(tmp_path / "store.duckdb", embedder="hash")
    mem.add_event("s", "user", "hello there")
    mem.add_macro("git_status", "git_diff", confidence=0.5)
    mem.flush()
    file = tmp_path / "export.json"
    mem.export_json(file)
    return mem, file, json.loads(file.read_text(encoding="utf-8"))


def _snapshot(mem: Memory) -> list:
    return [
        mem.store.run(f"SELECT * FROM {table} ORDER BY ALL")
        for table in ("events", "event_vectors", "sessions", "facts", "macros", "audit_log")
    ]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["events"][0].update(importance=10**400), r"events\[0\] .*importance"),
        (lambda d: d["macros"][0].update(confidence=10**400), r"macros\[0\]: confidence"),
        (lambda d: d["macros"][0].update(used_count=10**400), r"macros\[0\]: used_count"),
        (lambda d: d.update(version=True), "bad export version True"),
        (lambda d: d["events"][0].update(id="x" * 5000), r"events\[0\] \('x{10,80}"),
    ],
)
def test_a_hand_edited_file_is_one_clean_refusal(tmp_path: Path, edit, message: str) -> None:
    mem, file, document = _export(tmp_path)
    with mem:
        edit(document)
        file.write_text(json.dumps(document), encoding="utf-8")
        before = _snapshot(mem)
        with pytest.raises(InvalidInput, match=message) as refused:
            mem.import_json(file, namespace="target")
        assert "\n" not in str(refused.value) and len(str(refused.value)) < 400
        assert _snapshot(mem) == before


def test_events_lists_turns_written_at_one_time_in_the_order_written():
    # add_events stamps a batch with one clock reading; events() listed it by the ids,
    # random within a millisecond
    with Memory(":memory:", embedder="hash") as mem:
        texts = [f"turn {i}" for i in range(40)]
        mem.add_events([{"session_id": "s", "role": "user", "content": t} for t in texts])
        assert list(mem.events()["content"]) == texts
