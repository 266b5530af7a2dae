"""Consolidation that compacts (issue 38, source 000: the Rust agent's state and memory).

000, "Consolidação de Memória": "Uma tarefa em segundo plano roda a cada
consolidation_interval_hours (padrão 6). Ela comprime conversas antigas em resumos
usando o modelo fast, reduzindo armazenamento e uso da janela de contexto." (a
background task every 6 hours compresses old conversations into summaries,
reducing storage and context-window use).  With ``compact=True`` the originals
leave the conversation for an archive: searches and contexts see the summary; the
archive gives them back (``restore``) until its retention, or an erasure, deletes
them; every step is audited.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import numpy as np
import pytest

from nbmemory import InvalidInput, Memory
from nbmemory.config import Settings

NOW = dt.datetime(2024, 5, 8, 12, 0)
OLD = NOW - dt.timedelta(hours=10)
SECRET = "zqx-compact-7731"
CONVERSATION = [
    ("user", f"The vault code word is {SECRET}, keep it in mind."),
    ("assistant", "Understood, the vault code word is noted for later."),
    ("user", "We deploy the robot fleet software on Fridays."),
    ("assistant", "Fridays it is: the fleet deploys at the end of the week."),
]


def _seed(mem: Memory, session: str = "s1") -> list[str]:
    return [
        mem.add_event(session, role, text, created_at=OLD + dt.timedelta(minutes=i)).id
        for i, (role, text) in enumerate(CONVERSATION)
    ]


def _vectors(mem: Memory, ids: list[str]) -> dict[tuple, bytes]:
    rows = mem.store.run(
        "SELECT id, model, passage, embedding FROM event_vectors"
        " WHERE id IN (SELECT unnest(?::VARCHAR[]))",
        [ids],
    )
    return {(i, m, p): np.asarray(v, dtype=np.float32).tobytes() for i, m, p, v in rows}


def _ids(context) -> list[str]:
    return [item.id for item in context]


def _options(**extra) -> dict:
    return dict(embedder="hash", background_consolidation=False, **extra)


def test_compaction_replaces_the_originals_by_their_summary_everywhere(store_path) -> None:
    """000: compresses old conversations into summaries, "reducing storage and
    context-window use": after a compacting run the originals are gone from the
    events, search, the context and working memory; the summary is there."""
    with Memory(store_path, **_options()) as mem:
        ids = _seed(mem)
        mem.add_event("s1", "user", "what do we deploy this week?")  # recent: stays
        mem.flush()
        assert set(_ids(mem.get_context("s1", "vault code word"))) & set(ids)  # cached
        before = _vectors(mem, ids)
        assert len(before) == len(ids)

        report = mem.consolidation.run(now=NOW, compact=True)

        assert report.consolidated == report.archived == 4 and len(report.summary_ids) == 1
        summary = report.summary_ids[0]
        events = mem.events(session_id="s1")
        assert not events["id"].isin(ids).any()
        assert sorted(events["kind"]) == ["message", "summary"]
        assert mem.status()["events"] == 2 and mem.status()["archived"] == 4
        hits = mem.search("vault code word", limit=10)
        assert not hits["id"].isin(ids).any() and summary in set(hits["id"])
        context = set(_ids(mem.get_context("s1", "vault code word")))
        assert not context & set(ids) and summary in context
        assert not mem.recent("s1")["id"].isin(ids).any()
        archived = mem.consolidation.archive()
        assert list(archived["id"]) == ids
        assert set(archived["summary_id"]) == {summary}
        assert archived["consolidated_at"].notna().all()
        assert mem.store.run("SELECT count(*) FROM event_vectors WHERE id IN"
                             " (SELECT unnest(?::VARCHAR[]))", [ids])[0][0] == 0  # fmt: skip
        row = mem.audit.log(action="consolidate").iloc[0]
        assert summary in row["target_ids"] and '"archived": 4' in row["details"]


def test_the_setting_compacts_the_background_runs_and_the_argument_wins(store_path) -> None:
    with Memory(store_path, **_options(consolidation_compact=True)) as mem:
        ids = _seed(mem, "a") + _seed(mem, "b")
        assert mem.consolidation.run(now=NOW, session_id="a").archived == 4
        assert mem.consolidation.run(now=NOW, session_id="b", compact=False).archived == 0
        assert set(mem.events()["id"]) >= set(ids[4:])  # b's stay, marked consolidated
        assert len(mem.consolidation.archive()) == 4
        with pytest.raises(InvalidInput, match="compact must be True or False"):
            mem.consolidation.run(now=NOW, compact="yes")
        with pytest.raises(InvalidInput, match="consolidation_compact must be True or False"):
            Settings(consolidation_compact=1)
    with Memory(store_path, **_options()) as mem:  # the default keeps the originals
        assert Settings().consolidation_compact is False
        _seed(mem, "c")
        assert mem.consolidation.run(now=NOW, session_id="c").archived == 0


def test_restore_brings_the_originals_back_in_place_with_their_vectors(store_path) -> None:
    """Reversible until retention purges them: a restore gives back each event as it
    was, in its place in the session and with the same vectors (bit for bit)."""
    with Memory(store_path, **_options()) as mem:
        ids = _seed(mem)
        mem.flush()
        order = list(mem.events(session_id="s1")["id"])
        seqs = dict(mem.store.run("SELECT id, seq FROM events"))
        vectors = _vectors(mem, ids)
        top = list(mem.search("vault code word", limit=3)["id"])
        summary = mem.consolidation.run(now=NOW, compact=True).summary_ids[0]
        with pytest.raises(InvalidInput, match="summary_id or ids"):
            mem.consolidation.restore()
        assert mem.consolidation.restore("no-such-summary") == 0
        assert len(mem.consolidation.archive()) == 4  # nothing changed by either

        assert mem.consolidation.restore(summary) == 4

        messages = mem.events(session_id="s1", kind="message")
        assert list(messages["id"]) == order
        assert dict(mem.store.run("SELECT id, seq FROM events WHERE kind = 'message'")) == seqs
        assert messages["consolidated_at"].notna().all()  # consolidated, summary kept
        assert _vectors(mem, ids) == vectors
        assert [i for i in mem.search("vault code word", limit=4)["id"] if i != summary][:3] == top
        assert mem.consolidation.archive().empty
        assert mem.store.run("SELECT count(*) FROM event_vector_archive")[0][0] == 0
        row = mem.audit.log(action="restore").iloc[0]
        assert sorted(row["target_ids"]) == sorted(ids)
        # the next run leaves them alone: they are consolidated already
        assert mem.consolidation.run(now=NOW, compact=True).consolidated == 0
    with Memory(store_path, **_options()) as mem:  # and a new process finds them
        assert [i for i in mem.search("vault code word", limit=4)["id"] if i != summary][:3] == top


def test_retention_purges_the_archive_and_upkeep_runs_it(store_path) -> None:
    """Reversible "until retention purges them": past ``archive_retention_days`` the
    archived rows and their vectors are deleted, audited; a restore then finds none."""
    with Memory(store_path, **_options(archive_retention_days=30)) as mem:
        _seed(mem)
        mem.flush()
        mem.clock = lambda: NOW + dt.timedelta(days=30)
        summary = mem.consolidation.run(now=NOW, compact=True).summary_ids[0]
        assert mem.consolidation.cleanup_archive(dry_run=True) == 0
        mem.clock = lambda: NOW + dt.timedelta(days=30, seconds=1)
        assert mem.consolidation.cleanup_archive(dry_run=True) == 4
        assert len(mem.consolidation.archive()) == 4  # a dry run deletes nothing
        assert mem.consolidation.cleanup_archive() == 4
        assert mem.consolidation.archive().empty
        assert mem.store.run("SELECT count(*) FROM event_vector_archive")[0][0] == 0
        assert mem.consolidation.restore(summary) == 0
        row = mem.audit.log(action="cleanup").iloc[0]
        assert '"event_archive"' in row["details"] and len(row["target_ids"]) == 4
    with Memory(store_path, **_options(archive_retention_days=30)) as mem:
        _seed(mem, "s2")
        mem.consolidation.run(compact=True, older_than_hours=0)  # archived now
    days = dt.timedelta(days=31)
    with duckdb.connect(store_path) as con:  # archived long ago
        con.execute("UPDATE event_archive SET archived_at = archived_at - ?", [days])
    with Memory(store_path, embedder="hash", archive_retention_days=30) as mem:  # upkeep, at open
        assert mem.consolidation.archive().empty
        assert mem.status()["upkeep"]["archived_removed"] == 4


def _found(folder: Path, value: str) -> list[str]:
    return [
        str(p.relative_to(folder))
        for p in sorted(folder.rglob("*"))
        if p.is_file() and value.encode() in p.read_bytes()
    ]


@pytest.mark.parametrize("how", ["forget_user", "delete_session", "delete_ids"])
def test_erasure_removes_the_archived_rows_and_purge_their_bytes(tmp_path, how) -> None:
    """No secret survives in the archive: the erasures that delete a scope's events
    delete its archived ones (and their vectors), and ``purge()`` then leaves no byte."""
    folder = tmp_path / "store"
    folder.mkdir()
    path = str(folder / "agent.duckdb")
    with Memory(path, **_options()) as mem:
        mem.start_session("zqx-user", session_id="s1")
        ids = _seed(mem)
        mem.add_event("keep", "user", "the plan stays")
        mem.flush()
        report = mem.consolidation.run(now=NOW, compact=True, session_id="s1")
        assert report.archived == 4
        assert mem.store.run("SELECT count(*) FROM event_vector_archive")[0][0] == 4
        if how == "forget_user":
            assert mem.forget_user("zqx-user")["events"] == 5  # 4 archived, the summary
        elif how == "delete_session":
            assert mem.sessions.delete("s1", events=True)["events"] == 5
        else:
            assert mem.delete([*ids, report.summary_ids[0]]) == 5
        assert mem.store.run("SELECT count(*) FROM event_archive")[0][0] == 0
        assert mem.store.run("SELECT count(*) FROM event_vector_archive")[0][0] == 0
        deleted = mem.audit.log(action="delete").iloc[0]
        assert set(ids) <= set(deleted["target_ids"])  # audited like the others
        mem.purge()
        assert len(mem.events()) == 1
    assert _found(folder, SECRET) == []


def test_consolidation_is_one_transaction_with_the_move(store_path, monkeypatch) -> None:
    """A failure after the summary is stored and the originals moved rolls it all back:
    the events are where they were, the archive and the summaries empty."""
    from nbmemory.store.archive import EventArchive

    with Memory(store_path, **_options()) as mem:
        ids = _seed(mem)
        mem.flush()
        top = list(mem.search("vault code word", limit=3)["id"])
        real = EventArchive.move

        def move_then_fail(self, *args, **kwargs):
            real(self, *args, **kwargs)
            raise OSError("disk full")

        monkeypatch.setattr(EventArchive, "move", move_then_fail)
        with pytest.raises(OSError, match="disk full"):
            mem.consolidation.run(now=NOW, compact=True)
        monkeypatch.undo()
        assert list(mem.events()["id"]) == ids
        assert mem.events()["consolidated_at"].isna().all()
        assert mem.consolidation.archive().empty
        assert len(_vectors(mem, ids)) == 4
        assert list(mem.search("vault code word", limit=3)["id"]) == top


# -- m006: the archive tables and the index on session_id ---------------------------------
def _as_schema_3(path: str) -> None:
    """Make ``path`` what the nbmemory before m006 left: no archive, no index, version 3."""
    with duckdb.connect(path) as con:
        con.execute("DROP INDEX events_session_id")
        con.execute("DROP TABLE event_archive")
        con.execute("DROP TABLE event_vector_archive")
        con.execute("DELETE FROM nbmemory_migrations WHERE name = 'm006_event_archive'")
        con.execute("UPDATE nbmemory_meta SET value = '3' WHERE key = 'schema_version'")
        con.execute("CHECKPOINT")


def _indexes(path: str) -> list[tuple[str, str]]:
    with duckdb.connect(path, read_only=True) as con:
        return con.execute(
            "SELECT index_name, sql FROM duckdb_indexes() WHERE table_name = 'events'"
        ).fetchall()


def test_a_store_from_before_m006_migrates_and_a_newer_one_is_refused(store_path) -> None:
    """000's messages table: ``session_id`` "Identificador da sessão (indexado)"; m006
    adds that index and the archive to a store of schema version 3, keeping its rows."""
    from nbmemory.errors import StoreError
    from nbmemory.store.migrations import SCHEMA_VERSION

    assert SCHEMA_VERSION == 4
    with Memory(store_path, **_options()) as mem:
        ids = _seed(mem)
        mem.flush()
    _as_schema_3(store_path)
    assert _indexes(store_path) == []
    with pytest.raises(StoreError, match="needs upgrading.*m006_event_archive"):
        Memory(store_path, embedder="hash", read_only=True)
    with Memory(store_path, **_options()) as mem:
        assert mem.status()["schema_version"] == 4
        assert list(mem.events()["id"]) == ids
        assert mem.consolidation.run(now=NOW, compact=True).archived == 4
    assert [name for name, _ in _indexes(store_path)] == ["events_session_id"]
    assert "(session_id)" in _indexes(store_path)[0][1]
    with duckdb.connect(store_path) as con:  # a newer nbmemory's migration
        con.execute("INSERT INTO nbmemory_migrations (name) VALUES ('m007_from_the_future')")
    with pytest.raises(StoreError, match="newer nbmemory.*m007_from_the_future"):
        Memory(store_path, embedder="hash")
    with Memory(store_path, embedder="hash", read_only=True) as reader:
        assert len(reader.consolidation.archive()) == 4


# -- the summarizer hook -------------------------------------------------------------------
class FakeChat:
    """A chat-completions client of OpenAI's shape that answers from a script."""

    def __init__(self, answer: str | Exception) -> None:
        self.answer = answer
        self.calls: list[dict] = []
        self.chat = self
        self.completions = self

    def create(self, *, model: str, messages: list[dict]):
        self.calls.append({"model": model, "messages": messages})
        if isinstance(self.answer, Exception):
            raise self.answer
        message = type("Message", (), {"content": self.answer})()
        return type("Reply", (), {"choices": [type("Choice", (), {"message": message})()]})()


