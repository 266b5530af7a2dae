"""The Memory API: adding events, importance, search, working memory, lifecycle."""

from __future__ import annotations

import datetime as dt
import math
import threading

import numpy as np
import pandas as pd
import pytest

from nbmemory import InvalidInput, Memory, MemoryNotFound, Settings
from nbmemory.retrieval.embedders import HashEmbedder
from nbmemory.store import Change


def test_add_event_returns_the_stored_event(mem):
    event = mem.add_event("s1", "user", "My name is John and I love TypeScript")
    assert event.session_id == "s1" and event.role == "user"
    assert event.content == "My name is John and I love TypeScript"
    stored = mem.get_event(event.id)
    assert stored == event
    assert "s1" in event.summary() and event.id in event.summary()
    assert event.id in event._repr_html_()


@pytest.mark.parametrize(
    ("role", "expected"), [("user", 0.5), ("assistant", 0.5), ("tool", 0.3), ("system", 0.1)]
)
def test_importance_defaults_by_role(mem, role, expected):
    assert mem.add_event("s", role, "hello").importance == pytest.approx(expected)


def test_explicit_importance_wins(mem):
    assert mem.add_event("s", "system", "critical", importance=0.95).importance == 0.95
    assert mem.add_event("s", "user", "numpy", importance=np.float32(0.25)).importance == 0.25


@pytest.mark.parametrize("bad", [1.5, -0.1, math.nan, math.inf, "0.5", True, None.__class__])
def test_bad_importance_is_refused_and_nothing_stored(mem, bad):
    with pytest.raises(InvalidInput, match="importance"):
        mem.add_event("s", "user", "text", importance=bad)
    assert mem.events().empty


def test_custom_role_importance_from_settings(store_path):
    settings = Settings(importance_by_role={"user": 0.6, "critic": 0.9})
    with Memory(store_path, embedder="hash", settings=settings) as mem:
        assert mem.add_event("s", "critic", "harsh").importance == 0.9
        with pytest.raises(InvalidInput, match="unknown role 'assistant'"):
            mem.add_event("s", "assistant", "not configured")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"content": ""}, "empty"),
        ({"content": "   \n\t"}, "empty"),
        ({"content": 42}, "text"),
        ({"content": "bad \ud800 surrogate"}, "surrogate"),
        ({"session_id": ""}, "session_id"),
        ({"role": "wizard"}, "unknown role"),
        ({"metadata": {"when": object()}}, "JSON"),
        ({"metadata": ["not", "a", "dict"]}, "dict"),
        ({"metadata": {"x": math.nan}}, "JSON"),
        ({"created_at": "yesterday"}, "ISO-8601"),
    ],
)
def test_bad_input_is_refused_before_anything_is_stored(mem, kwargs, match):
    args = {"session_id": "s", "role": "user", "content": "fine"} | kwargs
    with pytest.raises(InvalidInput, match=match):
        mem.add_event(**args)
    assert mem.events().empty
    assert mem.audit_log().empty


def test_content_is_stored_exactly(mem):
    texts = ["NUL \x00 inside", "emoji 🧠✨", "שלום עולם right-to-left", "  padded  \n"]
    ids = [mem.add_event("s", "user", t).id for t in texts]
    for event_id, text in zip(ids, texts, strict=True):
        assert mem.get_event(event_id).content == text


def test_oversized_content_is_refused(store_path):
    with Memory(store_path, embedder="hash", max_content_bytes=1000) as mem:
        with pytest.raises(InvalidInput, match="bytes limit"):
            mem.add_event("s", "user", "x" * 1001)
        assert mem.events().empty


def test_created_at_accepts_iso_text_and_aware_datetimes(mem):
    a = mem.add_event("s", "user", "a", created_at="2024-05-08T13:56:00Z")
    b = mem.add_event(
        "s", "user", "b", created_at=dt.datetime(2024, 5, 8, 15, 0, tzinfo=dt.timezone.utc)
    )
    c = mem.add_event("s", "user", "c", created_at=pd.Timestamp("2024-05-08 16:00+02:00"))
    assert a.created_at == dt.datetime(2024, 5, 8, 13, 56)
    assert b.created_at == dt.datetime(2024, 5, 8, 15, 0)
    assert c.created_at == dt.datetime(2024, 5, 8, 14, 0)


