"""Namespace isolation (seed 003), as a property: nothing done in one namespace reads or changes another."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbmemory import Memory, MemoryNotFound

#: One property test of many generated calls over several namespaces.
pytestmark = pytest.mark.slow

NAMESPACES = ["alpha", "beta", "gamma"]
SESSIONS = ["s1", "s2", "shared"]
WORDS = ["budget", "deadline", "typescript", "coffee", "paris", "dog", "music", "python"]

memory_rows = st.fixed_dictionaries(
    {
        "namespace": st.sampled_from(NAMESPACES),
        "session_id": st.sampled_from(SESSIONS),
        "role": st.sampled_from(["user", "assistant", "tool", "system"]),
        "content": st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join),
        "importance": st.floats(min_value=0.0, max_value=1.0),
    }
)


def _snapshot(mem: Memory, namespace: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every event (vectors as bytes) and session row outside ``namespace``."""
    events = mem.store.df(
        "SELECT e.*, v.model, v.embedding FROM events e LEFT JOIN event_vectors v USING (id)"
        " WHERE e.namespace <> ? ORDER BY id",
        [namespace],
    ).reset_index(drop=True)
    events["embedding"] = [
        None if not isinstance(v, np.ndarray) else v.tobytes() for v in events["embedding"]
    ]
    sessions = mem.store.df(
        "SELECT * FROM sessions WHERE namespace <> ? ORDER BY namespace, session_id", [namespace]
    ).reset_index(drop=True)
    return events, sessions


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    rows=st.lists(memory_rows, min_size=1, max_size=25),
    target=st.sampled_from(NAMESPACES),
    query=st.sampled_from(WORDS),
    session=st.sampled_from(SESSIONS),
)
def test_no_call_in_one_namespace_reads_or_changes_another(
    rows: list[dict], target: str, query: str, session: str
) -> None:
    with tempfile.TemporaryDirectory() as folder, Memory(":memory:", embedder="hash") as mem:
        mem.add_events(rows)
        for ns in NAMESPACES:  # a tracked session in every namespace
            mem.start_session("user-1", namespace=ns, session_id=session)
        mem.flush()
        before = _snapshot(mem, target)
        mine = set(mem.events(namespace=target)["id"])
        others = set(before[0]["id"])

        # reads return only the target's rows
        hits = mem.search(query, namespace=target, limit=50)
        assert set(hits["namespace"]) <= {target} and set(hits["id"]) <= mine
        assert set(mem.search(query, namespace=target, threshold=0.0)["id"]) <= mine
        context = mem.get_context(session, query, namespace=target, relevance_threshold=0.0)
        assert set(context.ids) <= mine
        assert set(mem.events(namespace=target)["namespace"]) <= {target}
        assert set(mem.recent(session, 50, namespace=target)["id"]) <= mine
        listing = mem.sessions(target)
        assert set(listing["namespace"]) == {target}
        for other_id in sorted(others)[:3]:
            with pytest.raises(MemoryNotFound):
                mem.get_event(other_id, namespace=target)

        # writes change only the target's rows
        mem.add_event(session, "user", f"new {query}", namespace=target)
        mem.save_session_state(session, {"current_plan": [query]}, namespace=target)
        mem.clock = lambda: pd.Timestamp("2100-01-01").to_pydatetime()  # everything expired
        mem.cleanup_sessions(namespace=target)
        deleted = mem.delete(sorted(others | mine), namespace=target)
        assert deleted == len(mine)
        agents = Path(folder) / "AGENTS.md"
        agents.write_text(f"# Rules\n\nAlways {query}.\n", encoding="utf-8")
        mem.sync_agents_md(agents, namespace=target)
        mem.add_event("s1", "user", f"exported {query}", namespace=target)
        exported = Path(folder) / "export.json"
        mem.export_json(exported, namespace=target)
        document = json.loads(exported.read_text(encoding="utf-8"))
        assert {e["namespace"] for e in document["events"]} == {target}
        mem.delete(list(mem.events(namespace=target)["id"]), namespace=target)
        mem.import_json(exported)
        mem.import_json(exported, namespace=target)
        mem.flush()

        after = _snapshot(mem, target)
        pd.testing.assert_frame_equal(before[0], after[0], check_exact=True)
        pd.testing.assert_frame_equal(before[1], after[1], check_exact=True)
        assert set(mem.audit_log(namespace=target)["namespace"]) == {target}
