"""Trust: no stale vectors, no half-reported writes, no foreign files touched,
clear errors instead of raw ones.  Processes are real processes."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

import duckdb
import numpy as np
import pytest
from child_process import expect, spawn
from disks import fill as _fill

from nbmemory import InvalidInput, Memory, StoreError, StoreLocked
from nbmemory.retrieval.embedders import HashEmbedder
from nbmemory.store.migrations import SCHEMA_VERSION

#: ``crash``: run again under the oldest DuckDB the package allows (see ``.ci/run``).
pytestmark = [pytest.mark.timeout(600), pytest.mark.crash, pytest.mark.slow]

HANG = 180


def _digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# -- 1. a vector belongs to the exact text it was computed from -------------------------
SLOW_KERNEL = """
import sys
from nbmemory import Memory
from nbmemory.retrieval.embedders import HashEmbedder

def say(line):  # one write per line: two threads' print() calls interleave words
    sys.stdout.write(line + "\\n")
    sys.stdout.flush()

class Slow(HashEmbedder):
    # embeds only when the test says so (a line on stdin)
    def embed(self, texts):
        say("embedding")
        sys.stdin.readline()
        return super().embed(texts)

mem = Memory(sys.argv[1], embedder=Slow(384), shared=True, background_consolidation=False)
memory = mem.add_memory("the launch code is alpha")
say("id " + memory.id)
mem.flush()
say("flushed")
mem.close()
"""


def test_a_vector_computed_for_old_text_is_never_written_over_new_text(tmp_path) -> None:
    path = str(tmp_path / "stale.duckdb")
    Memory(path, embedder="hash", background_consolidation=False).close()
    kernel_a = spawn(SLOW_KERNEL, path)
    # A's worker may say "embedding" before its main thread says the id: take both
    # lines in either order (expect() skips lines, so "embedding" could be lost); a CI
    # run once read "idembedding" when each was print()ed word by word
    said = dict(kernel_a.stdout.readline().strip().partition(" ")[::2] for _ in range(2))
    assert set(said) == {"id", "embedding"}, said
    memory_id = said["id"]  # ... and A's worker holds the old text's batch
    new_text = "we moved the meeting to thursday"
    with Memory(path, embedder="hash", shared=True, background_consolidation=False) as b:
        b.update_memory(memory_id, content=new_text)
        assert b.flush(timeout=HANG)
        kernel_a.stdin.write("go\n")  # now A writes the vector of the old text
        kernel_a.stdin.flush()
        expect(kernel_a, "flushed")
        assert kernel_a.wait(timeout=HANG) == 0, kernel_a.stderr.read()
        stored = b.store.fetchone("SELECT embedding FROM event_vectors WHERE id = ?", [memory_id])[
            0
        ]
        expected = HashEmbedder(384).embed([new_text])[0]
        assert np.allclose(stored, expected, atol=1e-6)  # the new text's vector, not alpha's
        hits = b.search_memories_by_similarity("launch code alpha", similarity_threshold=0.5)
        assert hits.empty


# -- 2. a file from a newer nbmemory is refused ---------------------------------------------
def test_a_newer_schema_is_refused_and_left_as_it_is(store_path) -> None:
    with Memory(store_path, embedder="hash") as mem:
        mem.add_event("s", "user", "written by an older nbmemory")
    con = duckdb.connect(store_path)
    con.execute("UPDATE nbmemory_meta SET value = '7' WHERE key = 'schema_version'")
    con.close()
    before = _digest(store_path)
    with pytest.raises(StoreError, match=f"schema version 7.*reads version {SCHEMA_VERSION}"):
        Memory(store_path, embedder="hash")
    assert _digest(store_path) == before
    with Memory(store_path, embedder="hash", read_only=True) as reader:  # reads still work
        assert reader.events()["content"].tolist() == ["written by an older nbmemory"]
    con = duckdb.connect(store_path, read_only=True)
    assert (
        con.execute("SELECT value FROM nbmemory_meta WHERE key = 'schema_version'").fetchone()[0]
        == "7"
    )
    con.close()


# -- 3. another application's DuckDB file is never changed ------------------------------------
def _foreign_file(path: str, events_columns: str | None) -> None:
    con = duckdb.connect(path)
    con.execute("CREATE TABLE orders (id INTEGER, item VARCHAR)")
    con.execute("INSERT INTO orders VALUES (1, 'tea')")
    if events_columns:
        con.execute(f"CREATE TABLE events ({events_columns})")
        con.execute("INSERT INTO events VALUES (1, 'clicked')")
    con.close()


@pytest.mark.parametrize("events_columns", [None, "id INTEGER, what VARCHAR"])
def test_another_applications_file_is_refused_without_a_byte_written(
    store_path, events_columns
) -> None:
    _foreign_file(store_path, events_columns)
    before = _digest(store_path)
    with pytest.raises(StoreError, match="another application's DuckDB file.*nothing was changed"):
        Memory(store_path, embedder="hash")
    with pytest.raises(StoreError, match="not an nbmemory store"):
        Memory(store_path, embedder="hash", read_only=True)
    assert _digest(store_path) == before
    con = duckdb.connect(store_path)  # the other application goes on as before
    con.execute("INSERT INTO orders VALUES (2, 'coffee')")
    if events_columns:
        con.execute("INSERT INTO events VALUES (2, 'scrolled')")
    assert {r[0] for r in con.execute("SHOW TABLES").fetchall()} == (
        {"orders", "events"} if events_columns else {"orders"}
    )
    con.close()


def test_adopt_adds_nbmemory_beside_another_application_unless_a_name_clashes(tmp_path) -> None:
    beside = str(tmp_path / "beside.duckdb")
    _foreign_file(beside, None)
    with Memory(beside, embedder="hash", adopt=True) as mem:
        mem.add_event("s", "user", "now beside the orders")
    with Memory(beside, embedder="hash") as again:  # ours from now on
        assert len(again.events()) == 1
    clash = str(tmp_path / "clash.duckdb")
    _foreign_file(clash, "id INTEGER, what VARCHAR")
    before = _digest(clash)
    with pytest.raises(StoreError, match="its own events table"):
        Memory(clash, embedder="hash", adopt=True)
    assert _digest(clash) == before


def test_an_empty_duckdb_file_becomes_a_store(store_path) -> None:
    duckdb.connect(store_path).close()
    with Memory(store_path, embedder="hash") as mem:
        assert mem.add_event("s", "user", "hello").id


# -- 8. opening a shared store while another kernel holds its turn ----------------------------
HOLDER = """
import sys
from nbmemory import Memory
mem = Memory(sys.argv[1], embedder="hash", shared=True, background_consolidation=False)
with mem.store.locked():  # hold the turn until told
    print("holding", flush=True)
    sys.stdin.readline()