def test_add_events_bulk_from_dataframe_and_dicts(mem):
    frame = pd.DataFrame(
        {
            "session_id": ["a", "a", "b"],
            "role": ["user", "assistant", "tool"],
            "content": ["one", "two", "three"],
            "importance": [0.9, None, None],
            "tool_name": [None, None, "search"],
        }
    )
    ids = mem.add_events(frame)
    assert len(ids) == 3
    stored = mem.events().set_index("id").loc[ids]
    assert stored["importance"].tolist() == [0.9, 0.5, 0.3]
    assert stored["tool_name"].tolist()[2] == "search"
    more = mem.add_events([{"role": "user", "content": "four"}], session_id="c")
    assert mem.get_event(more[0]).session_id == "c"


def test_add_events_is_all_or_nothing(mem):
    rows = [{"session_id": "s", "role": "user", "content": f"ok {i}"} for i in range(5)]
    rows.append({"session_id": "s", "role": "user", "content": "bad", "importance": 7})
    with pytest.raises(InvalidInput, match="row 5: importance"):
        mem.add_events(rows)
    with pytest.raises(InvalidInput, match="unknown field"):
        mem.add_events([{"session_id": "s", "role": "user", "content": "x", "colour": "red"}])
    assert mem.events().empty


def test_add_events_with_an_id_already_stored_writes_nothing(mem, store_path):
    mem.add_events([{"id": "a1", "session_id": "s", "role": "user", "content": "first"}])
    mem.flush()
    before = mem.store.fetchall("SELECT count(*) FROM audit_log")
    again = [
        [{"id": "new", "session_id": "s", "role": "user", "content": "x"},
         {"id": "a1", "session_id": "s", "role": "user", "content": "again"}],
        pd.DataFrame({"id": ["a1"], "session_id": ["s"], "role": ["user"], "content": ["y"]}),
        [{"id": "a1", "session_id": "s", "role": "user", "content": "z", "namespace": "other"}],
    ]  # fmt: skip
    for rows in again:
        with pytest.raises(InvalidInput, match="id 'a1' is already stored.*Leave the id out"):
            mem.add_events(rows)
    assert mem.events(filters=None)["id"].tolist() == ["a1"]
    assert mem.events(namespace="other").empty
    assert mem.store.fetchall("SELECT count(*) FROM audit_log") == before
    assert mem.add_events([{"session_id": "s", "role": "user", "content": "still works"}])


def test_search_ranks_by_cosine_best_first(store_path):
    mem = Memory(store_path, embedder="hash", profile="spec")
    mem.add_event("s", "user", "My name is John and I love TypeScript")
    mem.add_event("s", "user", "The weather in Lisbon is sunny today")
    mem.add_event("s", "user", "Budget for the project is 50k")
    mem.flush()
    hits = mem.search("what language do I love? TypeScript", limit=3)
    assert list(hits.columns[:7]) == [
        "id",
        "content",
        "role",
        "session_id",
        "similarity",
        "importance",
        "created_at",
    ]
    assert hits["content"].iloc[0].startswith("My name is John")
    assert hits["similarity"].is_monotonic_decreasing
    assert len(mem.search("anything", limit=2)) == 2
    mem.close()


def test_search_similarity_equals_numpy_cosine(mem):
    texts = [f"memory number {i} about topic {i % 7}" for i in range(40)]
    mem.add_events([{"session_id": "s", "role": "user", "content": t} for t in texts])
    mem.flush()
    query = "topic 3 memory"
    hits = mem.search(query, limit=40)
    emb = HashEmbedder()
    q = emb.embed([query])[0]
    m = emb.embed(texts)
    expected = (m @ q) / (np.linalg.norm(m, axis=1) * np.linalg.norm(q))
    by_text = dict(zip(hits["content"], hits["similarity"], strict=True))
    for text, sim in zip(texts, expected, strict=True):
        assert by_text[text] == pytest.approx(sim, abs=1e-5)