def _documented_summarizer():
    """The ``llm_summarizer`` block of docs/python-api.md, as it is written there."""
    from test_docs import ROOT, code_blocks

    (block,) = [
        b for b in code_blocks(ROOT / "docs" / "python-api.md") if "def llm_summarizer" in b.code
    ]
    code = block.code.split("\nmem.consolidation.run(")[0].replace("from openai import OpenAI", "")
    namespace: dict = {}
    exec(compile(code, block.where(), "exec"), namespace)
    return namespace["llm_summarizer"], block.code


def test_an_llm_client_plugs_in_as_the_summarizer_as_the_docs_show(store_path) -> None:
    """000: the background task "comprime conversas antigas em resumos usando o modelo
    fast": any LLM client wrapped as in docs/python-api.md summarises; a failing one
    leaves the chunk for the next run; without one the extractive default runs."""
    llm_summarizer, code = _documented_summarizer()
    assert "mem.consolidation.start(summarizer=llm_summarizer(OpenAI()), compact=True)" in code
    with Memory(store_path, **_options()) as mem:
        ids = _seed(mem)
        down = FakeChat(TimeoutError("rate limited"))
        report = mem.consolidation.run(summarizer=llm_summarizer(down), now=NOW, compact=True)
        assert "rate limited" in report.failures["s1"] and report.archived == 0
        assert list(mem.events()["id"]) == ids  # nothing moved, nothing marked

        client = FakeChat("The user set a vault code word and deploys on Fridays.")
        report = mem.consolidation.run(summarizer=llm_summarizer(client), now=NOW, compact=True)

        assert report.ok and report.archived == 4
        (call,) = client.calls
        assert call["model"] == "gpt-4o-mini"
        transcript = call["messages"][1]["content"]
        assert transcript.splitlines() == [f"{role}: {text}" for role, text in CONVERSATION]
        summary = mem.get(report.summary_ids[0])
        assert summary.content == "The user set a vault code word and deploys on Fridays."
        assert summary.metadata["summarizer"] == "summarize"
        assert set(mem.events()["kind"]) == {"summary"}

        _seed(mem, "s2")  # the default stays the offline extractive summary
        report = mem.consolidation.run(now=NOW, session_id="s2")
        assert mem.get(report.summary_ids[0]).metadata["summarizer"] == "extractive_summary"


