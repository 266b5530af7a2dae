"""Export / import: versioned JSON with embeddings, idempotent import, bit-exact LoCoMo round trip."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nbmemory import InvalidInput, Memory
from nbmemory.errors import SessionNotFound
from nbmemory.research.datasets import load_locomo
from nbmemory.transfer.json_files import FORMAT, VERSION, derived_id


def _events(mem: Memory, namespace: str) -> pd.DataFrame:
    return mem.store.events.frame(namespace=namespace, with_embedding=True).sort_values("id")


def _assert_same_events(left: pd.DataFrame, right: pd.DataFrame) -> None:
    left = left.reset_index(drop=True)
    right = right.reset_index(drop=True)
    assert list(left.columns) == list(right.columns)
    assert left["id"].tolist() == right["id"].tolist()
    plain = [c for c in left.columns if c != "embedding"]
    pd.testing.assert_frame_equal(left[plain], right[plain], check_exact=True)
    for a, b in zip(left["embedding"], right["embedding"], strict=True):
        if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
            assert pd.isna(a) and pd.isna(b)
        else:
            assert a.dtype == b.dtype == np.float32
            assert a.tobytes() == b.tobytes()  # bit for bit


def _sessions(mem: Memory, namespace: str) -> pd.DataFrame:
    return mem.store.df(
        "SELECT * FROM sessions WHERE namespace = ? ORDER BY session_id", [namespace]
    ).reset_index(drop=True)


def _round_trip(source: Memory, namespace: str, tmp_path: Path, embedder) -> Memory:
    target_path = tmp_path / "target.duckdb"
    file = tmp_path / "export.json"
    summary = source.export_json(file, namespace=namespace)
    assert summary["events"] == len(source.events(namespace=namespace)) > 0
    target = Memory(str(target_path), embedder=embedder)
    result = target.import_json(file)
    assert result["events_added"] == summary["events"]
    assert result["queued_for_embedding"] == 0  # every vector came with the file
    return target


def test_locomo_round_trip_keeps_every_row_field_and_vector(
    store_path: str, tmp_path: Path, locomo_dir: Path
) -> None:
    with Memory(store_path, embedder="hash") as source:
        loaded = load_locomo(locomo_dir / "conv-30.json", source)
        ns = loaded.namespace
        sid = source.start_session("caroline", namespace=ns).session_id
        source.close_session(sid, namespace=ns, state={"current_plan": ["remember"]})
        source.add_event("notes", "user", "a memory", namespace=ns, metadata={"k": [1, 2]})
        failed = f"locomo:{loaded.conversation.conversation_id}:D1:1"
        source.store.execute(  # one row whose embedding failed
            "UPDATE events SET embedding_model = NULL, embedding_error = 'x' WHERE id = ?",
            [failed],
        )
        source.store.execute("DELETE FROM event_vectors WHERE id = ?", [failed])
        source.flush()
        before = _events(source, ns)
        sessions_before = _sessions(source, ns)
        target = _round_trip(source, ns, tmp_path, "hash")
    with target:
        assert len(before) == len(loaded.conversation.turns) + 1
        _assert_same_events(before, _events(target, ns))
        pd.testing.assert_frame_equal(sessions_before, _sessions(target, ns), check_exact=True)
        assert target.get_session(sid, namespace=ns).state["current_plan"] == ["remember"]
        # and again: nothing is added the second time
        again = target.import_json(tmp_path / "export.json")
        assert again["events_added"] == 0 and again["sessions_added"] == 0
        assert again["events_skipped"] == len(before)
        _assert_same_events(before, _events(target, ns))


def test_locomo_round_trip_with_the_real_model(
    store_path: str, tmp_path: Path, locomo_dir: Path, real_embedder
) -> None:
    with Memory(store_path, embedder=real_embedder) as source:
        loaded = load_locomo(locomo_dir / "conv-30.json", source)
        before = _events(source, loaded.namespace)
        assert before["embedding"].map(lambda v: v is not None and len(v) == 384).all()
        target = _round_trip(source, loaded.namespace, tmp_path, real_embedder)
    with target:
        _assert_same_events(before, _events(target, loaded.namespace))
        question = loaded.queries().iloc[0]["question"]
        hits = target.search(question, namespace=loaded.namespace, limit=5)
        assert len(hits) == 5 and hits["similarity"].iloc[0] > 0.3


def test_file_format_is_versioned_and_documented(mem: Memory, tmp_path: Path) -> None:
    event = mem.add_event("s1", "user", "I love TypeScript", metadata={"b": 1, "a": "x"})
    mem.flush()
    file = tmp_path / "out.json"
    summary = mem.export_json(file)
    document = json.loads(file.read_text(encoding="utf-8"))
    assert document["format"] == FORMAT and document["version"] == VERSION == 2
    assert document["embedding_encoding"] == "base64-float32-le"
    assert document["scope"] == {"namespace": "default", "session_id": None}
    assert document["counts"] == {
        "events": 1,
        "embedded": 1,
        "sessions": 0,
        "facts": 0,
        "macros": 0,
        "scheduled_tasks": 0,
        "terminal_allowed_prefixes": 0,
    }
    item = document["events"][0]
    assert item["id"] == event.id and item["metadata"] == '{"a": "x", "b": 1}'
    assert item["created_at"].endswith("Z") and item["embedding_dim"] == 384
    stored = mem.store.fetchone("SELECT embedding FROM event_vectors WHERE id = ?", [event.id])[0]
    decoded = np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4")
    assert decoded.tobytes() == np.asarray(stored, dtype=np.float32).tobytes()
    assert summary["events"] == 1 and summary["bytes"] == file.stat().st_size


def test_export_one_session(mem: Memory, tmp_path: Path) -> None:
    sid = mem.start_session("u").session_id
    mem.add_event(sid, "user", "in the session")
    mem.add_event("other", "user", "not in the session")
    mem.start_session("u")
    summary = mem.export_json(tmp_path / "s.json", session_id=sid)
    document = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))
    assert summary["events"] == 1 and summary["sessions"] == 1
    assert [e["content"] for e in document["events"]] == ["in the session"]
    assert [s["session_id"] for s in document["sessions"]] == [sid]
    with pytest.raises(SessionNotFound):
        mem.export_json(tmp_path / "none.json", session_id="sess_missing")


def test_import_into_another_namespace_of_the_same_store(mem: Memory, tmp_path: Path) -> None:
    original = mem.add_event("s1", "user", "copy me")
    mem.flush()
    mem.export_json(tmp_path / "a.json")
    first = mem.import_json(tmp_path / "a.json", namespace="copy")
    assert first["events_added"] == 1 and first["namespaces"] == ["copy"]
    copied = mem.events(namespace="copy")
    assert copied["id"].tolist() == [derived_id("copy", original.id)]
    assert copied["content"].tolist() == ["copy me"]
    assert mem.get_event(original.id).namespace == "default"  # the original is untouched
    assert mem.import_json(tmp_path / "a.json", namespace="copy")["events_added"] == 0
    assert len(mem.events(namespace="copy")) == 1
    assert mem.search("copy me", namespace="copy")["id"].tolist() == copied["id"].tolist()


def test_imported_text_is_redacted_and_its_vector_dropped(mem: Memory, tmp_path: Path) -> None:
    with Memory(str(tmp_path / "raw.duckdb"), embedder="hash", redaction=False) as raw:
        raw.add_event("s", "user", "the password: hunter2 is old")
        raw.flush()
        raw.export_json(tmp_path / "raw.json")
    result = mem.import_json(tmp_path / "raw.json")
    assert result["redacted"] == 1 and result["queued_for_embedding"] == 1
    mem.flush()
    row = mem.events().iloc[0]
    assert row["content"] == "the password: [REDACTED] is old"
    assert row["embedding_model"] == mem.model_name  # re-embedded from the redacted text
    assert json.loads(mem.audit_log(action="import")["details"].iloc[0])["redacted"] == 1


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(format="other"), "not an nbmemory export"),
        (lambda d: d.update(version=99), "newer than this nbmemory reads"),
        (lambda d: d["events"][1].update(embedding_dim=3), r"events\[1\].*values"),
        (lambda d: d["events"][1].update(embedding="!!"), r"events\[1\].*base64"),
        (lambda d: d["events"][1].update(created_at="yesterday"), r"events\[1\].*ISO-8601"),
        (lambda d: d["events"][1].pop("role"), r"events\[1\] lacks role"),
        (lambda d: d["events"].append(dict(d["events"][0])), "repeats event ids"),
    ],
)
def test_bad_files_are_refused_and_nothing_is_written(
    mem: Memory, tmp_path: Path, mutate, message: str
) -> None:
    mem.add_events([{"session_id": "s", "role": "user", "content": f"row {i}"} for i in range(3)])
    mem.flush()
    file = tmp_path / "out.json"
    mem.export_json(file)
    document = json.loads(file.read_text(encoding="utf-8"))
    mutate(document)
    file.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(InvalidInput, match=message):
        mem.import_json(file, namespace="target")
    assert mem.events(namespace="target").empty


def test_unreadable_inputs(mem: Memory, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no export file"):
        mem.import_json(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(InvalidInput, match="is not JSON"):
        mem.import_json(tmp_path / "bad.json")
    with pytest.raises(InvalidInput, match="folder .* does not exist"):
        mem.export_json(tmp_path / "nope" / "out.json")


# -- long memories: their passages travel with them (issue 36) ---------------------------------
DATA = Path(__file__).resolve().parent / "data"


def _passage_rows(mem: Memory, namespace: str = "default") -> list[tuple]:
    rows: list[tuple] = mem.store.run(
        "SELECT v.id, v.model, v.passage, v.span_start, v.span_stop, v.embedding"
        " FROM event_vectors v JOIN events e ON e.id = v.id WHERE e.namespace = ?"
        " ORDER BY v.id, v.passage",
        [namespace],
    )
    return [(*r[:5], np.asarray(r[5], dtype=np.float32).tobytes()) for r in rows]


def _long_store(mem: Memory, count: int = 6) -> list[str]:
    from test_long_memories import TAIL_FACTS, long_message

    ids = [
        mem.add_event("s", "assistant", long_message(i, fact)).id
        for i, (fact, _) in enumerate(TAIL_FACTS[:count])
    ]
    mem.add_event("s", "user", "a short note beside them")
    mem.flush()
    return ids


def test_long_memories_keep_every_passage_through_export_and_import(tmp_path: Path) -> None:
    from test_long_memories import TAIL_FACTS

    with Memory(tmp_path / "source.duckdb", embedder="hash") as source:
        ids = _long_store(source)
        rows = _passage_rows(source)
        assert len(rows) > 3 * len(ids)  # several passages each, and the short one
        answers = [
            source.search(q, mode="vector", limit=3)["id"].tolist() for _, q in TAIL_FACTS[:6]
        ]
        summary = source.export_json(tmp_path / "long.json")
        assert summary["events"] == 7
    document = json.loads((tmp_path / "long.json").read_text(encoding="utf-8"))
    by_id = {e["id"]: e for e in document["events"]}
    assert all(len(by_id[i]["passages"]) > 3 for i in ids)
    assert by_id[ids[0]]["passages"][0]["embedding"] == by_id[ids[0]]["embedding"]
    with Memory(tmp_path / "target.duckdb", embedder="hash") as target:
        result = target.import_json(tmp_path / "long.json")
        assert result["queued_for_embedding"] == 0
        assert target.embeddings.backlog == 0  # nothing re-embedded: the passages came in
        assert _passage_rows(target) == rows  # every passage, span and vector bit
        for (_, question), expected in zip(TAIL_FACTS[:6], answers, strict=True):
            assert target.search(question, mode="vector", limit=3)["id"].tolist() == expected
        found = target.search(TAIL_FACTS[0][1], mode="vector", limit=3).set_index("id")
        assert found.loc[ids[0], "passage_stop"] == len(target.get_event(ids[0]).content)
    with Memory(tmp_path / "target.duckdb", embedder="hash") as again:  # from the file
        again.flush()
        assert again.status()["passages"] is None  # nothing left to re-embed
        assert _passage_rows(again) == rows


@pytest.mark.real_model
def test_a_tail_fact_is_found_by_vector_after_a_round_trip(tmp_path: Path, real_embedder) -> None:
    from test_long_memories import _check_tail_facts, _ingest

    with Memory(tmp_path / "source.duckdb", embedder=real_embedder) as source:
        ids = _ingest(source)
        source.export_json(tmp_path / "long.json")
    with Memory(tmp_path / "target.duckdb", embedder=real_embedder) as target:
        assert target.import_json(tmp_path / "long.json")["queued_for_embedding"] == 0
        assert target.embeddings.backlog == 0
        _check_tail_facts(target, ids, ("vector", None))


def test_a_long_memory_of_a_file_without_passages_is_re_embedded_as_passages(
    tmp_path: Path,
) -> None:
    # made by nbmemory before passages travelled (tests/data/make_export_v1.py): the
    # long message's vector is its first passage's, alone
    with Memory(tmp_path / "target.duckdb", embedder="hash") as mem:
        result = mem.import_json(DATA / "export_v1.json")
        assert result["events_added"] == 3 and result["queued_for_embedding"] == 0
        long_id = max(mem.events().itertuples(), key=lambda r: len(r.content)).id
        mem.flush()
        passages = [r[2] for r in _passage_rows(mem) if r[0] == long_id]
        assert len(passages) > 3 and passages == list(range(len(passages)))
        assert mem.status()["passages"] == "1 of 1 long memories re-embedded as passages"
        assert {r[2] for r in _passage_rows(mem) if r[0] != long_id} == {None}


def _first_long(document: dict) -> dict:
    return max(document["events"], key=lambda e: len(e["content"] or ""))


BAD_PASSAGES = {
    "one passage": (lambda e: e.update(passages=e["passages"][:1]), "2 passages or more"),
    "not a list": (lambda e: e.update(passages="all"), "2 passages or more"),
    "span past the text": (
        lambda e: e["passages"][-1].update(stop=len(e["content"]) + 1),
        r"passages\[\d+\]: span .* not inside the text",
    ),
    "spans out of order": (
        lambda e: e["passages"][1].update(start=0),
        r"passages\[1\]: span .* not inside the text",
    ),
    "empty span": (lambda e: e["passages"][0].update(stop=0), r"passages\[0\]: span"),
    "start a string": (lambda e: e["passages"][0].update(start="0"), "must be integers"),
    "vector of another dimension": (
        lambda e: e["passages"][1].update(embedding=e["passages"][1]["embedding"][:40]),
        r"passages\[1\]: embedding has",
    ),
    "zero vector": (
        lambda e: e["passages"][2].update(
            embedding=base64.b64encode(np.zeros(384, "<f4").tobytes()).decode()
        ),
        r"passages\[2\]: embedding is",
    ),
    "first passage not the embedding": (
        lambda e: e["passages"][0].update(embedding=e["passages"][1]["embedding"]),
        "differs from the event's embedding",
    ),
    "passages without embedding": (
        lambda e: e.update(embedding=None, embedding_dim=None),
        "need the event's text and its embedding",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_PASSAGES))
def test_bad_passages_refuse_the_file_and_write_nothing(
    mem: Memory, tmp_path: Path, name: str
) -> None:
    _long_store(mem, count=2)
    file = tmp_path / "long.json"
    mem.export_json(file)
    document = json.loads(file.read_text(encoding="utf-8"))
    mutate, message = BAD_PASSAGES[name]
    mutate(_first_long(document))
    file.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(InvalidInput, match=r"events\[\d\] .*" + message):
        mem.import_json(file, namespace="target")
    assert mem.events(namespace="target").empty
    assert mem.store.run("SELECT count(*) FROM event_vectors WHERE namespace = 'target'") == [(0,)]


# -- format version 2: facts, macros, scheduled tasks, allowed prefixes (issue 38) ------------
_TABLE_SQL = {
    "facts": "SELECT id, namespace, category, key, value, source, created_at, updated_at"
    " FROM facts WHERE namespace = ? ORDER BY category, key",
    "macros": "SELECT * FROM macros WHERE namespace = ? ORDER BY trigger_tool, next_tool",
    "scheduled_tasks": "SELECT * FROM scheduled_tasks WHERE namespace = ? ORDER BY name",
}


def _tables(mem: Memory, namespace: str = "default") -> dict[str, list[tuple]]:
    out = {name: mem.store.run(sql, [namespace]) for name, sql in _TABLE_SQL.items()}
    out["prefixes"] = mem.store.run("SELECT * FROM terminal_allowed_prefixes ORDER BY prefix")
    return out


def _without(rows: list[tuple], *positions: int) -> list[tuple]:
    return [tuple(v for i, v in enumerate(r) if i not in positions) for r in rows]


def _agent_state(mem: Memory) -> None:
    mem.add_event("s", "user", "I deploy with git push")
    mem.set_fact("user", "editor", "helix", source="user")
    mem.set_fact("project", "language", "rust")
    mem.add_macro("git_commit", "git_push", {"remote": "origin"}, trigger_args_pattern="*main*")
    mem.add_macro("cargo_build", "cargo_test")
    mem.record_macro_use(mem.macros.list()["id"].iloc[0])
    mem.schedule_task("standup", "0 9 * * 1-5", "summarise yesterday", trusted=True)
    mem.schedule_task("reminder", "in 2 hours", "water the plants")
    mem.add_allowed_prefix("git status")
    mem.add_allowed_prefix("cargo test")
    mem.flush()


def test_version_2_carries_facts_macros_tasks_and_prefixes(tmp_path: Path) -> None:
    """003: "Use o fluxo de exportação/importação" to move state between stores: the
    namespace's learnt state (000's facts, macros, scheduled tasks, allowed prefixes) too."""
    with Memory(tmp_path / "source.duckdb", embedder="hash") as source:
        _agent_state(source)
        before = _tables(source)
        summary = source.export_json(tmp_path / "all.json")
        session_only = source.export_json(tmp_path / "session.json", session_id="s")
    assert {k: summary[k] for k in ("facts", "macros", "scheduled_tasks")} == {
        "facts": 2,
        "macros": 2,
        "scheduled_tasks": 2,
    }
    assert summary["terminal_allowed_prefixes"] == 2
    assert session_only["facts"] == session_only["terminal_allowed_prefixes"] == 0
    with Memory(tmp_path / "target.duckdb", embedder="hash") as target:
        target.set_fact("other", "thing", "taken id 1")  # the target uses fact id 1 already
        target.add_macro("ls", "cat")  # and macro id 1
        result = target.import_json(tmp_path / "all.json")
        assert {k: v for k, v in result.items() if k.endswith("_added")} == {
            "events_added": 1,
            "sessions_added": 0,
            "facts_added": 2,
            "macros_added": 2,
            "scheduled_tasks_added": 2,
            "terminal_allowed_prefixes_added": 2,
        }
        after = _tables(target)
        # every column as it was, ids aside where the target used them
        assert after["scheduled_tasks"] == before["scheduled_tasks"]
        assert after["prefixes"] == before["prefixes"]
        mine = [r for r in after["facts"] if r[2] != "other"]
        assert _without(mine, 0) == _without(before["facts"], 0)
        assert {r[0] for r in mine}.isdisjoint({target.get_fact("other", "thing")["id"]})
        assert _without([r for r in after["macros"] if r[2] != "ls"], 0) == _without(
            before["macros"], 0
        )
        task = target.get_task(next(r[0] for r in before["scheduled_tasks"] if r[2] == "standup"))
        assert task["is_trusted"] is True and task["prompt"] == "summarise yesterday"
        assert target.get_fact("user", "editor")["value"] == "helix"
        # importing again adds nothing
        again = target.import_json(tmp_path / "all.json")
        assert {k: v for k, v in again.items() if k.endswith("_added")} == dict.fromkeys(
            [k for k in result if k.endswith("_added")], 0
        )
        assert _tables(target) == after
        # into another namespace of the same store: its own copies, derived task ids
        copy = target.import_json(tmp_path / "all.json", namespace="copy")
        assert copy["facts_added"] == copy["macros_added"] == copy["scheduled_tasks_added"] == 2
        assert copy["terminal_allowed_prefixes_added"] == 0  # the store's, allowed already
        task_ids = {r[0] for r in _tables(target, "copy")["scheduled_tasks"]}
        assert task_ids == {derived_id("copy", r[0]) for r in before["scheduled_tasks"]}
        assert target.get_fact("project", "language", namespace="copy")["value"] == "rust"
        trail = [json.loads(d) for d in target.audit_log(action="import")["details"]]
        assert {"facts_added": 2, "terminal_allowed_prefixes_added": 2}.items() <= max(
            trail, key=len
        ).items()


def test_a_version_1_file_is_still_read(tmp_path: Path) -> None:
    # made by nbmemory before version 2 (tests/data/make_export_v1.py)
    document = json.loads((DATA / "export_v1.json").read_text(encoding="utf-8"))
    assert document["version"] == 1 and "facts" not in document
    with Memory(tmp_path / "target.duckdb", embedder="hash") as mem:
        result = mem.import_json(DATA / "export_v1.json")
        assert result["version"] == 1
        assert (result["events_added"], result["sessions_added"], result["facts_added"]) == (
            3,
            1,
            0,
        )
        assert mem.get_session("s1").state["current_plan"] == ["brew tea"]
        stored = {r[0]: r[1] for r in mem.store.run("SELECT id, embedding FROM event_vectors")}
        for item in document["events"]:
            assert mem.get_event(item["id"]).content == item["content"]
            raw = np.asarray(stored[item["id"]], dtype="<f4").tobytes()
            assert raw == base64.b64decode(item["embedding"])  # bit for bit
        assert mem.store.run("SELECT count(*) FROM facts") == [(0,)]  # not in version 1


BAD_TABLE_ROWS = {
    "fact key empty": (lambda d: d["facts"][0].update(key=" "), r"facts\[0\]: key"),
    "fact source unknown": (lambda d: d["facts"][1].update(source="robot"), r"facts\[1\]: source"),
    "fact id negative": (lambda d: d["facts"][0].update(id=-1), r"facts\[0\]: id"),
    "fact value a list": (lambda d: d["facts"][0].update(value=[1]), r"facts\[0\]: value"),
    "macro confidence 2": (
        lambda d: d["macros"][0].update(confidence=2.0),
        r"macros\[0\]: confidence",
    ),
    "macro without tool": (lambda d: d["macros"][1].pop("next_tool"), r"macros\[1\]: next_tool"),
    "task cron": (
        lambda d: d["scheduled_tasks"][0].update(cron_expr="every full moon"),
        r"scheduled_tasks\[0\]: cron_expr",
    ),
    "task trusted as text": (
        lambda d: d["scheduled_tasks"][0].update(is_trusted="yes"),
        r"scheduled_tasks\[0\]: is_trusted",
    ),
    "task time": (
        lambda d: d["scheduled_tasks"][1].update(next_run_at="soon"),
        r"scheduled_tasks\[1\]: next_run_at",
    ),
    "task repeated": (
        lambda d: d["scheduled_tasks"].append(dict(d["scheduled_tasks"][0])),
        "repeats rows of scheduled_tasks",
    ),
    "prefix a number": (
        lambda d: d["terminal_allowed_prefixes"][0].update(prefix=7),
        r"terminal_allowed_prefixes\[0\]: prefix",
    ),
    "facts not a list": (lambda d: d.update(facts={"a": 1}), "'facts' must be a list"),
    "macro not an object": (lambda d: d["macros"].append(3), r"macros\[2\] is not an object"),
}


@pytest.mark.parametrize("name", sorted(BAD_TABLE_ROWS))
def test_a_bad_table_row_refuses_the_whole_file(tmp_path: Path, name: str) -> None:
    with Memory(tmp_path / "source.duckdb", embedder="hash") as source:
        _agent_state(source)
        source.export_json(tmp_path / "all.json")
    document = json.loads((tmp_path / "all.json").read_text(encoding="utf-8"))
    mutate, message = BAD_TABLE_ROWS[name]
    mutate(document)
    (tmp_path / "all.json").write_text(json.dumps(document), encoding="utf-8")
    with Memory(tmp_path / "target.duckdb", embedder="hash") as target:
        with pytest.raises(InvalidInput, match=message):
            target.import_json(tmp_path / "all.json")
        assert target.events().empty  # nothing of the file went in
        assert all(not rows for rows in _tables(target).values())