def test_search_threshold_keeps_only_hits_above_it(mem):
    mem.add_event("s", "user", "I love TypeScript")
    mem.add_event("s", "user", "completely unrelated words here")
    mem.flush()
    all_hits = mem.search("I love TypeScript", limit=5)
    top = all_hits["similarity"].iloc[0]
    hits = mem.search("I love TypeScript", threshold=0.9, limit=5)
    assert (hits["similarity"] >= 0.9).all() and len(hits) == 1
    assert top == pytest.approx(1.0, abs=1e-5)
    none = mem.search("zebra xylophone", threshold=0.99)
    assert none.empty
    assert none.attrs["best_similarity"] < 0.99


def test_search_filters_by_session_role_and_dates(mem):
    mem.add_event("a", "user", "alpha note", created_at="2024-01-01T00:00:00")
    mem.add_event("b", "assistant", "alpha note", created_at="2024-06-01T00:00:00")
    mem.flush()
    assert mem.search("alpha note", session_id="a")["session_id"].tolist() == ["a"]
    assert mem.search("alpha note", role="assistant")["role"].tolist() == ["assistant"]
    assert mem.search("alpha note", since="2024-03-01")["session_id"].tolist() == ["b"]
    assert mem.search("alpha note", until="2024-03-01")["session_id"].tolist() == ["a"]
    with pytest.raises(InvalidInput, match="cannot filter"):
        mem.search("alpha", filters={"content": "x"})


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"limit": -1}, "limit"),
        ({"limit": 2.5}, "limit"),
        ({"threshold": math.nan}, "threshold"),
        ({"threshold": 2}, "threshold"),
        ({"threshold": "abc"}, "threshold"),
        ({"since": "last tuesday"}, "ISO-8601"),
    ],
)
def test_search_bad_arguments(mem, kwargs, match):
    with pytest.raises(InvalidInput, match=match):
        mem.search("x", **kwargs)


def test_vectors_from_different_models_are_never_compared(store_path):
    with Memory(store_path, embedder=HashEmbedder(384)) as mem:
        mem.add_event("s", "user", "stored with model one")
        mem.flush()
    with Memory(store_path, embedder=HashEmbedder(256)) as other:
        other.add_event("s", "user", "stored with model two")
        other.flush()
        hits = other.search("stored with model", limit=10, mode="vector")
        assert hits["content"].tolist() == ["stored with model two"]
        # keywords know no model: the other row is found, without a similarity
        mixed = other.search("stored with model", limit=10, mode="keyword").set_index("content")
        assert np.isnan(mixed.loc["stored with model one", "similarity"])
        assert other.status()["events"] == 2
        # switching for good: reembed converts the old rows to the current model
        assert other.reembed() == 1
        other.flush()
        assert len(other.search("stored with model", limit=10)) == 2


def test_namespaces_are_isolated(mem):
    mem.add_event("s", "user", "secret plan", namespace="team-a")
    mem.add_event("s", "user", "secret plan", namespace="team-b")
    mem.flush()
    assert mem.search("secret plan", namespace="team-a")["namespace"].tolist() == ["team-a"]
    assert mem.search("secret plan").empty  # the default namespace has nothing
    assert len(mem.get_context("s", "secret plan", namespace="team-b")) == 1


def test_working_memory_serves_recency_without_sql(mem):
    for i in range(60):
        mem.add_event("s1", "user", f"message {i}")
    mem.flush()  # the embedding worker's own statements are not part of the read
    before = mem.store.statements_run
    recent = mem.recent("s1", limit=10)
    assert mem.store.statements_run == before  # no statement ran
    assert recent["content"].tolist() == [f"message {i}" for i in range(59, 49, -1)]
    # capped at working_memory_cap (50)
    assert len(mem.recent("s1", limit=100)) == 50
    assert mem.store.statements_run == before


def test_working_memory_is_rebuilt_after_restart(store_path):
    with Memory(store_path, embedder="hash") as mem:
        for i in range(12):
            mem.add_event("s1", "user", f"turn {i}")
    with Memory(store_path, embedder="hash") as again:
        recent = again.recent("s1", limit=3)
        assert recent["content"].tolist() == ["turn 11", "turn 10", "turn 9"]
        loads = again.working.loads
        again.recent("s1")
        assert again.working.loads == loads