mem.close()
"""


def test_opening_a_shared_store_during_another_kernels_turn_says_it_is_busy(
    store_path, monkeypatch
) -> None:
    Memory(store_path, embedder="hash", shared=True).close()
    holder = spawn(HOLDER, store_path)
    try:
        expect(holder, "holding")
        monkeypatch.setenv("NBMEMORY_LOCK_TIMEOUT", "0.3")
        with pytest.raises(StoreLocked, match="busy"):
            Memory(store_path, embedder="hash", shared=True)
    finally:
        holder.stdin.write("done\n")
        holder.stdin.flush()
        assert holder.wait(timeout=HANG) == 0, holder.stderr.read()


# -- 4. an import is validated like a write ----------------------------------------------
def _b64(values) -> str:
    import base64

    return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode()


BAD_ROWS = {
    "importance NaN": lambda e: e.update(importance=float("nan")),
    "importance inf": lambda e: e.update(importance=float("inf")),
    "importance -inf": lambda e: e.update(importance=float("-inf")),
    "importance 5": lambda e: e.update(importance=5),
    "importance -1": lambda e: e.update(importance=-1),
    "importance text": lambda e: e.update(importance="high"),
    "unknown role": lambda e: e.update(role="wizard"),
    "empty id": lambda e: e.update(id=""),
    "blank session": lambda e: e.update(session_id="  "),
    "metadata not JSON": lambda e: e.update(metadata="{not json"),
    "metadata a list": lambda e: e.update(metadata="[1, 2]"),
    "content over the limit": lambda e: e.update(content="x" * 1_000_001),
    "content a number": lambda e: e.update(content=42),
    "lone surrogate": lambda e: e.update(content="a \udc80 b"),
    "vector of another dimension": lambda e: e.update(
        embedding=_b64(np.ones(10)), embedding_dim=10
    ),
    "NaN vector": lambda e: e.update(embedding=_b64(np.full(384, np.nan)), embedding_dim=384),
    "zero vector": lambda e: e.update(embedding=_b64(np.zeros(384)), embedding_dim=384),
    "infinite vector": lambda e: e.update(embedding=_b64(np.full(384, np.inf)), embedding_dim=384),
    "dimension lies": lambda e: e.update(embedding_dim=383),
    "vector without model": lambda e: e.update(embedding_model=None),
    "bad created_at": lambda e: e.update(created_at="yesterday"),
    "year 10000": lambda e: e.update(created_at="9999-12-31T23:00:00-05:00"),
}


@pytest.mark.parametrize("name", sorted(BAD_ROWS))
def test_a_bad_import_row_refuses_the_file_and_names_the_row(mem, tmp_path, name) -> None:
    mem.add_events([{"session_id": "s", "role": "user", "content": f"row {i}"} for i in range(3)])
    assert mem.flush(timeout=HANG)
    export = tmp_path / "export.json"
    mem.export_json(export)
    document = json.loads(export.read_text())
    BAD_ROWS[name](document["events"][1])
    export.write_text(json.dumps(document))
    before = mem.store.events.count()
    with pytest.raises(InvalidInput, match=r"events\[1\]"):
        mem.import_json(export, namespace="copy")
    assert mem.store.events.count() == before  # nothing of the file went in
    # and the store stays whole: export and filtered vector search still work
    mem.export_json(tmp_path / "again.json")
    assert len(mem.search("row", mode="vector", session_id="s", limit=3)) == 3


# -- 5. one call, one turn: all or nothing -------------------------------------------------
def _holding(store_path: str) -> subprocess.Popen:
    holder = spawn(HOLDER, store_path)
    expect(holder, "holding")
    return holder


def _release(holder: subprocess.Popen) -> None:
    holder.stdin.write("done\n")
    holder.stdin.flush()
    assert holder.wait(timeout=HANG) == 0, holder.stderr.read()


def test_a_call_that_cannot_get_its_turn_stores_nothing(store_path, monkeypatch) -> None:
    monkeypatch.setenv("NBMEMORY_LOCK_TIMEOUT", "0.3")
    with Memory(store_path, embedder="hash", shared=True, background_consolidation=False) as mem:
        first = mem.add_event("s", "user", "before the other kernel's turn")
        holder = _holding(store_path)
        try:
            with pytest.raises(StoreLocked):
                mem.add_events([{"session_id": "s", "role": "user", "content": "refused"}])
            # add_event takes no turn: its row waits in the journal for the next one
            journalled = mem.add_event("s", "user", "while the other kernel holds the file")
        finally:
            _release(holder)
        second = mem.add_event("s", "user", "after its turn")
        assert mem.flush(timeout=HANG)
        stored = [first.id, journalled.id, second.id]
        assert mem.events()["id"].tolist() == stored
        audited = [i for ids in mem.audit_log(action="add")["target_ids"] for i in ids]
        assert sorted(audited) == sorted(stored)  # each event audited once


# -- 6. the embedding worker retries a busy file and flush says so --------------------------
def test_the_worker_retries_when_the_file_is_busy_and_flush_waits(store_path, monkeypatch):
    from fakes import GatedEmbedder

    monkeypatch.setenv("NBMEMORY_LOCK_TIMEOUT", "0.2")
    embedder = GatedEmbedder()
    with Memory(store_path, embedder=embedder, shared=True, background_consolidation=False) as mem:
        (event_id,) = mem.add_events(
            [{"session_id": "s", "role": "user", "content": "embedded once the file is free"}]
        )
        embedder.entered.wait(HANG)
        holder = _holding(store_path)
        try:
            embedder.gate.set()  # the vector is ready; the file is not
            deadline = time.monotonic() + HANG
            while mem.worker.retries == 0 and time.monotonic() < deadline:
                time.sleep(0.01)  # polls a condition; the holder keeps the file meanwhile
            assert mem.worker.retries >= 1
            assert mem.flush(timeout=0.5) is False  # not written yet, and flush says so
        finally:
            _release(holder)
        assert mem.flush(timeout=HANG) is True
        stored = mem.store.fetchone("SELECT embedding FROM event_vectors WHERE id = ?", [event_id])
        assert stored is not None


# -- 10. every text a user or agent hands in is redacted before it is stored ------------------
SECRET = "hunter2-swordfish"


def _file_bytes(path: str) -> bytes:
    data = Path(path).read_bytes()
    wal = Path(path + ".wal")
    return data + (wal.read_bytes() if wal.exists() else b"")


def test_no_field_keeps_a_secret_in_the_file(store_path, tmp_path) -> None:
    said = f"password: {SECRET}"
    agents = tmp_path / "AGENTS.md"
    agents.write_text(f"# Deploy (password: {SECRET})\n\nUse the staging cluster.\n")
    with Memory(store_path, embedder="hash", background_consolidation=False) as mem:
        mem.add_event("s", "user", said, metadata={"note": said})
        mem.add_event(
            "s", "tool", "called login", tool_name="login",
            tool_calls={"args": {"password": SECRET}}, metadata={"args": {"password": SECRET}},
        )  # fmt: skip
        mem.add_event("s", "tool", "fetched", tool_name="fetch")
        assert mem.suggest_next_tool("login") is not None  # learnt from the tool events
        mem.add_macro("deploy", "notify", {"password": SECRET})
        mem.sync_agents_md(agents)
        mem.schedule_task(f"rotate password={SECRET}", "every day at 9am", f"use password={SECRET}")
        sid = mem.start_session("u", state={"creds": said}).session_id
        mem.save_session_state(sid, {"more": said})
        mem.close_session(sid, state={"last": said})
        fact = mem.set_fact("creds", f"password={SECRET}", said)
        assert mem.get_fact("creds", f"password={SECRET}")["id"] == fact["id"]
        memory = mem.add_memory("placeholder")
        mem.update_memory(memory.id, content=said, metadata={"why": said})
        mem.configure(max_memory_tokens=1000)
        mem.flush()
        assert all(SECRET not in str(v) for v in mem.audit_log()["details"])
        assert SECRET not in json.dumps(mem.suggest_next_tool("login"))
        mem.sync_agents_md(agents)  # the second sync finds every section unchanged
        assert mem.audit_log(action="agents_md_sync").shape[0] == 1
    assert SECRET.encode() not in _file_bytes(store_path)


# -- 11. what is forgotten can be erased from the file's bytes ---------------------------------
def test_delete_leaves_old_bytes_and_purge_erases_them(store_path) -> None:
    gone = b"launch-code-zebra-4471"
    changed = b"meeting-room-orchid-9"
    with Memory(store_path, embedder="hash", background_consolidation=False) as mem:
        keep = mem.add_event("s", "user", "the plan stays")
        doomed = mem.add_event("s", "user", "the launch code is launch-code-zebra-4471")
        memory = mem.add_memory("we meet in meeting-room-orchid-9")
        mem.set_fact("office", "room", "first floor")
        mem.flush()
        mem.delete(doomed.id)
        mem.update_memory(memory.id, content="we meet online now")
    for _ in range(2):  # plain forgetting: gone from every query, not from the disk
        Memory(store_path, embedder="hash", background_consolidation=False).close()
    assert gone in _file_bytes(store_path) or changed in _file_bytes(store_path)
    with Memory(store_path, embedder="hash", background_consolidation=False) as mem:
        result = mem.purge()
        assert result["bytes_after"] > 0
        assert gone not in _file_bytes(store_path) and changed not in _file_bytes(store_path)
        # the store is whole and usable after the rewrite
        assert set(mem.events()["id"]) == {keep.id, memory.id}
        assert mem.search("plan", limit=1)["id"].iloc[0] == keep.id
        assert mem.set_fact("office", "desk", "by the window")["id"] > 1
        mem.add_event("s", "user", "written after the purge")
        assert mem.audit_log(action="purge").shape[0] == 1
    with Memory(store_path, embedder="hash", background_consolidation=False) as again:
        assert len(again.events()) == 3


def test_the_cli_purges_a_store(store_path) -> None:
    from nbmemory.cli import main

    with Memory(store_path, embedder="hash", background_consolidation=False) as mem:
        doomed = mem.add_event("s", "user", "cli-secret-walrus-31")
        mem.delete(doomed.id)
    assert main(["memory", "purge", "--store", store_path, "--embedder", "hash"]) == 0
    assert b"cli-secret-walrus-31" not in _file_bytes(store_path)


# -- 12. a full disk: one clear error, nothing half-stored, reopened when space is back -------


def test_a_full_disk_is_one_clear_error_and_the_store_recovers(small_disk) -> None:
    from nbmemory.errors import DiskFull

    path = str(small_disk / "agent.duckdb")
    with Memory(path, embedder="hash", background_consolidation=False) as mem:
        kept = [mem.add_event("s", "user", f"before {i}").id for i in range(20)]
        assert mem.flush(timeout=HANG)
        filler = _fill(small_disk)
        failures = []
        for i in range(30):
            try:
                kept.append(mem.add_event("s", "user", f"during {i} " + "x" * 8000).id)
            except DiskFull as exc:
                failures.append(exc)
        assert failures, "the disk never filled"
        assert "disk holding the store" in str(failures[0]) and "full" in str(failures[0])
        filler.unlink()
        kept.append(mem.add_event("s", "user", "after the space came back").id)
        assert mem.events()["id"].tolist() == kept  # every acknowledged row, nothing else
        assert mem.flush(timeout=HANG)
    with Memory(path, embedder="hash", background_consolidation=False) as again:
        assert again.events()["id"].tolist() == kept


def test_opening_a_store_on_a_full_disk_works_and_reads(small_disk) -> None:
    path = str(small_disk / "agent.duckdb")
    with Memory(path, embedder="hash", background_consolidation=False) as mem:
        mem.add_event("s", "user", "written while there was room")
    filler = _fill(small_disk)
    try:
        with Memory(path, embedder="hash", background_consolidation=False) as mem:
            assert mem.events()["content"].tolist() == ["written while there was room"]
    finally:
        filler.unlink()


@pytest.mark.parametrize("free", [0, 4096, 10_000])
def test_a_full_disk_in_shared_mode_loses_no_event_it_acknowledged(small_disk, free) -> None:
    """Shared mode appends each event to a journal beside the store.  On a disk with
    a few kB left, ``os.write`` wrote part of the line and ``add_event`` returned as
    if the event were safe; the cut line then ran into the next one, and the next
    drain dropped both: acknowledged events lost, no error anywhere.  With no room
    at all the call raised the OS's own ``OSError``."""
    from nbmemory.errors import DiskFull

    path = str(small_disk / "agent.duckdb")
    text = "log line: ERROR db timeout after 30s; retrying " * 125  # 6 kB, a journal line
    with Memory(path, embedder="hash", shared=True, background_consolidation=False) as mem:
        kept = [mem.add_event("s", "user", "before the disk filled").id]
        assert mem.flush(timeout=HANG)
        filler = _fill(small_disk)
        os.truncate(filler, max(filler.stat().st_size - free, 0))
        failures = []
        for i in range(4):
            try:
                kept.append(mem.add_event("s", "tool", f"acked {i} {text}", tool_name="sh").id)
            except DiskFull as exc:
                failures.append(exc)
        assert failures, "the disk never filled"
        assert "\n" not in str(failures[0]) and "disk holding the store" in str(failures[0])
        filler.unlink()
        kept.append(mem.add_event("s", "user", "after the space came back").id)
        assert mem.flush(timeout=HANG)
        assert mem.events()["id"].tolist() == kept  # every acknowledged row, once
    with Memory(path, embedder="hash", background_consolidation=False) as again:
        assert again.events()["id"].tolist() == kept


