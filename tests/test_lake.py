"""The store on DuckLake (catalog in PostgreSQL): the same Memory, many processes at once.

Run by ``.ci/run`` in ``.venv-lake`` (duckdb 1.5.5, whose ducklake and postgres
extensions exist as wheels) against a PostgreSQL it starts on 127.0.0.1;
elsewhere these tests skip unless ``$NBMEMORY_LAKE_PG`` names a server.
"""

from __future__ import annotations

import json
import os

import pytest
from child_process import expect, release_together, spawn

from nbmemory import Memory
from nbmemory.store.lake import LakeStore


def _open(url: str, **kwargs) -> Memory:
    return Memory(url, embedder="hash", **kwargs)


def test_a_lake_remembers_searches_and_builds_a_context(lake_url: str) -> None:
    with _open(lake_url) as mem:
        assert isinstance(mem.store, LakeStore)
        if "password=" in lake_url:  # the repr, as every message, hides the password
            assert "password=***" in repr(mem) and lake_url.split("password=")[1] not in repr(mem)
        ids = [mem.add_event("s1", "user", f"I like {w}") for w in ("TypeScript", "tea", "cats")]
        assert mem.flush(timeout=30)
        assert mem.search("TypeScript", limit=1)["id"].iloc[0] == ids[0].id
        context = mem.get_context("s1", "what drink do I like?")
        assert "I like tea" in str(context)
        assert mem.status()["pending"] == 0
    with _open(lake_url) as again:  # a new process's view: everything is in the lake
        assert len(again.events()) == 3
        assert again.search("cats", limit=1)["content"].iloc[0] == "I like cats"


def _scenario(mem: Memory) -> dict:
    """Most of the API on one store; returns what it answered, without ids and times."""
    out: dict = {}
    mem.add_events(
        [
            {"session_id": "a", "role": "user", "content": "My name is John and I love TypeScript"},
            {"session_id": "a", "role": "assistant", "content": "Noted: TypeScript it is"},
            {"session_id": "b", "role": "user", "content": "The deploy key is in the vault"},
        ]
    )
    mem.add_event("b", "user", "the aws id AKIAIOSFODNN7EXAMPLE and password: hunter2")
    e = mem.add_memory("I moved to Lisbon last May", session_id="a", importance=0.9)
    mem.add_event("b", "tool", "ls -la printed 12 files", tool_name="shell")
    assert mem.flush(timeout=30)
    for mode in ("hybrid", "vector", "keyword"):
        out[f"search {mode}"] = mem.search("Where do I live?", limit=3, mode=mode)[
            "content"
        ].tolist()
    out["context"] = [i.content for i in mem.get_context("a", "What language do I love?")]
    mem.update_memory(e.id, content="I moved to Porto last May")
    assert mem.flush(timeout=30)
    out["after edit"] = mem.search("Porto", limit=1)["content"].tolist()
    mem.delete(e.id)
    out["events"] = sorted(mem.events()["content"].tolist())
    assert not any("hunter2" in text or "AKIAIOSFODNN7" in text for text in out["events"])
    mem.set_fact("user", "city", "Lisbon")
    mem.set_fact("user", "city", "Porto")
    mem.set_fact("user", "name", "John")
    out["facts"] = mem.facts()[["category", "key", "value"]].values.tolist()
    out["history"] = mem.fact_history("user", "city")["value"].tolist()
    mem.delete_fact("user", "name")
    out["facts after delete"] = mem.facts()["key"].tolist()
    macro = mem.add_macro("git_status", "git_diff", next_args="{}")
    mem.record_macro_use(macro if isinstance(macro, int) else macro["id"])
    out["macros"] = mem.macros()[["trigger_tool", "next_tool", "used_count"]].values.tolist()
    mem.add_allowed_prefix("ls")
    mem.add_allowed_prefix("ls")
    out["prefixes"] = mem.allowed_prefixes()
    out["allowed"] = (mem.is_command_allowed("ls -la"), mem.is_command_allowed("rm -rf /"))
    task = mem.schedule_task("digest", "every day at 9am", "summarise the day")
    mem.pause_task(task["id"] if isinstance(task, dict) else task)
    out["tasks"] = mem.scheduled_tasks()[["name", "is_paused"]].values.tolist()
    mem.start_session("u1", session_id="c")
    mem.save_session_state("c", {"step": 2})
    out["session"] = mem.get_session("c").state
    mem.close_session("c")
    out["sessions"] = sorted(mem.sessions()["status"].tolist())
    out["audit"] = sorted(mem.audit_log()["action"].tolist())
    path = os.path.join(mem.export_dir, "export.json")
    mem.export_json(path)
    with open(path) as file:
        exported = json.loads(file.read())
    out["exported"] = {k: len(v) for k, v in exported.items() if isinstance(v, list)}
    with Memory(":memory:", embedder="hash") as copy:  # and it imports back
        copy.import_json(path)
        out["imported"] = sorted(copy.events()["content"].tolist())
    return out