def test_rows_of_another_writer_load_their_session_once(mem):
    """A lake's change feed hands this process many rows of a session it has not
    cached, all committed already: one load holds them all.  (Each row after the
    first looked out of order against the loaded window, which was dropped and
    loaded again: a reader following four writers on a lake ran 601 loads, 83 ms
    each, in 14 calls of ``get_context``.)"""
    for i in range(6):
        mem.add_event("s", "user", f"turn {i}", created_at=f"2024-01-0{i + 1}T00:00:00")
    records = list(reversed(mem.working.recent("default", "s")))  # oldest first, as the feed
    mem.working.invalidate()
    loads = mem.working.loads
    mem.working.follow(Change(added=[dict(r, seq=n) for n, r in enumerate(records)]))
    assert mem.working.loads == loads + 1
    assert mem.recent("s")["content"].tolist() == [f"turn {i}" for i in range(5, -1, -1)]
    assert mem.working.loads == loads + 1


def test_a_feed_of_more_rows_than_the_window_holds_loads_the_session_once(mem):
    """A lake reader that was idle while another writer added 700 events to one
    session: the feed hands over all 700, oldest first, and all but the last
    ``cap`` are older than the window loaded for them.  (Each such row dropped the
    window, and the next loaded it again: 326 loads, 7 of a catch-up's 7.5 s.)"""
    cap = mem.working.cap
    mem.add_events(
        [
            {
                "session_id": "s",
                "role": "user",
                "content": f"turn {i}",
                "created_at": f"2024-01-01T00:{i // 60:02d}:{i % 60:02d}",
            }
            for i in range(cap + 30)
        ]
    )
    records = list(reversed(mem.working.recent("default", "s")))  # the last cap rows
    older = mem.events(session_id="s").sort_values("created_at").head(30).to_dict("records")
    loads = mem.working.loads
    mem.working.follow(Change(added=[dict(r, seq=n) for n, r in enumerate(older + records)]))
    assert mem.working.loads == loads  # the cached window already holds what counts
    mem.working.invalidate()
    mem.working.follow(Change(added=[dict(r, seq=n) for n, r in enumerate(older + records)]))
    assert mem.working.loads == loads + 1  # loaded at the first row, kept for the rest
    recent = mem.recent("s", limit=cap)["content"].tolist()
    assert recent == [f"turn {i}" for i in range(cap + 29, 29, -1)]
    assert mem.working.loads == loads + 1


def test_working_memory_keeps_the_sessions_used_last_and_no_more(mem):
    """A lake reader is handed the rows of every writer's sessions: the cache keeps a
    bounded number of them, the least recently used dropped first."""
    from nbmemory.retrieval.working_memory import WorkingMemory

    working = WorkingMemory(mem.store, cap=5, sessions=2)
    for name in ("a", "b", "c"):
        mem.add_event(name, "user", f"in {name}")
    for name in ("a", "b"):
        working.recent("default", name)
    working.recent("default", "a")  # used last: b is now the oldest
    working.recent("default", "c")
    assert ("default", "a") in working and ("default", "c") in working
    assert ("default", "b") not in working
    loads = working.loads
    assert [r["content"] for r in working.recent("default", "b")] == ["in b"]
    assert working.loads == loads + 1 and ("default", "a") not in working
    # a feed of rows of more sessions than it holds loads none of them per row
    rows = [dict(working.recent("default", n)[0], seq=i) for i, n in enumerate("abc")]
    loads = working.loads
    working.follow(Change(added=rows * 3))
    assert working.loads == loads


def test_working_memory_follows_deletes_and_backdated_events(mem):
    first = mem.add_event("s", "user", "first", created_at="2024-01-02T00:00:00")
    mem.add_event("s", "user", "second", created_at="2024-01-03T00:00:00")
    mem.add_event("s", "user", "backdated", created_at="2024-01-01T00:00:00")
    assert mem.recent("s")["content"].tolist() == ["second", "first", "backdated"]
    assert mem.delete(first.id) == 1
    assert mem.recent("s")["content"].tolist() == ["second", "backdated"]


def test_delete_and_unknown_ids(mem):
    event = mem.add_event("s", "user", "to forget")
    assert mem.delete([event.id]) == 1
    assert mem.delete([event.id]) == 0
    with pytest.raises(MemoryNotFound, match="no memory with id"):
        mem.get_event(event.id)


