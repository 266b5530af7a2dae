"""Erasure that erases: after forgetting and ``purge()``, no byte of what was forgotten.

Plain deletion takes rows out of every query; ``purge()`` rewrites the file so their
bytes go too.  What used to stay: every earlier value of a deleted fact
(``fact_history``), and the ids of deleted sessions and users, quoted by the audit
trail.  These tests plant distinctive values through the public API, forget them
the ways a user would, and read the raw bytes of every file beside the store: the
DuckDB file, its WAL, the saved indexes' folder.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest

from nbmemory import Memory
from nbmemory.cli import main
from nbmemory.errors import InvalidInput, SessionNotFound, StoreError

SESSION = "zqx-sess-7731"
USER = "zqx-user-7731"
TEXT = "zqx-erase-me-7731"
WORD = "zqxerasemeword7731"  # one token: the keyword index keeps it whole
STATE = "zqx-state-7731"
FACT_VALUES = ["zqx-fact-first-7731", "zqx-fact-second-7731", "zqx-fact-third-7731"]
PLANTED = [SESSION, USER, TEXT, WORD, STATE, *FACT_VALUES]
PSEUDONYM = re.compile(r"pseudonym:[0-9a-f]{32}")


def _found(folder: Path, values: list[str] = PLANTED) -> dict[str, list[str]]:
    """file (relative to ``folder``) -> the planted values its raw bytes hold."""
    hits: dict[str, list[str]] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            held = [v for v in values if v.encode() in data]
            if held:
                hits[str(path.relative_to(folder))] = held
    return hits


def _options(shared: bool = False, **extra) -> dict:
    return dict(
        embedder="hash",
        background_consolidation=False,
        index_cache_min_rows=1,  # small indexes are saved beside the store too
        shared=shared,
        **extra,
    )


def _store(tmp_path: Path) -> tuple[Path, str]:
    folder = tmp_path / "store"
    folder.mkdir()
    return folder, str(folder / "agent.duckdb")


@pytest.mark.slow
@pytest.mark.parametrize("shared", [False, True], ids=["exclusive", "shared"])
def test_forgetting_a_user_and_a_fact_leaves_no_byte_of_them(tmp_path, shared) -> None:
    folder, path = _store(tmp_path)
    with Memory(path, **_options(shared)) as mem:
        keep = [mem.add_event("keep", "user", f"the plan number {i} stays").id for i in range(30)]
        mem.start_session(USER, session_id=SESSION, state={"note": f"remember {STATE}"})
        mem.add_event(SESSION, "user", f"my secret is {TEXT}", metadata={"from": SESSION})
        mem.add_event(SESSION, "assistant", f"noted {TEXT}, also known as {WORD}")
        mem.add_events([{"session_id": SESSION, "role": "user", "content": f"bulk {TEXT}"}])
        mem.save_session_state(SESSION, {"more": STATE})
        assert len(mem.recent(SESSION)) == 3  # in working memory
        for value in FACT_VALUES:
            mem.set_fact("door", "code", value)
        mem.flush()
        assert mem.search(f"secret {TEXT}", limit=1)["session_id"].iloc[0] == SESSION
        mem.get_context(SESSION, "what is the secret")
        # a copy taken before is the user's own; its name, quoted by the trail, is not
        mem.export_json(str(tmp_path / f"export-{SESSION}.json"), session_id=SESSION)
        mem.close_session(SESSION)
        rows_before = len(mem.audit_log())
    found = _found(folder)
    assert sorted(found["agent.duckdb"]) == sorted(PLANTED)  # the scan sees them all
    assert {SESSION, WORD} <= set(found["agent.duckdb.nbmemory-index/keywords.npz"])

    with Memory(path, **_options(shared)) as mem:
        assert mem.search("plan", limit=1)["id"].iloc[0] in keep  # the saved copies, loaded
        forgot = mem.forget_user(USER)
        assert PSEUDONYM.fullmatch(forgot["user"])
        assert {k: forgot[k] for k in ("sessions", "events", "namespaces")} == {
            "sessions": 1,
            "events": 3,
            "namespaces": ["default"],
        }
        assert mem.delete_fact("door", "code", history=True) is True
        result = mem.purge()
        assert result["bytes_after"] < result["bytes_before"]
        assert _found(folder) == {}  # the file, its WAL, the index folder (gone)
        assert not Path(path + ".nbmemory-index").exists()

        # the store is whole: the rest stays, searchable, and the trail keeps every row
        assert set(mem.events()["id"]) == set(keep)
        assert mem.recent(SESSION).empty and mem.fact_history().empty
        assert mem.search("plan number 7", limit=1)["id"].iloc[0] in keep  # rebuilt, saved
        trail = mem.audit_log()
        assert len(trail) == rows_before + 4  # delete, forget_user, delete_fact, purge
        started = trail[trail["action"] == "session_start"]
        assert json.loads(started["details"].iloc[0]) == {"user_id": forgot["user"]}
        (session,) = started["target_ids"].iloc[0]
        assert PSEUDONYM.fullmatch(session)
        # the same pseudonym wherever the id was: the rows of the session still link
        quoting = [t for t in trail.itertuples() if session in f"{list(t.target_ids)} {t.details}"]
        assert {t.action for t in quoting} == {"session_start", "session_state", "add", "export",
                                               "session_close"}  # fmt: skip
        for details in trail["details"]:
            assert "value" not in json.loads(details)  # no audit row quotes a fact's value
    assert _found(folder) == {}


def test_without_erasure_asked_the_trail_and_the_history_keep_them(store_path) -> None:
    """Plain deletion keeps the fact's history and the trail's ids (today's behaviour,
    what an audit trail is for); erasure is asked for, never implied."""
    with Memory(store_path, **_options()) as mem:
        mem.start_session(USER, session_id=SESSION)
        mem.add_event(SESSION, "user", f"my secret is {TEXT}")
        for value in FACT_VALUES:
            mem.set_fact("door", "code", value)
        assert mem.delete_fact("door", "code") is True
        mem.delete_session(SESSION, events=True)
        mem.purge()
        assert list(mem.fact_history()["value"]) == FACT_VALUES[::-1]
    found = _found(Path(store_path).parent)
    assert sorted(found["agent.duckdb"]) == sorted([SESSION, USER, *FACT_VALUES])


def test_purge_erases_the_history_of_deleted_facts_only(store_path) -> None:
    with Memory(store_path, **_options()) as mem:
        mem.set_fact("door", "code", "zqx-door-1")
        mem.set_fact("door", "code", "zqx-door-2")
        mem.delete_fact("door", "code")  # a deleted fact: two values in history
        mem.set_fact("door", "code", "zqx-door-3")  # the name again: a new fact
        mem.set_fact("wifi", "pass", "zqx-wifi-1", namespace="office")
        mem.set_fact("wifi", "pass", "zqx-wifi-2", namespace="office")  # living: its history stays
        result = mem.purge(fact_history=True)
        assert result["fact_history_erased"] == 2
        assert mem.fact_history().empty
        assert list(mem.fact_history(namespace="office")["value"]) == ["zqx-wifi-1"]
        (row,) = mem.audit_log(action="erase_fact_history").itertuples()
        assert json.loads(row.details) == {"rows": 2} and row.namespace == "default"
    data = Path(store_path).read_bytes()
    assert b"zqx-door-1" not in data and b"zqx-door-2" not in data
    assert b"zqx-door-3" in data and b"zqx-wifi-1" in data and b"zqx-wifi-2" in data


def test_delete_fact_with_history_erases_every_earlier_value(mem) -> None:
    mem.set_fact("user", "city", "Lisbon")
    first = mem.set_fact("user", "city", "Porto")["id"]
    mem.delete_fact("user", "city")  # Lisbon and Porto in history
    second = mem.set_fact("user", "city", "Faro")["id"]
    mem.set_fact("user", "town", "Braga")  # another key: untouched
    mem.set_fact("user", "town", "Evora")
    assert mem.delete_fact("user", "city", history=True) is True
    assert mem.fact_history("user", "city").empty and mem.facts("user")["key"].tolist() == ["town"]
    assert mem.fact_history("user", "town")["value"].tolist() == ["Braga"]
    row = next(mem.audit_log(action="delete_fact").itertuples())  # the newest
    assert sorted(row.target_ids) == sorted({str(first), str(second)})
    assert json.loads(row.details) == {"category": "user", "key": "city", "history_erased": 2}
    # only history left (deleted before): erased on request, and True says so
    mem.set_fact("user", "town", "Sintra")
    mem.delete_fact("user", "town")
    assert mem.delete_fact("user", "town", history=True) is True
    assert mem.fact_history().empty
    assert mem.delete_fact("user", "town", history=True) is False


def test_delete_session_forget_pseudonymises_it_in_its_namespace_only(mem) -> None:
    for ns in ("a", "b"):
        mem.start_session("u", session_id="zqx-desk-9", namespace=ns)
        mem.add_event("zqx-desk-9", "user", f"said in {ns}", namespace=ns)
    assert mem.delete_session("zqx-desk-9", namespace="a", forget=True) == {
        "sessions": 1,
        "events": 1,
        "audit_rows": 2,  # session_start and add
    }
    in_a = mem.audit_log(namespace="a")
    assert "zqx-desk-9" not in in_a.to_string()
    pseudonym = in_a[in_a["action"] == "session_delete"]["target_ids"].iloc[0][0]
    assert PSEUDONYM.fullmatch(pseudonym)
    assert list(in_a[in_a["action"] == "session_start"]["target_ids"].iloc[0]) == [pseudonym]
    assert "zqx-desk-9" in mem.audit_log(namespace="b").to_string()  # b's session lives
    assert len(mem.events(namespace="b")) == 1


def test_a_session_deleted_before_can_be_forgotten_later(mem) -> None:
    mem.start_session(USER, session_id=SESSION)
    mem.add_event(SESSION, "user", "hello")
    mem.delete_session(SESSION, events=True)  # plain: the trail still names it
    assert SESSION in mem.audit_log().to_string()
    # session_start, add and session_delete named it
    assert mem.delete_session(SESSION, forget=True) == {"sessions": 0, "events": 0, "audit_rows": 3}
    assert SESSION not in mem.audit_log().to_string()
    with pytest.raises(SessionNotFound):  # nothing names it any more
        mem.delete_session(SESSION, forget=True)


def test_forget_user_finds_sessions_cleanup_removed_and_spares_other_users(store_path) -> None:
    now = [dt.datetime(2026, 1, 1, 9)]
    with Memory(store_path, **_options(session_ttl_hours=1)) as mem:
        mem.clock = lambda: now[0]
        mem.start_session("ann", session_id="ann-old")
        mem.add_event("ann-old", "user", "ann's old words")
        now[0] += dt.timedelta(hours=2)
        assert len(mem.cleanup_sessions()) == 1  # the row goes; its events stay
        mem.start_session("ann", session_id="ann-new")
        mem.add_event("ann-new", "user", "ann's new words")
        mem.start_session("anna", session_id="anna-1")  # a longer id holding "ann"
        mem.add_event("anna-1", "user", "anna's words")
        mem.start_session("ann", session_id="desk-7")
        mem.delete_session("desk-7", events=True)
        mem.start_session("bob", session_id="desk-7")  # the id, reused by another user
        mem.add_event("desk-7", "user", "bob's words")
        forgot = mem.forget_user("ann")
        assert (forgot["sessions"], forgot["events"]) == (1, 2)
        assert sorted(mem.events()["content"]) == ["anna's words", "bob's words"]
        assert list(mem.sessions(include_untracked=False)["user_id"].sort_values()) == [
            "anna",
            "bob",
        ]
        trail = mem.audit_log().to_string()
        for gone in ('"ann"', "ann-old", "ann-new"):
            assert gone not in trail
        for kept in ('"anna"', "anna-1", '"bob"', "desk-7"):
            assert kept in trail
        # forgetting again finds nothing more and gives the same pseudonym
        again = mem.forget_user("ann")
        assert again == {**forgot, "sessions": 0, "events": 0, "audit_rows": 0, "namespaces": []}


def test_forget_user_stays_in_its_namespace_unless_asked(mem) -> None:
    for ns in ("a", "b"):
        mem.start_session("zqx-carol", namespace=ns)
    assert mem.forget_user("zqx-carol", namespace="a")["namespaces"] == ["a"]
    assert "zqx-carol" in mem.audit_log(namespace="b").to_string()
    assert mem.sessions("b")["user_id"].tolist() == ["zqx-carol"]
    assert mem.forget_user("zqx-carol", all_namespaces=True)["namespaces"] == ["b"]
    assert "zqx-carol" not in mem.audit_log().to_string()


def test_pseudonyms_are_stable_until_the_key_is_rotated(store_path) -> None:
    with Memory(store_path, **_options()) as mem:
        mem.start_session("zqx-dave", session_id="zqx-dave-1")
        first = mem.forget_user("zqx-dave")["user"]
        mem.start_session("zqx-dave", session_id="zqx-dave-2")
        assert mem.forget_user("zqx-dave")["user"] == first
        key = mem.store.meta.get("pseudonym_key")
        assert key and key.encode() in Path(store_path).read_bytes() + _wal(store_path)
        mem.purge(rotate_pseudonym_key=True)
        assert key.encode() not in Path(store_path).read_bytes() + _wal(store_path)
        assert len(mem.audit_log(action="rotate_pseudonym_key")) == 1
        mem.start_session("zqx-dave", session_id="zqx-dave-3")
        assert mem.forget_user("zqx-dave")["user"] != first
        starts = mem.audit_log(action="session_start")["details"].map(json.loads)
        assert sorted(d["user_id"] == first for d in starts) == [False, True, True]


def _wal(path: str) -> bytes:
    wal = Path(path + ".wal")
    return wal.read_bytes() if wal.exists() else b""


def test_purge_removes_saved_indexes_a_deleting_process_did_not_know_of(store_path) -> None:
    with Memory(store_path, **_options()) as mem:
        for i in range(5):
            mem.add_event(SESSION, "user", f"{WORD} number {i}")
        mem.flush()
        mem.search(TEXT)  # saved
    folder = Path(store_path + ".nbmemory-index")
    (folder / ".keywords.npz.4242.0123abcd.npz").write_bytes(TEXT.encode())  # a killed save
    (folder / "notes.txt").write_text("not ours: left alone")
    with Memory(store_path, **_options(index_cache=False)) as mem:  # keeps no copies
        mem.delete(mem.events()["id"].tolist())
        # this process never saw the saved copies: they still hold the session and its words
        assert _found(folder).get("keywords.npz") == [SESSION, WORD]
        mem.purge()
        assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
        assert (
            json.loads(mem.audit_log(action="purge")["details"].iloc[0])["saved_index_files"] >= 4
        )
    assert _found(Path(store_path).parent, [WORD]) == {}  # (the trail names the session)


def test_the_cli_forgets_and_erases(store_path, capsys) -> None:
    with Memory(store_path, **_options()) as mem:
        mem.start_session(USER, session_id=SESSION)
        mem.add_event(SESSION, "user", TEXT)
        mem.start_session("zqx-erin", session_id="zqx-erin-1")
        mem.set_fact("door", "code", FACT_VALUES[0])
        mem.set_fact("door", "code", FACT_VALUES[1])
        mem.delete_fact("door", "code")
    common = ["--store", store_path, "--embedder", "hash"]
    assert main(["state", "forget", "--user", USER, *common]) == 0
    assert "1 session(s), 1 event(s) deleted" in capsys.readouterr().out
    assert main(["state", "delete", "--session-id", "zqx-erin-1", "--forget", *common]) == 0
    assert "pseudonymised in 1 audit row(s)" in capsys.readouterr().out
    assert main(["memory", "purge", "--fact-history", "--rotate-pseudonym-key", *common]) == 0
    assert "2 value(s) of deleted facts erased" in capsys.readouterr().out
    assert _found(Path(store_path).parent, [*PLANTED, "zqx-erin-1"]) == {}


def test_bad_erasure_requests_are_refused_and_change_nothing(store_path) -> None:
    with Memory(store_path, **_options()) as mem:
        mem.start_session(USER, session_id=SESSION)
        mem.add_event(SESSION, "user", "the door code is in the fact")
        mem.set_fact("door", "code", FACT_VALUES[0])
        rows = len(mem.audit_log())
        for call, field in (
            (lambda: mem.forget_user(""), "user_id"),
            (lambda: mem.forget_user(None), "user_id"),  # type: ignore[arg-type]
            (lambda: mem.delete_fact("door", "code", history="yes"), "history"),
            (lambda: mem.delete_session(SESSION, forget="no"), "forget"),
            (lambda: mem.forget_user(USER, all_namespaces="no"), "all_namespaces"),
            (lambda: mem.purge(fact_history="yes"), "fact_history"),
            (lambda: mem.purge(rotate_pseudonym_key=1), "rotate_pseudonym_key"),
        ):
            with pytest.raises(InvalidInput, match=field):
                call()
        assert len(mem.audit_log()) == rows
        assert mem.get_fact("door", "code")["value"] == FACT_VALUES[0]
        assert mem.get_session(SESSION).user_id == USER and len(mem.events()) == 1
        assert mem.store.meta.get("pseudonym_key") is None
        mem.search("door")  # saved indexes beside the store
    reader = Memory(store_path, **_options(read_only=True))
    with reader, pytest.raises(StoreError, match="read-only"):
        reader.purge()
    assert Path(store_path + ".nbmemory-index", "keywords.npz").exists()


# -- a lake: its catalog in PostgreSQL, its rows as Parquet files under the data path ------
#: Planted on a lake.  "0000..." and "zzzz..." sort before and after every kept value,
#: so each is the minimum or maximum of its column in the statistics DuckLake keeps of
#: every data file and every table.
LAKE_SESSION = "0000zqx-lake-sess-7731"
LAKE_USER = "zzzzzqx-lake-user-7731"
LAKE_TEXT = "0000zqx-lake-text-7731"
LAKE_WORD = "zzzzzqxlakeword7731"
LAKE_SESSION2 = "zzzzzqx-lake-sess2-7731"
LAKE_STATE = "zqx-lake-state-7731"
LAKE_FACTS = ["0000zqx-lake-fact-1-7731", "zqx-lake-fact-2-7731", "zzzzzqx-lake-fact-3-7731"]
LAKE_PLANTED = [LAKE_SESSION, LAKE_USER, LAKE_TEXT, LAKE_WORD, LAKE_SESSION2, LAKE_STATE,
                *LAKE_FACTS]  # fmt: skip


def _catalog(lake_url: str) -> dict[str, str]:
    """Every row of every table of the lake's metadata schema as PostgreSQL prints it
    (``row::text``: what ``pg_dump`` writes), table -> rows."""
    from nbmemory.store.lake import extensions, parse_lake_url

    address = parse_lake_url(lake_url)
    schema = address.metadata_schema
    assert schema and schema.isidentifier()
    con = extensions.connect()
    try:
        extensions.load(con, "postgres")
        dsn = address.attach[len("ducklake:postgres:") :].replace("'", "''")
        con.execute(f"ATTACH '{dsn}' AS pg (TYPE postgres, READ_ONLY)")
        query = "SELECT * FROM postgres_query('pg', ?)"
        names = [
            row[0]
            for row in con.execute(
                query, [f"SELECT tablename FROM pg_tables WHERE schemaname = '{schema}'"]
            ).fetchall()
        ]
        return {
            name: con.execute(
                query,
                [f'SELECT coalesce(string_agg(r::text, chr(10)), \'\') FROM "{schema}"."{name}" r'],
            ).fetchall()[0][0]
            for name in names
        }
    finally:
        con.close()


def _in_catalog(tables: dict[str, str], values: list[str]) -> dict[str, list[str]]:
    """table -> the values its rows hold, as text or as bytea (DuckLake keeps inlined
    VARCHARs as bytes, which PostgreSQL prints in hex)."""
    hits: dict[str, list[str]] = {}
    for name, text in tables.items():
        held = [v for v in values if v in text or v.encode().hex() in text]
        if held:
            hits[name] = held
    return hits


def _in_data_path(root: Path, values: list[str]) -> dict[str, list[str]]:
    """file -> the values it holds: in its raw bytes, or (a Parquet file, whose pages are
    compressed) in any of its rows as DuckDB reads them."""
    from nbmemory.store.lake import extensions

    hits: dict[str, list[str]] = {}
    con = extensions.connect()
    try:
        for path in sorted(root.rglob("*")):
            if not path.is_file():
                continue
            data = path.read_bytes()
            if path.suffix == ".parquet":
                rows = con.execute("SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
                data += repr(rows).encode()
            held = [v for v in values if v.encode() in data]
            if held:
                hits[str(path.relative_to(root))] = held
    finally:
        con.close()
    return hits


def _everywhere(lake_url: str, root: Path) -> set[str]:
    found = set()
    for held in [*_in_catalog(_catalog(lake_url), LAKE_PLANTED).values(),
                 *_in_data_path(root, LAKE_PLANTED).values()]:  # fmt: skip
        found.update(held)
    return found


def test_forgetting_and_purging_a_lake_leaves_no_byte_in_catalog_or_files(
    lake_url: str, tmp_path: Path
) -> None:
    """After forget_user, delete_session(forget=True), delete_fact(history=True) and
    purge(expire_snapshots=True): none of the planted values in any row of any table
    of the catalog (the column statistics included) nor in any file of the data path;
    every other row still there and found."""
    root = tmp_path / "lake"
    with Memory(lake_url, embedder="hash", background_consolidation=False) as mem:
        keep = [mem.add_event("keep", "user", f"the plan number {i} stays").id for i in range(12)]
        # one batch (one Parquet file) of kept rows and planted ones: the planted rows are
        # that file's minimum and maximum, and it keeps rows after they are deleted
        batch = mem.add_events(
            [{"session_id": "keep", "role": "user", "content": f"bulk plan {i} stays"}
             for i in range(20)]
            + [{"session_id": LAKE_SESSION, "role": "user", "content": f"{LAKE_TEXT} bulk"},
               {"session_id": LAKE_SESSION, "role": "user", "content": f"{LAKE_WORD} bulk"}]
        )  # fmt: skip
        keep += batch[:20]  # ids
        mem.start_session(LAKE_USER, session_id=LAKE_SESSION, state={"note": LAKE_STATE})
        mem.add_event(LAKE_SESSION, "user", f"my secret is {LAKE_TEXT}",
                      metadata={"from": LAKE_SESSION})  # fmt: skip
        mem.add_event(LAKE_SESSION, "assistant", f"noted, also known as {LAKE_WORD}")
        mem.start_session(session_id=LAKE_SESSION2)
        mem.add_event(LAKE_SESSION2, "user", "a second session, forgotten by its id")
        for value in LAKE_FACTS:
            mem.set_fact("door", "code", value)
        mem.set_fact("door", "colour", "green")
        assert mem.flush()
        assert mem.search(LAKE_TEXT, limit=1)["session_id"].iloc[0] == LAKE_SESSION
        rows_before = len(mem.audit_log())
    catalog = _catalog(lake_url)
    assert _everywhere(lake_url, root) == set(LAKE_PLANTED)  # the scans see every value
    stats = {name: catalog[name] for name in catalog if name.endswith("column_stats")}
    in_stats = {v for held in _in_catalog(stats, LAKE_PLANTED).values() for v in held}
    assert {LAKE_TEXT, LAKE_SESSION, LAKE_WORD} <= in_stats  # minima and maxima, kept

    with Memory(lake_url, embedder="hash", background_consolidation=False) as mem:
        forgot = mem.forget_user(LAKE_USER)
        assert (forgot["sessions"], forgot["events"]) == (1, 4)
        assert mem.delete_session(LAKE_SESSION2, forget=True)["events"] == 1
        assert mem.delete_fact("door", "code", history=True) is True
        assert _everywhere(lake_url, root) == set(LAKE_PLANTED)  # deleted is not erased
        before_purge = mem.store.current_snapshot()
        result = mem.purge(expire_snapshots=True)
        assert result["files_rewritten"] > 0 and result["snapshots_expired"] > 0

        assert _in_catalog(_catalog(lake_url), LAKE_PLANTED) == {}
        assert _in_data_path(root, LAKE_PLANTED) == {}
        # the statistics are still there, of the kept rows alone
        stats_after = "\n".join(v for k, v in _catalog(lake_url).items() if "column_stats" in k)
        assert "bulk plan 0 stays" in stats_after and "the plan number 9 stays" in stats_after

        # the rest is whole, searchable, and the trail kept every row
        assert set(mem.events()["id"]) == set(keep)
        assert mem.search("plan number 7", limit=1)["id"].iloc[0] in keep
        assert mem.get_fact("door", "colour")["value"] == "green"
        assert mem.fact_history().empty
        trail = mem.audit_log()
        assert len(trail) > rows_before and trail["action"].iloc[0] == "purge"
        purge = json.loads(trail["details"].iloc[0])
        assert purge["snapshots_expired"] == result["snapshots_expired"]
        assert forgot["user"] in trail.to_string()
    # time travel starts at the purge: the snapshots before it are gone
    with pytest.raises(StoreError, match="snapshot"):
        Memory(lake_url, embedder="hash", snapshot=before_purge)