def test_a_lakes_small_statements_run_on_one_thread_and_its_index_scan_on_all(
    lake_url: str, monkeypatch
) -> None:
    """DuckDB's other threads only cost CPU on a lake's commits and feed reads (55 ms
    against 30 ms an add_event, 4 writers on 2 cores): one thread, except while a scan
    fills the vector index, after which the one thread is back."""
    import duckdb

    from nbmemory.store.connection import Store
    from nbmemory.store.lake.tuning import LAKE_THREADS

    default = duckdb.connect().execute("SELECT current_setting('threads')").fetchall()[0][0]

    def threads(mem: Memory) -> int:
        return int(mem.store.fetchall("SELECT current_setting('threads')")[0][0])

    with _open(lake_url) as mem:
        mem.add_events([{"session_id": "s", "role": "user", "content": f"n{i}"} for i in range(50)])
        assert mem.flush(timeout=60)
    with _open(lake_url) as mem:  # a new process's view: its first search scans the vectors
        assert threads(mem) == LAKE_THREADS == 1
        scans: list[tuple[bool, int]] = []
        stream = Store.stream

        def watched(self, sql, params, rows, *, lean=False):
            scans.append((bool(lean), threads(mem)))
            yield from stream(self, sql, params, rows, lean=lean)

        monkeypatch.setattr(Store, "stream", watched)
        assert mem.search("n7", limit=1, mode="vector")["content"].tolist()
        assert (True, default) in scans, scans
        assert all(n == default for lean, n in scans if lean), scans
        assert threads(mem) == LAKE_THREADS


def test_the_api_answers_the_same_on_a_lake_as_on_a_file(lake_url: str, tmp_path) -> None:
    with Memory(str(tmp_path / "file.duckdb"), embedder="hash") as mem:
        mem.export_dir = tmp_path / "exported-from-file"
        mem.export_dir.mkdir()
        on_file = _scenario(mem)
    with _open(lake_url) as mem:
        mem.export_dir = tmp_path / "exported-from-lake"
        mem.export_dir.mkdir()
        on_lake = _scenario(mem)
    assert on_lake == on_file


def test_the_feed_reads_only_the_tables_other_writers_changed(lake_url: str, monkeypatch) -> None:
    """Each followed table's changes cost a catalog query (25-75 ms) even when the
    snapshots wrote nothing to it: a reader following four writers spent a third of
    its feed on the sessions table, which their events never touch.  The snapshots'
    own list of changed tables says which to read, and a session closed elsewhere
    still arrives."""
    from nbmemory.store.lake import feed

    read: list[str] = []
    real = feed._feed

    def recorded(run, table, *args):
        read.append(table)
        return real(run, table, *args)

    monkeypatch.setattr(feed, "_feed", recorded)
    with _open(lake_url) as writer, _open(lake_url) as reader:
        writer.start_session("u1", session_id="s")
        writer.add_event("s", "user", "hello")
        writer.flush()
        reader.get_context("s", "hello")  # caught up
        changes: list = []
        reader.store.listen(changes.append)
        read.clear()
        writer.add_event("notes", "user", "the port is now 8443")  # not a started session
        found = reader.search("port 8443", mode="keyword")
        assert found["content"].tolist() == ["the port is now 8443"]
        assert "events" in read and "sessions" not in read, read
        writer.flush()  # its vector's commit, read before the next step
        reader.search("port", mode="keyword")
        read.clear()
        writer.close_session("s")
        reader.search("port", mode="keyword")
        assert read == ["sessions"], read
        assert any(("default", "s") in c.sessions_inactive for c in changes), changes