def test_mutations_are_audited(mem):
    event = mem.add_event("s", "user", "hello")
    mem.add_events([{"session_id": "s", "role": "user", "content": "bulk"}])
    mem.delete(event.id)
    log = mem.audit_log()
    assert log["action"].tolist() == ["delete", "add", "add"]
    assert list(log["target_ids"].iloc[0]) == [event.id]


def test_status_reports_counts_and_backlog(mem):
    mem.add_events([{"session_id": f"s{i % 2}", "role": "user", "content": "x"} for i in range(6)])
    mem.flush()
    status = mem.status()
    assert status["events"] == 6 and status["embedded"] == 6 and status["pending"] == 0
    assert set(status["counts"]["session_id"]) == {"s0", "s1"}
    assert status["model"] == "nbmemory/hash-384"


def test_close_is_idempotent_and_closed_memory_refuses_work(store_path):
    mem = Memory(store_path, embedder="hash")
    mem.close()
    mem.close()
    assert mem.closed
    with pytest.raises(InvalidInput, match="closed"):
        mem.add_event("s", "user", "late")


def test_context_manager_closes(store_path):
    with Memory(store_path, embedder="hash") as mem:
        mem.add_event("s", "user", "x")
    assert mem.closed and mem.store.closed


def test_settings_are_validated_and_replaceable():
    settings = Settings(profile="spec")  # seed 000's numbers exactly
    assert settings.working_memory_cap == 50 and settings.relevance_threshold == 0.65
    assert settings.search_mode == "vector"
    hybrid = Settings()  # the default profile lowers the cosine floor and fuses keywords
    assert hybrid.profile == "hybrid" and hybrid.relevance_threshold == 0.2
    assert hybrid.search_mode == "hybrid"
    assert hybrid.replace(profile="spec").relevance_threshold == 0.65
    assert Settings(relevance_threshold=0.5).replace(profile="spec").relevance_threshold == 0.5
    with pytest.raises(InvalidInput, match="unknown profile"):
        Settings(profile="fast")
    assert settings.similarity_threshold == 0.7 and settings.max_memory_tokens == 4096
    assert settings.recency_limit == 10 and settings.salience_limit == 5
    assert settings.importance_by_role == {
        "user": 0.5,
        "assistant": 0.5,
        "tool": 0.3,
        "system": 0.1,
    }
    assert settings.consolidation_interval_hours == 6 and settings.session_ttl_hours == 24
    assert settings.max_concurrent_sessions == 5 and settings.audit_retention_days == 90
    assert settings.replace(relevance_threshold=0.4).relevance_threshold == 0.4
    with pytest.raises(InvalidInput, match="unknown setting"):
        settings.replace(relevance=0.4)
    with pytest.raises(InvalidInput, match="relevance_threshold"):
        settings.replace(relevance_threshold=1.5)
    with pytest.raises(InvalidInput, match="working_memory_cap"):
        Settings(working_memory_cap=0)


def test_default_path_comes_from_environment(tmp_path, monkeypatch):
    target = tmp_path / "from-env.duckdb"
    monkeypatch.setenv("NBMEMORY_PATH", str(target))
    with Memory(embedder="hash") as mem:
        assert mem.path == str(target)
    assert target.exists()


def test_two_threads_add_while_searching(mem):
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(50):
                mem.add_event(f"t{n}", "user", f"thread {n} message {i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for _ in range(20):
        mem.search("thread message", limit=3)
    for t in threads:
        t.join()
    mem.flush()
    assert not errors
    assert mem.status()["embedded"] == 150


def test_no_method_of_a_mixin_is_shadowed():
    """Memory's own methods and its mixins' must not share a name (one would vanish)."""
    own = set(vars(Memory))
    seen: dict[str, str] = {}
    for mixin in Memory.__mro__[1:-1]:
        for name, value in vars(mixin).items():
            if name.startswith("__") or not callable(value):
                continue
            assert name not in own, f"Memory.{name} shadows {mixin.__name__}.{name}"
            assert name not in seen, f"{mixin.__name__}.{name} clashes with {seen[name]}"
            seen[name] = mixin.__name__
