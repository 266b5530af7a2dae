"""The write path's batch shortcuts give exactly what the row-at-a-time path gives.

``build_rows`` checks a call's rows a column at a time and falls back to
``build_row`` per row when anything is out of the ordinary; the redactor skips
every pattern for a text none of their needles is in; the importance estimate
skips a text with no speaker in it; ``Table.to_arrow`` builds columns.  Each is
compared here with the slow path it replaces, over generated inputs.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from typing import Any
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbmemory import InvalidInput, Memory, Settings, importance, redaction
from nbmemory.event_rows import _build_each, build_row, build_rows, new_id, new_ids
from nbmemory.importance import estimate_importance
from nbmemory.redaction import Redactor
from nbmemory.store.connection import CHECKPOINT_THRESHOLD, Store
from nbmemory.store.schema import EVENTS

SETTINGS = Settings()

#: Values a field of a row may be given: good ones and every kind of bad one.
NAMES = st.one_of(
    st.sampled_from(["s1", "s2", "default", "ns", "user", "assistant", "tool", "message"]),
    st.sampled_from(["", "  ", "\ud800", None, 3, "x" * 5000, "nobody"]),
)
TEXTS = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", " \n", "\udfff", "I have a peanut allergy", "password: hunter2"]),
    st.sampled_from([None, 5, b"bytes"]),
)
OPTIONAL = {
    "importance": st.sampled_from([0.2, 1, 1.5, float("nan"), "high", True]),
    "created_at": st.sampled_from(
        ["2024-05-08T13:56:00Z", "yesterday", dt.datetime(2024, 1, 1, 12), 12]
    ),
    "metadata": st.sampled_from([{"a": 1}, {"a": float("nan")}, {1: "x"}, "text", []]),
    "kind": NAMES,
    "tool_name": NAMES,
    "id": st.sampled_from(["fixed-1", "fixed-2", "", None]),
    "colour": st.just("red"),
}


@st.composite
def raw_rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    rows = []
    for _ in range(draw(st.integers(0, 6))):
        row = {
            "session_id": draw(NAMES),
            "role": draw(st.sampled_from(["user", "assistant", "tool", "system", "nobody", 1])),
            "content": draw(TEXTS),
        }
        for name, values in OPTIONAL.items():
            if draw(st.integers(0, 5)) == 0:
                row[name] = draw(values)
        if draw(st.integers(0, 9)) == 0:
            del row["session_id"]
        rows.append(row)
    return rows


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        return "ok", call()
    except InvalidInput as exc:
        return "refused", str(exc)


def _comparable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows without what is fresh on each call (random ids, the clock's times)."""
    return [
        {k: v for k, v in row.items() if k not in ("id", "created_at", "updated_at")}
        for row in rows
    ]