def test_a_reader_asks_the_catalog_for_the_new_snapshots_alone(lake_url: str, monkeypatch) -> None:
    """Which snapshots other writers made since the last call: DuckLake's ``snapshots()``
    reads the lake's whole history to answer (35-70 ms of CPU per call at 4,000
    snapshots, growing with every commit); its catalog table, filtered by id in
    PostgreSQL, answers in about 2 ms."""
    sql: list[str] = []
    real = LakeStore.run

    def recorded(self, statement, *args, **kwargs):
        sql.append(statement)
        return real(self, statement, *args, **kwargs)

    monkeypatch.setattr(LakeStore, "run", recorded)
    with _open(lake_url) as writer, _open(lake_url) as reader:
        reader.search("anything", mode="keyword")
        writer.add_event("s", "user", "the port is now 8443")
        sql.clear()
        assert len(reader.search("port", mode="keyword")) == 1
    assert not [s for s in sql if "snapshots()" in s], sql
    assert [s for s in sql if "ducklake_snapshot_changes" in s], sql


_WRITER = """
import json, sys
import pytest
from child_process import expect, spawn
from nbmemory import Memory
url, writer, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
mem = Memory(url, embedder="hash")
print("ready", flush=True)
sys.stdin.readline()
ids = [
    mem.add_event(f"writer-{writer}", "user", f"writer {writer} note {i} tag w{writer}n{i}").id
    for i in range(count)
]
assert mem.flush(timeout=300)
print("ids " + json.dumps(ids), flush=True)
mem.close()
"""

_READER = """
import json, sys, time
import pytest
from child_process import expect, spawn
from nbmemory import Memory
url, total = sys.argv[1], int(sys.argv[2])
mem = Memory(url, embedder="hash")
print("ready", flush=True)
sys.stdin.readline()
calls, deadline, writers_done = 0, time.monotonic() + 900, False
while True:  # read while the writers write; once they are done, until all is here
    mem.get_context("reader", "which note did a writer leave?")
    calls += 1
    time.sleep(0.2)  # an agent's turns, not a busy loop taking the writers' CPU
    index = mem.core.indexes.vectors(mem.model_name)
    if len(index) >= total and len(mem.core.indexes.keywords()) >= total:
        break
    if not writers_done and time.monotonic() > deadline:  # a slow machine: wait for them
        sys.stdin.readline()
        writers_done, deadline = True, time.monotonic() + 300
    elif writers_done and time.monotonic() > deadline:
        break  # the counts below say what was missing
found = {
    tag: mem.search(tag, limit=1, mode="keyword")["content"].tolist()
    for tag in ("w0n0", "w1n%d" % (total // 4 - 1), "w2n7", "w3n%d" % (total // 8))
}
print("found " + json.dumps({
    "vectors": len(index), "rebuilds": index.rebuilds, "calls": calls,
    "foreign": mem.store.foreign_snapshots, "hits": found,
}), flush=True)
mem.close()
"""


def test_four_writers_and_a_reader_at_once_lose_and_repeat_nothing(lake_url: str) -> None:
    """4 processes x N add_event at once, and a reader calling get_context all along:
    exactly 4N events, every returned id present, and the reader's indexes, kept
    fresh by the change feed, find them all.  N is $NBMEMORY_LAKE_WRITES, 2,000 by
    default (CI's run: ~5 minutes on 2 cores); set it lower for a quick run."""
    count = int(os.environ.get("NBMEMORY_LAKE_WRITES", "2000"))
    with _open(lake_url):  # create the lake once, before the race
        pass
    writers = [spawn(_WRITER, lake_url, str(w), str(count)) for w in range(4)]
    reader = spawn(_READER, lake_url, str(4 * count))
    try:
        release_together([*writers, reader])
        returned = [json.loads(expect(w, "ids ")) for w in writers]
        reader.stdin.write("writers done\n")  # read only if the reader ran out of time
        reader.stdin.flush()
        seen = json.loads(expect(reader, "found "))
    finally:
        for child in [*writers, reader]:
            child.kill() if child.poll() is None else None
            child.wait()
    ids = [i for chunk in returned for i in chunk]
    assert len(ids) == len(set(ids)) == 4 * count
    with _open(lake_url) as mem:
        stored = mem.events()
        assert len(stored) == 4 * count
        assert set(stored["id"]) == set(ids)
        assert mem.store.fetchall("SELECT count(*), count(DISTINCT id) FROM event_vectors") == [
            (4 * count, 4 * count)
        ]
    assert seen["vectors"] == 4 * count
    assert seen["rebuilds"] == 1  # built once; everything after came through the feed
    assert seen["foreign"] > 0 and seen["calls"] > 1
    assert all(len(hit) == 1 for hit in seen["hits"].values()), seen["hits"]