@pytest.mark.parametrize("mode", ["vector", "keyword"])
def test_a_restore_beside_saved_indexes_is_found_by_the_next_process(store_path, mode) -> None:
    """The saved copies of the indexes (``<store>.nbmemory-index/``) hold a store's rows
    in order; a restore puts rows back before their end, and the next process still
    finds them (it must not take the copies plus "what came after" for the table)."""
    options = _options(index_cache_min_rows=1)
    with Memory(store_path, **options) as mem:
        for i in range(30):
            mem.add_event("keep", "user", f"the keeper plan number {i}")
        ids = _seed(mem)
        mem.flush()
        summary = mem.consolidation.run(compact=True).summary_ids[0]  # archived now
        mem.search("keeper plan", mode=mode)  # builds (and at close saves) the index
    assert Path(store_path + ".nbmemory-index").is_dir()
    with Memory(store_path, **options) as mem:
        assert not mem.search("vault code word", limit=10, mode=mode)["id"].isin(ids).any()
        assert mem.consolidation.restore(summary) == 4
        assert mem.search("vault code word", limit=10, mode=mode)["id"].isin(ids).sum() >= 2
    with Memory(store_path, **options) as mem:
        assert mem.search("vault code word", limit=10, mode=mode)["id"].isin(ids).sum() >= 2
        assert mem.search("fleet Fridays", limit=10, mode=mode)["id"].isin(ids).sum() >= 2