# -- 13. a damaged file is named as damaged, with the way back ----------------------------------
def _stored(store_path: str) -> bytes:
    with Memory(store_path, embedder="hash", background_consolidation=False) as mem:
        mem.add_events(
            [
                {"session_id": "s", "role": "user", "content": f"row {i} " + "y" * 300}
                for i in range(3000)
            ]
        )
        mem.flush()
    return Path(store_path).read_bytes()


@pytest.mark.parametrize("cut", [0.9, 0.7, 0.5, 0.002])
def test_a_truncated_file_is_refused_at_open_as_damaged(store_path, cut) -> None:
    data = _stored(store_path)
    Path(store_path).write_bytes(data[: int(len(data) * cut)])
    with pytest.raises(StoreError, match="is damaged.*restore into a new file from an export"):
        Memory(store_path, embedder="hash")


def test_a_cut_at_a_block_boundary_into_the_rows_is_refused(store_path) -> None:
    data = _stored(store_path)
    header, block = 3 * 4096, 262144
    blocks = (len(data) - header) // block
    Path(store_path).write_bytes(data[: header + (blocks // 2) * block])
    # DuckDB 2 opens the file and our block check names the cut; 1.5 fails reading it
    with pytest.raises(StoreError, match="is damaged"):
        Memory(store_path, embedder="hash")


def test_a_file_its_last_checkpoint_shrank_is_not_taken_for_a_cut_one(store_path) -> None:
    """DuckDB writes the block count into the header, then may give the free blocks at
    the end back to the file system: the header then counts more blocks than the file
    holds, and the file is whole."""
    with Memory(store_path, embedder="hash", background_consolidation=False) as mem:
        mem.add_events([{"session_id": "s", "role": "user", "content": "kept"}])
    con = duckdb.connect(store_path)  # another program, using the file for a while
    con.execute("CREATE TABLE scratch AS SELECT range AS i, random() AS r FROM range(3000000)")
    con.execute("CHECKPOINT")
    con.execute("DROP TABLE scratch")
    con.execute("CHECKPOINT")
    con.close()
    con = duckdb.connect(store_path, read_only=True)
    counted = con.execute("PRAGMA database_size").fetchall()[0][3]
    con.close()
    assert Path(store_path).stat().st_size < 3 * 4096 + counted * 262144  # the case at hand
    with Memory(store_path, embedder="hash", background_consolidation=False) as mem:
        assert mem.search("kept", limit=1)["content"].tolist() == ["kept"]


@pytest.mark.parametrize("span", [(100, 200), (4096, 4196)])
def test_a_corrupt_header_is_refused_as_damaged_or_read_whole(store_path, span) -> None:
    """Zeroed header bytes: refused as damaged, or -- where this DuckDB does not use
    them (1.5 reads no checksum over bytes 100-200) -- every row read as written."""
    data = bytearray(_stored(store_path))
    data[span[0] : span[1]] = b"\0" * (span[1] - span[0])
    Path(store_path).write_bytes(bytes(data))
    try:
        mem = Memory(store_path, embedder="hash")
    except StoreError as exc:
        assert "is damaged" in str(exc)
    else:
        with mem:
            assert duckdb.__version__.startswith("1.") and span == (100, 200)
            assert len(mem.events()) == 3000


# -- 14. odd input that used to give raw errors ----------------------------------------------
def test_odd_input_gets_clear_errors(mem, tmp_path) -> None:
    with pytest.raises(InvalidInput, match="created_at .* is outside the years 1-9999"):
        mem.add_event("s", "user", "late", created_at="9999-12-31T23:00:00-05:00")
    with pytest.raises(InvalidInput, match="4,097 bytes, over the 4,096 bytes limit"):
        mem.add_event("s" * 4097, "user", "long session name")
    export = tmp_path / "surrogate.json"
    mem.add_event("s", "user", "a good row")
    mem.export_json(export)
    document = json.loads(export.read_text())
    document["events"][0]["content"] = "bad \udc80 text"
    export.write_text(json.dumps(document))
    with pytest.raises(InvalidInput, match=r"events\[0\].*lone surrogate"):
        mem.import_json(export, namespace="other")
    assert mem.events(namespace="other").empty


IMPORTER = """
import sys
from nbmemory import Memory
mem = Memory(sys.argv[1], embedder="hash", shared=True, background_consolidation=False)
print("ready", flush=True)
sys.stdin.readline()
print("result", mem.import_json(sys.argv[2])["events_added"], flush=True)
mem.close()
"""


def test_three_shared_kernels_importing_one_file_add_it_once(store_path, tmp_path) -> None:
    export = tmp_path / "export.json"
    with Memory(str(tmp_path / "source.duckdb"), embedder="hash") as source:
        source.add_events(
            [{"session_id": "s", "role": "user", "content": f"e{i}"} for i in range(300)]
        )
        source.export_json(export)
    Memory(store_path, embedder="hash", shared=True).close()
    kernels = [spawn(IMPORTER, store_path, str(export)) for _ in range(3)]
    for kernel in kernels:
        expect(kernel, "ready")
    for kernel in kernels:
        kernel.stdin.write("go\n")
        kernel.stdin.flush()
    added = [int(expect(kernel, "result ")) for kernel in kernels]
    for kernel in kernels:
        assert kernel.wait(timeout=HANG) == 0, kernel.stderr.read()
    assert sorted(added) == [0, 0, 300]
    with Memory(store_path, embedder="hash", shared=True) as mem:
        assert len(mem.events()) == 300


# -- 15. huge vector values are compared like any others ------------------------------------------
def test_vectors_near_the_float32_limit_keep_their_similarity(store_path) -> None:
    def huge(texts):
        return np.full((len(texts), 8), 1e38, dtype=np.float32)

    with Memory(store_path, embedder=huge, background_consolidation=False) as mem:
        mem.add_event("s", "user", "enormous")
        mem.flush()
        hits = mem.search("enormous", mode="vector")
        assert hits["similarity"].iloc[0] == pytest.approx(1.0)
        sql = mem.store.vectors.similar(
            np.full(8, 1e38, np.float32), mem.model_name, limit=1, namespace="default"
        )
        assert sql["similarity"].iloc[0] == pytest.approx(1.0)


def _unused() -> None:  # keeps the imports every later section uses
    _ = InvalidInput


def test_bytes_past_the_counted_blocks_are_not_damage(store_path) -> None:
    """A checkpoint killed midway has written part of a new block past the ones its
    last header counts, and no new header: DuckDB opens such a file as it was.  It
    was refused as "ends inside a block" (a kill at 0.1 s into opening a new store,
    1 time in 40 on duckdb 1.5.5)."""
    _stored(store_path)
    with Path(store_path).open("ab") as handle:
        handle.write(os.urandom(65536))  # a quarter of a block, never referenced
    with Memory(store_path, embedder="hash", background_consolidation=False) as mem:
        assert len(mem.events()) == 3000