def test_a_locomo_conversation_searches_the_same_on_a_lake_as_in_a_file(
    lake_url: str, locomo_dir, real_embedder, tmp_path
) -> None:
    from nbmemory.research.datasets import load_locomo, locomo_files

    path = locomo_files(locomo_dir)[0]
    with (
        Memory(str(tmp_path / "file.duckdb"), embedder=real_embedder) as on_file,
        Memory(lake_url, embedder=real_embedder) as on_lake,
    ):
        loaded = load_locomo(path, on_file)
        assert load_locomo(path, on_lake).event_ids == loaded.event_ids
        assert on_lake.store.fetchall("SELECT count(*) FROM event_vectors") == [
            (len(loaded.event_ids),)
        ]
        questions = loaded.queries()["question"].tolist()[:60]
        assert len(questions) == 60
        for question in questions:
            expected = on_file.search(question, limit=10, namespace=loaded.namespace)
            found = on_lake.search(question, limit=10, namespace=loaded.namespace)
            assert found["id"].tolist() == expected["id"].tolist(), question
        session = loaded.last_session
        for question in questions[:20]:
            assert (
                on_lake.get_context(session, question, namespace=loaded.namespace).ids
                == on_file.get_context(session, question, namespace=loaded.namespace).ids
            )


_UPSERTER = """
import sys
from nbmemory import Memory
mem = Memory(sys.argv[1], embedder="hash")
print("ready", flush=True)
sys.stdin.readline()
for i in range(int(sys.argv[3])):
    mem.set_fact("user", f"key {i % 5}", f"{sys.argv[2]} {i}")
    mem.add_allowed_prefix(f"cmd{i % 5}")
print("done", flush=True)
"""


def test_upserts_from_two_processes_at_once_keep_one_row_per_key(lake_url: str) -> None:
    """A lake has no unique keys: concurrent set_fact of the same keys must still leave
    one fact per key (the other writer's commit conflicts and its call runs again)."""
    with _open(lake_url):
        pass
    children = [spawn(_UPSERTER, lake_url, name, "30") for name in ("a", "b")]
    try:
        release_together(children)
        for child in children:
            expect(child, "done")
    finally:
        for child in children:
            child.kill() if child.poll() is None else None
            child.wait()
    with _open(lake_url) as mem:
        facts = mem.facts()
        assert sorted(facts["key"]) == [f"key {i}" for i in range(5)]
        # key 0 got 12 different values (6 from each writer): 11 were replaced, in order
        assert len(mem.fact_history("user", "key 0")) == 11
        assert facts.set_index("key").loc["key 0", "value"] in {"a 25", "b 25"}
        assert mem.allowed_prefixes() == [f"cmd{i}" for i in range(5)]