def _one_at_a_time(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What build_rows did before it learnt to check columns: build_row per row."""
    raws = [{"namespace": "default", **row} for row in rows]
    built = _build_each(SETTINGS, raws)
    ids = [row["id"] for row in built]
    if len(set(ids)) != len(ids):
        raise InvalidInput("add_events: duplicate ids in the input")
    return built


@settings(max_examples=300, deadline=None)
@given(raw_rows())
def test_the_batch_validator_accepts_and_refuses_what_build_row_does(rows):
    fast = _outcome(lambda: build_rows(SETTINGS, [dict(r) for r in rows], namespace="default"))
    slow = _outcome(lambda: _one_at_a_time([dict(r) for r in rows]))
    assert fast[0] == slow[0], (fast, slow)
    if fast[0] == "refused":
        assert fast[1] == slow[1]  # the same row, the same words
    else:
        assert _comparable(fast[1]) == _comparable(slow[1])
        for made, given_row in zip(fast[1], rows, strict=True):
            if given_row.get("id") is not None:
                assert made["id"] == given_row["id"]
            if given_row.get("created_at") is not None:
                assert (
                    made["created_at"]
                    == build_row(SETTINGS, namespace="default", **given_row)["created_at"]
                )


def test_a_bad_row_late_in_a_large_call_is_named():
    rows = [{"session_id": "s", "role": "user", "content": f"turn {i}"} for i in range(5000)]
    rows[4321]["content"] = "   "
    with pytest.raises(InvalidInput, match=r"^row 4321: content is empty"):
        build_rows(SETTINGS, rows, namespace="default")
    rows[4321]["content"] = "fine"
    rows[17]["role"] = "robot"
    with pytest.raises(InvalidInput, match=r"^row 17: unknown role 'robot'"):
        build_rows(SETTINGS, rows, namespace="default")


def test_a_row_that_is_not_a_dict_comes_after_an_earlier_rows_error():
    rows: list[Any] = [{"session_id": "s", "role": "robot", "content": "x"}, ["not", "a dict"]]
    with pytest.raises(InvalidInput, match=r"^row 0: unknown role"):
        build_rows(SETTINGS, iter(rows), namespace="default")
    rows[0]["role"] = "user"
    with pytest.raises(InvalidInput, match=r"^row 1 is a list"):
        build_rows(SETTINGS, iter(rows), namespace="default")


def test_rows_without_a_time_share_one_clock_reading_and_get_fresh_ids():
    rows = [{"session_id": "s", "role": "user", "content": f"turn {i}"} for i in range(300)]
    built = build_rows(SETTINGS, rows, namespace="default")
    assert len({row["created_at"] for row in built}) == 1
    assert all(row["updated_at"] == row["created_at"] for row in built)
    assert len({row["id"] for row in built}) == 300


def test_new_ids_are_version_7_uuids_of_the_time_they_were_made():
    before = time.time_ns() // 1_000_000
    ids = new_ids(2000) + [new_id() for _ in range(2000)]
    after = time.time_ns() // 1_000_000
    assert len(set(ids)) == 4000 and new_ids(0) == []
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 7
        assert parsed.variant == uuid.RFC_4122
        assert before <= parsed.int >> 80 <= after  # the first 48 bits: Unix ms


def test_ids_made_in_a_later_millisecond_sort_after():
    first = new_ids(50)
    start = time.time_ns() // 1_000_000
    while time.time_ns() // 1_000_000 == start:  # the clock, not a sleep, moves on
        pass
    later = new_ids(50) + [new_id()]
    assert max(first) < min(later)


SECRETS = [
    "password: hunter2",
    "api_key = 'abc def'",
    "AKIAABCDEFGHIJKLMNOP",
    "ghp_" + "a" * 36,
    "sk-" + "b" * 24,
    "Authorization: Bearer abcdefghijklmnop1234",
    "postgres://me:pa55@host/db",
    "4111 1111 1111 1111",
    "4111111111111112",
    "token=abc",
    "my keyboard: a monkey",
    "eyJabcdef.eyJabcdef.abcdefg",
]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.one_of(st.text(max_size=40), st.sampled_from(SECRETS)), min_size=1, max_size=5).map(
        " ".join
    )
)
def test_the_redaction_shortcut_changes_nothing(text):
    """A text without any needle is returned at once; with every needle gone, each
    pattern runs on every text: the results are the same."""
    fast = Redactor().redact(text)
    with mock.patch.dict(redaction._COMPILED_NEEDLES, clear=True):
        slow = Redactor().redact(text)
    assert fast == slow


def test_custom_patterns_still_run_on_texts_without_a_needle():
    assert Redactor(["internal-[0-9]+"]).redact("see internal-42 today").count == 1


def _estimate_sentence_by_sentence(text: str, role: str) -> float:
    """The estimate as it was before the whole-text speaker check."""
    if role in importance.UNSCORED_ROLES or not text:
        return 0.0
    text = text[: importance.MAX_CHARS].replace("\u2019", "'")
    sentences = importance.SENTENCES.split(text)
    return max((importance._sentence_score(s.strip()) for s in sentences if s), default=0.0)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=30),
            st.sampled_from(
                [
                    "I'm vegetarian.",
                    "my sister lives in Kyoto;",
                    "we have a $200 budget",
                    "Remember that I hate olives!",
                    "ÏMY DOG",
                    "i\u2019m allergic to nuts\n",
                    "what do I need?",
                ]
            ),
        ),
        max_size=5,
    ).map(" ".join),
    st.sampled_from(["user", "assistant"]),
)
def test_the_importance_prefilter_changes_nothing(text, role):
    assert estimate_importance(text, role) == _estimate_sentence_by_sentence(text, role)


def test_to_arrow_builds_what_from_pylist_builds():
    rows = build_rows(
        SETTINGS,
        [
            {"session_id": "s", "role": "user", "content": "a", "metadata": {"k": "v"}},
            {"session_id": "t", "role": "tool", "content": "b", "tool_name": "search"},
        ],
        namespace="default",
    )
    rows.append({"id": "partial", "session_id": "s"})  # missing keys are NULL
    expected = pa.Table.from_pylist(
        [{name: row.get(name) for name in EVENTS.names} for row in rows],
        schema=EVENTS.arrow_schema,
    )
    assert EVENTS.to_arrow(rows).equals(expected)


def test_vectors_are_written_only_for_the_text_the_event_still_holds(tmp_path):
    """The worker's write picks its rows with a SELECT and marks them with an UPDATE of
    the same condition: only events still holding the text and not yet embedded."""
    with Memory(str(tmp_path / "v.duckdb"), embedder="hash", background_consolidation=False) as mem:
        core = mem._core
        core.worker.stop()  # the vectors are written by hand below
        ids = mem.add_events(
            [{"session_id": "s", "role": "user", "content": f"turn {i}"} for i in range(5)]
        )
        store = core.store
        with store.transaction():  # the text changed after it was queued
            store.run("UPDATE events SET content = 'changed' WHERE id = ?", [ids[1]])
        vectors = np.ones((5, 3), dtype=np.float32) * np.arange(1, 6)[:, None]
        texts = [f"turn {i}" for i in range(5)]
        with core.writer.transaction() as tx:
            written = tx.vectors.write_vectors(ids, vectors, "m", texts)
        assert sorted(written) == sorted([ids[0], *ids[2:]])
        with core.writer.transaction() as tx:  # already embedded: nothing again
            assert tx.vectors.write_vectors(ids, vectors, "m", texts) == []
        rows = dict(store.run("SELECT id, embedding FROM event_vectors WHERE model = 'm'"))
        assert set(rows) == set(written)
        assert rows[ids[3]] == pytest.approx([4.0, 4.0, 4.0])
        models = dict(store.run("SELECT id, embedding_model FROM events"))
        assert models[ids[1]] is None and models[ids[0]] == "m"


def test_a_writable_store_checkpoints_less_often_than_duckdb_by_default(tmp_path):
    path = str(tmp_path / "c.duckdb")
    store = Store(path)
    try:
        (shown,) = store.run("SELECT current_setting('checkpoint_threshold')")[0]
        assert shown.startswith(str(int(CHECKPOINT_THRESHOLD.removesuffix("MB")) - 24))
    finally:
        store.close()


def test_vectors_are_stored_without_float_compression(tmp_path):
    """ALP / ALP-RD cost checkpoint time and saved nothing on embeddings: not used."""
    path = str(tmp_path / "c.duckdb")
    store = Store(path)
    try:
        with store.transaction():
            store.run(
                "INSERT INTO event_vectors (id, namespace, model, embedding) SELECT 'e' || i, 'default', 'm',"
                " [random()::FLOAT for _ in range(384)] FROM range(3000) t(i)"
            )
        store.run("CHECKPOINT")
        used = {
            row[0]
            for row in store.run(
                "SELECT DISTINCT compression FROM pragma_storage_info('event_vectors')"
            )
        }
        assert "Uncompressed" in used and not used & {"ALP", "ALPRD"}
    finally:
        store.close()
