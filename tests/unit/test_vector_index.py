"""The in-memory index gives the SQL path's answers, through inserts, deletes and updates."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from fakes import RandomEmbedder

from nbmemory import Memory
from nbmemory.event_rows import build_row
from nbmemory.retrieval.encoding import sort_order
from nbmemory.retrieval.vector_index import VectorIndex

DIM = 32


def both_paths(mem: Memory, query_vec, **kwargs):
    namespace = kwargs.pop("namespace")
    fast = mem.retriever.vector_search(query_vec, namespace, **kwargs)
    slow = mem.store.vectors.similar(query_vec, mem.model_name, namespace=namespace, **kwargs)
    return fast, slow.drop(columns=["distance_score"])


def assert_same(fast, slow):
    assert fast["id"].tolist() == slow["id"].tolist()
    assert np.allclose(fast["similarity"], slow["similarity"], atol=1e-5)
    assert fast.columns.tolist() == slow.columns.tolist()


@pytest.mark.slow
def test_index_matches_sql_through_inserts_deletes_and_updates(store_path):
    rng = np.random.default_rng(7)
    with Memory(store_path, embedder=RandomEmbedder()) as mem:
        for round_ in range(6):
            rows = [
                {
                    "session_id": f"s{i % 3}",
                    "role": "user",
                    "content": f"round {round_} text {i} {rng.integers(1e9)}",
                    "namespace": ["a", "b"][i % 2],
                }
                for i in range(150)
            ]
            mem.add_events(rows)
            mem.flush()
            events = mem.store.df("SELECT id FROM events")
            doomed = rng.choice(events["id"].to_numpy(), size=20, replace=False).tolist()
            with mem.writer.transaction() as tx:
                tx.events.delete(doomed)
            # a change the index is not told about: it must notice and rebuild
            victim = mem.store.fetchone("SELECT id FROM events ORDER BY random() LIMIT 1")[0]
            mem.store.execute(
                "UPDATE event_vectors SET embedding = ?::FLOAT[] WHERE id = ?",
                [rng.standard_normal(DIM).astype(np.float32).tolist(), victim],
            )
            for _ in range(5):
                q = rng.standard_normal(DIM).astype(np.float32)
                for kwargs in (
                    {"limit": 10, "namespace": "a"},
                    {"limit": 7, "namespace": "b", "threshold": 0.1},
                    {"limit": 5, "namespace": "a", "threshold": 0.2, "strict": True},
                    {"limit": 1000, "namespace": None},
                    {"limit": 3, "namespace": "missing"},
                ):
                    assert_same(*both_paths(mem, q, **kwargs))
            fast, slow = both_paths(mem, q, limit=8, namespace="a", exclude_ids=doomed[:5])
            assert_same(fast, slow)


def test_incremental_updates_avoid_rebuilds(store_path):
    with Memory(store_path, embedder=RandomEmbedder()) as mem:
        mem.add_events([{"session_id": "s", "role": "user", "content": f"t{i}"} for i in range(50)])
        mem.flush()
        mem.search("t1")
        index = mem.indexes.vectors(mem.model_name)
        rebuilds = index.rebuilds
        for i in range(20):
            mem.add_event("s", "user", f"more {i}")
        mem.flush()
        first = mem.events()["id"].iloc[0]
        mem.delete(first)
        hits = mem.search("more 3", limit=100)
        assert index.rebuilds == rebuilds  # kept in step without re-reading the table
        assert len(hits) == 69 and first not in set(hits["id"])


@pytest.mark.slow
def test_index_stays_correct_with_a_concurrent_writer(store_path):
    with Memory(store_path, embedder=RandomEmbedder()) as mem:
        mem.add_events(
            [{"session_id": "s", "role": "user", "content": f"x{i}"} for i in range(200)]
        )
        mem.flush()
        stop = threading.Event()
        errors: list[BaseException] = []

        def writer() -> None:
            try:
                i = 0
                while not stop.is_set():
                    event = mem.add_event("w", "user", f"writer {i}")
                    if i % 3 == 0:
                        mem.delete(event.id)
                    i += 1
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            rng = np.random.default_rng(1)
            for _ in range(30):
                q = rng.standard_normal(DIM).astype(np.float32)
                fast = mem.retriever.vector_search(q, "default", limit=10)
                # every hit the index returns is a live row with that exact similarity
                stored = mem.store.vectors.similar(
                    q, mem.model_name, limit=10_000, namespace="default"
                ).set_index("id")
                for row in fast.itertuples():
                    if row.id in stored.index:
                        assert row.similarity == pytest.approx(
                            stored.loc[row.id, "similarity"], abs=1e-5
                        )
        finally:
            stop.set()
            thread.join()
        assert not errors
        mem.flush()
        q = np.random.default_rng(2).standard_normal(DIM).astype(np.float32)
        assert_same(*both_paths(mem, q, limit=25, namespace="default"))


def test_vectors_written_in_a_transaction_are_seen_after_commit(store_path):
    with Memory(store_path, embedder=RandomEmbedder()) as mem:
        mem.add_event("s", "user", "first")
        mem.flush()
        mem.search("first")  # build the index
        row = build_row(mem.settings, session_id="s", role="user", content="x", namespace="default")
        vector = np.ones(DIM, dtype=np.float32)
        with mem.writer.transaction() as tx:
            tx.events.insert([row], vectors={row["id"]: (mem.model_name, vector)})
        hits = mem.retriever.vector_search(vector, "default", limit=1)
        assert hits["id"].tolist() == [row["id"]]


def test_exact_ties_are_broken_like_sql(store_path):
    with Memory(store_path, embedder=RandomEmbedder()) as mem:
        for i in range(12):  # the same text: the same vector, exact ties
            mem.add_event("s", "user", "same words", created_at=f"2024-01-{i + 1:02d}")
        mem.flush()
        q = RandomEmbedder().embed(["same words"])[0]
        for limit in (1, 5, 11, 20):
            assert_same(*both_paths(mem, q, limit=limit, namespace="default"))


def test_vector_index_unit_behaviour():
    index = VectorIndex("m")
    assert index.stale  # never built
    index.rebuild(["a", "b"], ["n1", "n2"], np.array([[1, 0], [0, 1]], dtype=np.float32))
    assert not index.stale and len(index) == 2
    assert index.search(np.array([1, 0.1]), 5, namespace="n1") == [
        ("a", pytest.approx(0.995, abs=1e-3))
    ]
    index.upsert(["c"], ["n1"], np.array([[3.0, 4.0]]))
    hits = index.search(np.array([0.6, 0.8]), 5, namespace=None)
    assert hits[0] == ("c", pytest.approx(1.0))
    assert index.search(np.array([0.6, 0.8]), 5, namespace="n1", threshold=0.99) == [
        ("c", pytest.approx(1.0))
    ]


def test_a_stale_index_ignores_changes_and_rebuilds_from_the_table(store_path):
    """Changes announced while an index is stale are not applied to it (it would hold
    a mix); the next search rebuilds it from the table, once."""
    with Memory(store_path, embedder=RandomEmbedder()) as mem:
        mem.add_events([{"session_id": "s", "role": "user", "content": f"t{i}"} for i in range(20)])
        mem.flush()
        index = mem.indexes.vectors(mem.model_name)
        rebuilds = index.rebuilds
        mem.store.execute("UPDATE events SET importance = 0.4")  # plain SQL: unknown change
        assert index.stale
        mem.add_event("s", "user", "written while stale")
        mem.flush()
        assert index.stale and index.rebuilds == rebuilds  # nothing applied in between
        assert len(mem.indexes.vectors(mem.model_name)) == 21
        assert index.rebuilds == rebuilds + 1 and not index.stale


def test_filtered_searches_use_the_index_and_match_sql(store_path):
    """A session, role or date filter scores only the rows it selects: same answer as SQL,
    and no list_cosine_similarity pass over the table."""
    with Memory(store_path, embedder=RandomEmbedder()) as mem:
        mem.add_events(
            [
                {"session_id": f"s{i % 20}", "role": ["user", "assistant"][i % 2],
                 "content": f"text {i}", "created_at": f"2024-01-{1 + i % 28:02d}T00:00:00"}
                for i in range(2000)
            ]
        )  # fmt: skip
        mem.flush()
        mem.indexes.vectors(mem.model_name)
        rng = np.random.default_rng(3)
        for filters, since in (({"session_id": "s3"}, None), ({"role": "user"}, "2024-01-15"),
                               ({"session_id": ["s1", "s2"], "role": "assistant"}, None)):  # fmt: skip
            q = rng.standard_normal(DIM).astype(np.float32)
            before = mem.store.statements_run
            fast = mem.retriever.vector_search(q, "default", limit=7, filters=filters, since=since)
            ran = mem.store.statements_run - before
            slow = mem.store.vectors.similar(
                q, mem.model_name, limit=7, namespace="default", filters=filters, since=since
            ).drop(columns=["distance_score"])
            assert_same(fast, slow)
            assert ran == 2  # the ids the filter selects, then the rows of the hits


def test_churn_compacts_the_index_and_keeps_answers_exact():
    """Adds and deletes: memory follows the live rows, not every row ever added."""
    rng = np.random.default_rng(11)
    index = VectorIndex("m")
    index.rebuild([], [], np.zeros((0, DIM), dtype=np.float32))
    live: dict[str, np.ndarray] = {}
    for round_ in range(6):
        ids = [f"r{round_}-{i}" for i in range(1000)]
        vectors = rng.standard_normal((1000, DIM)).astype(np.float32)
        index.upsert(ids, ["n"] * 1000, vectors)
        live.update(zip(ids, vectors, strict=True))
        doomed = [k for k in list(live) if rng.random() < 0.8]
        index.remove(doomed)
        for k in doomed:
            del live[k]
    assert len(index) == len(live)
    assert index._size < 2 * len(live) + 1024  # compacted: not the 6,000 ever added
    fresh = VectorIndex("m")
    fresh.rebuild(list(live), ["n"] * len(live), np.stack(list(live.values())))
    for _ in range(5):
        q = rng.standard_normal(DIM).astype(np.float32)
        got, expected = index.search(q, 10, namespace="n"), fresh.search(q, 10, namespace="n")
        assert [i for i, _ in got] == [i for i, _ in expected]  # the same rows, in order
        assert [s for _, s in got] == pytest.approx([s for _, s in expected], abs=1e-6)


def test_a_loaded_index_finds_its_ids_whichever_operation_comes_first():
    """A loaded index finds ids by its saved order, or makes its id map on first need:
    each kind of operation, coming first after a load, must see every loaded id where
    a rebuilt index does."""
    rng = np.random.default_rng(5)
    ids = [f"e{i}" for i in range(300)]
    matrix = rng.standard_normal((300, DIM)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    spare = np.zeros((340, DIM), dtype=np.float32)  # a saved copy has room for new rows
    spare[:300] = matrix
    q = rng.standard_normal(DIM).astype(np.float32)
    new = rng.standard_normal((2, DIM)).astype(np.float32)

    def loaded(order: np.ndarray | None) -> VectorIndex:
        index = VectorIndex("m")
        index.load(list(ids), ["n"], np.zeros(300, dtype=np.int32), spare.copy(), order)
        return index

    def rebuilt() -> VectorIndex:
        index = VectorIndex("m")
        index.rebuild(list(ids), ["n"] * 300, matrix.copy())
        return index

    operations = {
        "exclude": lambda ix: ix.search(q, 5, namespace="n", exclude_ids=ids[:50]),
        "allowed": lambda ix: ix.search(q, 5, namespace="n", allowed=set(ids[100:110])),
        "similarities": lambda ix: sorted(ix.similarities(q, ids[::7]).items()),
        "remove": lambda ix: (ix.remove(ids[:100]), len(ix), ix.search(q, 5, namespace="n")),
        "upsert": lambda ix: (
            ix.upsert([ids[3], "fresh"], ["n", "n"], new),
            len(ix),
            ix.search(new[0], 1, namespace="n"),
            ix.search(new[1], 1, namespace="n"),
        ),
    }
    for name, operation in operations.items():
        expected = operation(rebuilt())
        for order in (None, sort_order(ids)):  # a saved copy with or without its id order
            assert _rounded(operation(loaded(order))) == _rounded(expected), name


def _rounded(value: object) -> object:
    """``value`` with every float rounded (the two indexes normalise rows apart)."""
    if isinstance(value, float):
        return round(value, 5)
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value


def _memory_limit(mem: Memory) -> str:
    return mem.store.fetchone("SELECT current_setting('memory_limit')")[0]


def _bytes(shown: str) -> float:
    number, unit = shown.split()
    return float(number) * {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}[unit]


def test_a_store_keeps_duckdbs_memory_to_a_quarter_of_the_machine(store_path):
    """A memory library runs inside someone else's process: DuckDB's buffer pool may
    take a quarter of the machine (at least 512 MB), not DuckDB's own 80%."""
    import os

    from nbmemory.store.files import memory_limit

    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    wanted = max(512, (total >> 20) // 4) * 1000**2  # DuckDB's MB are 10^6 bytes
    assert memory_limit() == f"{max(512, (total >> 20) // 4)}MB"
    with Memory(store_path, embedder=RandomEmbedder()) as mem:
        shown = _bytes(_memory_limit(mem))
        assert abs(shown - wanted) <= 0.1 * 2**30 and shown < 0.5 * total


def test_building_the_index_leaves_duckdbs_memory_limit_as_it_was(store_path):
    """The build lowers DuckDB's cache for its one big scan, and puts the limit back:
    neither drifting (DuckDB shows it rounded down) nor dropping the user's own."""
    with Memory(store_path, embedder=RandomEmbedder()) as mem:
        mem.add_events([{"session_id": "s", "role": "user", "content": f"t{i}"} for i in range(30)])
        mem.flush()
        index = mem.indexes.vectors(mem.model_name)
        before = _memory_limit(mem)
        for _ in range(4):
            rebuilds = index.rebuilds
            mem.store.mark_stale()
            mem.search("t1", limit=3, mode="vector")
            assert index.rebuilds == rebuilds + 1
            assert _memory_limit(mem) == before
        mem.store.execute("SET memory_limit = '3GB'")
        mine, shown = _memory_limit(mem), set()
        for _ in range(3):
            mem.store.mark_stale()
            mem.search("t1", limit=3, mode="vector")
            shown.add(_memory_limit(mem))
        # the user's limit is kept, within the tenth DuckDB rounds it to, and stays put
        assert len(shown) == 1
        assert abs(float(shown.pop().split()[0]) - float(mine.split()[0])) <= 0.1 + 1e-9