def test_magics_widgets_and_research_frames_work_on_a_lake(
    ip, lake_url: str, tiny_locomo_path, monkeypatch
) -> None:
    """``%config MemoryMagics.path`` and ``$NBMEMORY_PATH`` take the lake's URL, and the
    research tools read it like a file."""
    from notebook_shell import run

    from nbmemory.notebook.widgets import MemoryExplorer, ThresholdTuner
    from nbmemory.research.datasets import load_locomo
    from nbmemory.research.frames import memories_frame
    from nbmemory.research.thresholds import similarity_frame, threshold_sweep

    run(ip, f"%config MemoryMagics.path = {lake_url!r}")
    run(ip, "%%remember --session nb\nI keep my bike in the blue shed")
    assert run(ip, "%recall bike shed")["content"].tolist()[0] == "I keep my bike in the blue shed"
    assert "blue shed" in str(run(ip, "%context --session nb where is the bike?"))
    memory = ip.magics_manager.registry["MemoryMagics"].memory
    assert isinstance(memory.store, LakeStore)
    loaded = load_locomo(tiny_locomo_path, memory)
    assert memory.flush(timeout=30)
    frame = memories_frame(memory, namespace=loaded.namespace)
    assert len(frame) == len(loaded.event_ids)
    questions = loaded.queries()
    sims = similarity_frame(
        memory,
        questions["question"].tolist(),
        namespace=loaded.namespace,
        relevant=questions["relevant_ids"].tolist(),
    )
    assert sims["relevant"].any() and len(threshold_sweep(sims)) > 0
    tuner = ThresholdTuner(memory, loaded)
    assert tuner.labelled
    explorer = MemoryExplorer(memory, namespace=loaded.namespace)
    assert len(explorer.frame) == min(len(loaded.event_ids), 25)
    run(ip, "%unload_ext nbmemory")
    monkeypatch.setenv("NBMEMORY_PATH", lake_url)
    with Memory(embedder="hash") as from_env:
        assert isinstance(from_env.store, LakeStore)
        assert "I keep my bike in the blue shed" in from_env.events()["content"].tolist()


def test_another_writers_memory_is_found_by_the_next_call(lake_url: str) -> None:
    """Freshness as docs/lake.md states it: by keyword in the very next call of another
    Memory (its own DuckDB, as another host's), by meaning once the writer's vector
    commit landed (``flush()``)."""
    with _open(lake_url) as a, _open(lake_url) as b:
        b.search("warm up", limit=1)  # b's indexes are built before a writes
        for n in range(5):
            token = f"codeword{n}x{os.getpid()}"
            a.add_event("s", "user", f"the code word is {token}")
            assert b.search(token, limit=1, mode="keyword")["content"].tolist() == [
                f"the code word is {token}"
            ]
        assert a.flush(timeout=30)
        assert b.search("codeword3x", limit=5, mode="vector").shape[0] == 5
        assert b.store.foreign_snapshots > 0


def test_purge_on_a_lake_without_consent_to_expire_snapshots_deletes_nothing(
    ip, lake_url: str, capsys
) -> None:
    """Purge on a lake expires every older snapshot (time travel to them ends): it
    runs only when asked to, and the magic, which cannot ask, refuses before deleting."""
    from notebook_shell import one_line_usage_error, run

    from nbmemory.errors import InvalidInput

    with _open(lake_url) as mem:
        mem.add_event("s", "user", "forget me")
        with pytest.raises(InvalidInput, match="expire_snapshots=True"):
            mem.purge()
    run(ip, f"%config MemoryMagics.path = {lake_url!r}")
    message = one_line_usage_error(ip, "%memory forget --all --purge", capsys)
    assert "expire_snapshots" in message and "time travel" in message
    assert run(ip, "%recall forget me")["content"].tolist() == ["forget me"]  # still there


def test_long_memories_are_passages_on_a_lake_too(lake_url: str) -> None:
    from test_long_memories import TAIL_FACTS, long_message

    with _open(lake_url) as mem:
        text = long_message(0, TAIL_FACTS[0][0])
        event = mem.add_event("s", "assistant", text)
        mem.add_event("s", "user", "a short one")
        assert mem.flush(timeout=60)
        rows = mem.store.run(
            "SELECT passage, span_start, span_stop FROM lake.main.event_vectors WHERE id = ?"
            " ORDER BY passage",
            [event.id],
        )
        assert len(rows) > 3 and [r[0] for r in rows] == list(range(len(rows)))
        assert rows[0][1] == 0 and rows[-1][2] == len(text)
        found = mem.search(TAIL_FACTS[0][1], limit=2, mode="vector").set_index("id")
        assert found.loc[event.id, "passage_stop"] == len(text)
    with _open(lake_url) as again:  # from the lake: the index reads every passage
        found = again.search(TAIL_FACTS[0][1], limit=2, mode="vector").set_index("id")
        assert found.loc[event.id, "passage_stop"] == len(text)
        again.delete(event.id)
        assert again.store.run(
            "SELECT count(*) FROM lake.main.event_vectors WHERE id = ?", [event.id]
        ) == [(0,)]


