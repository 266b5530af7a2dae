"""The shape the code keeps: SQL only in the store, one transaction per call, the
settings a Memory is asked for, and no hidden changes of them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nbmemory import InvalidInput, Memory
from nbmemory.research.datasets import load_locomo
from nbmemory.research.evaluation import evaluate, evaluate_profiles

SRC = Path(__file__).parent.parent / "src" / "nbmemory"
_SQL = re.compile(r"\b(SELECT|INSERT INTO|UPDATE|DELETE FROM)\b")


def test_sql_is_written_only_in_the_store_layer() -> None:
    found = [
        f"{path.relative_to(SRC)}:{number}: {line.strip()}"
        for path in sorted(SRC.rglob("*.py"))
        if path.relative_to(SRC).parts[0] != "store"
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if _SQL.search(line)
    ]
    assert found == []


def test_an_explicit_embedder_and_another_embedding_model_are_refused() -> None:
    with pytest.raises(InvalidInput, match="embedding_model='BAAI/bge-small-en-v1.5'"):
        Memory(":memory:", embedder="hash", embedding_model="BAAI/bge-small-en-v1.5")


def test_embedding_model_alone_picks_the_model() -> None:
    with Memory(":memory:", embedding_model="BAAI/bge-small-en-v1.5") as mem:
        assert mem.model_name == "BAAI/bge-small-en-v1.5"  # the model loads on first use
    with Memory(":memory:", embedder="hash", embedding_model="nbmemory/hash-384") as mem:
        assert mem.model_name == "nbmemory/hash-384"


def test_apply_thresholds_writes_one_audit_row(mem: Memory) -> None:
    before = len(mem.audit_log())
    mem.apply_thresholds(relevance_threshold=0.42, source="test")
    log = mem.audit_log()
    assert len(log) == before + 1
    assert log["action"].iloc[0] == "settings"


def test_a_write_and_its_audit_row_commit_together(mem: Memory, monkeypatch) -> None:
    def broken_append(*args, **kwargs):
        raise RuntimeError("audit trail unavailable")

    monkeypatch.setattr(mem.store.audit, "append", broken_append)
    with pytest.raises(RuntimeError, match="audit trail unavailable"):
        mem.add_event("s", "user", "never half-written")
    monkeypatch.undo()
    assert mem.events().empty  # the row went with its audit row
    assert mem.flush(timeout=10) and mem.status()["pending"] == 0


def test_trial_settings_are_seen_by_the_evaluation_not_by_the_store(
    mem: Memory, tiny_locomo_path
) -> None:
    loaded = load_locomo(tiny_locomo_path, mem)
    seen: list[tuple[str, str]] = []

    def watcher(memory, conversation, question, k):
        seen.append((memory.settings.profile, mem.settings.profile))
        return memory.search(question, limit=k)["id"].tolist()

    spec = mem.settings.replace(profile="spec")
    evaluate(mem, loaded, strategies={"watcher": watcher}, settings=spec)
    evaluate_profiles(mem, loaded, ["spec"], strategies=["tri-hybrid"])
    assert seen and set(seen) == {("spec", "hybrid")}  # the store itself never switched
    assert mem.settings.profile == "hybrid"
    assert mem.audit_log(action="configure").empty