def test_a_lake_of_schema_version_2_gets_the_passage_columns(lake_url: str) -> None:
    with _open(lake_url) as mem:
        mem.add_event("s", "user", "made before passages")
        assert mem.flush(timeout=30)
        for column in ("passage", "span_start", "span_stop"):  # as an older nbmemory made it
            mem.store.run(f"ALTER TABLE lake.main.event_vectors DROP COLUMN {column}")
        mem.store.run(
            "DELETE FROM lake.main.nbmemory_migrations WHERE name = 'm005_vector_passages'"
        )
        mem.store.run("UPDATE lake.main.nbmemory_meta SET value = '2' WHERE key = 'schema_version'")
    with _open(lake_url) as mem:
        assert mem.status()["schema_version"] == 4  # and every later upgrade
        assert mem.search("before passages", limit=1)["content"].iloc[0] == "made before passages"
        mem.add_event("s", "user", "made after")
        assert mem.flush(timeout=30)
        assert mem.store.run("SELECT count(*), count(passage) FROM lake.main.event_vectors") == [
            (2, 0)
        ]


def test_a_lake_of_schema_version_3_gets_the_archive_and_compacts(lake_url: str) -> None:
    """000: consolidation "comprime conversas antigas em resumos ... reduzindo
    armazenamento e uso da janela de contexto"; on a lake as on a file: a lake made
    before m006 gets the archive tables, then a compacting run moves the originals
    (with their vectors) there, a restore brings them back, an erasure empties it."""
    import datetime as dt

    old = dt.datetime(2024, 1, 1)
    with _open(lake_url, background_consolidation=False) as mem:
        mem.start_session("lake-user", session_id="s")
        ids = [
            mem.add_event("s", "user", f"the deploy day is Friday, note {i}", created_at=old).id
            for i in range(3)
        ]
        assert mem.flush(timeout=30)
        for table in ("event_archive", "event_vector_archive"):  # as an older nbmemory left it
            mem.store.run(f"DROP TABLE lake.main.{table}")
        mem.store.run("DELETE FROM lake.main.nbmemory_migrations WHERE name = 'm006_event_archive'")
        mem.store.run("UPDATE lake.main.nbmemory_meta SET value = '3' WHERE key = 'schema_version'")
    with _open(lake_url, background_consolidation=False) as mem:
        assert mem.status()["schema_version"] == 4
        vectors = mem.store.run("SELECT id, embedding FROM lake.main.event_vectors ORDER BY id")
        report = mem.consolidation.run(compact=True, older_than_hours=1)
        assert report.archived == 3
        assert set(mem.events()["kind"]) == {"summary"}
        assert sorted(mem.consolidation.archive()["id"]) == sorted(ids)
        assert mem.store.run("SELECT count(*) FROM lake.main.event_vector_archive") == [(3,)]
        assert mem.consolidation.restore(report.summary_ids[0]) == 3
        assert sorted(mem.events(kind="message")["id"]) == sorted(ids)
        assert (
            mem.store.run(
                "SELECT id, embedding FROM lake.main.event_vectors WHERE id IN"
                " (SELECT unnest(?::VARCHAR[])) ORDER BY id",
                [ids],
            )
            == vectors
        )
        for i in range(2):
            mem.add_event("s", "user", f"another old note {i}", created_at=old)
        assert mem.flush(timeout=30)
        assert mem.consolidation.run(compact=True, older_than_hours=1).archived == 2
        # 3 restored, their summary, 2 archived, theirs
        assert mem.forget_user("lake-user")["events"] == 7
        assert mem.store.run("SELECT count(*) FROM lake.main.event_archive") == [(0,)]
        assert mem.store.run("SELECT count(*) FROM lake.main.event_vector_archive") == [(0,)]
