"""add_events(DataFrame) is built a column at a time; it stores what the row-by-row
path stores from the same rows given as dicts, and refuses the same bad input."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nbmemory import Memory
from nbmemory.config import Settings
from nbmemory.errors import InvalidInput
from nbmemory.event_columns import ROW_KEYS, BuiltRows
from nbmemory.event_rows import build_rows
from nbmemory.validation import is_missing

SECRET = "my password is hunter2-Correct-Horse"
#: Every key of a built row but those each build makes anew (ids, times) or leaves
#: to the worker (the model).
_COMPARED = [
    key for key in ROW_KEYS if key not in {"id", "created_at", "updated_at", "embedding_model"}
]


def _frame() -> pd.DataFrame:
    paris = dt.timezone(dt.timedelta(hours=2))
    return pd.DataFrame(
        {
            "session_id": ["a", "a", "b", "b", "c"],
            "role": ["user", "assistant", "user", "tool", "system"],
            "content": [
                "I'm vegetarian with a severe peanut allergy",
                "Noted.",
                SECRET,
                "tool output 42",
                "be brief",
            ],
            "importance": [np.nan, 0.9, np.nan, 0.0, 1.0],
            "metadata": [{"k": 1}, None, {"z": "y", "a": [1, 2]}, np.nan, {}],
            "created_at": pd.to_datetime(
                [
                    dt.datetime(2024, 5, 8, 13, 56, tzinfo=paris),
                    dt.datetime(2024, 5, 8, 12, 0, tzinfo=dt.timezone.utc),
                    None,
                    dt.datetime(2023, 1, 1, tzinfo=dt.timezone.utc),
                    dt.datetime(2025, 12, 31, 23, 59, 59, 123456, tzinfo=paris),
                ],
                utc=True,
            ).tz_convert("Europe/Paris"),
        }
    )


def _dicts(frame: pd.DataFrame) -> list[dict]:
    return [
        {k: v for k, v in row.items() if not is_missing(v)}
        for row in frame.to_dict(orient="records")
    ]


def _stored(path: Path, rows) -> pd.DataFrame:
    mem = Memory(str(path), embedder="hash")
    try:
        ids = mem.add_events(rows)
        mem.flush()
        frame = mem.events().set_index("id").loc[ids].reset_index()
    finally:
        mem.close()
    return frame


def test_a_dataframe_stores_what_the_same_rows_as_dicts_store(tmp_path: Path) -> None:
    frame = _frame()
    columnar = _stored(tmp_path / "a.duckdb", frame)
    per_row = _stored(tmp_path / "b.duckdb", _dicts(frame))
    pd.testing.assert_frame_equal(columnar[_COMPARED], per_row[_COMPARED])
    assert columnar["created_at"].iloc[0] == pd.Timestamp("2024-05-08 11:56:00")
    assert columnar["created_at"].iloc[4] == pd.Timestamp("2025-12-31 21:59:59.123456")
    assert (columnar["created_at"] == per_row["created_at"]).sum() == 4  # NaT: the clock
    assert (columnar["updated_at"] == columnar["created_at"]).all()
    assert "hunter2" not in columnar["content"].iloc[2]
    assert columnar["importance"].iloc[0] > 0.5  # estimated from the text


def test_the_columnar_rows_equal_the_row_by_row_rows() -> None:
    settings = Settings()
    frame = _frame().drop(columns=["created_at"])
    fast = build_rows(settings, frame, namespace="default")
    slow = build_rows(settings, _dicts(frame), namespace="default")
    assert isinstance(fast, BuiltRows) and not isinstance(slow, BuiltRows)
    for a, b in zip(fast, slow, strict=True):
        assert a.keys() == b.keys()
        assert {k: v for k, v in a.items() if k not in ("id", "created_at", "updated_at")} == {
            k: v for k, v in b.items() if k not in ("id", "created_at", "updated_at")
        }
    assert len({row["id"] for row in fast}) == len(fast)


def test_text_times_and_missing_optional_columns_are_read_as_one_row_reads_them() -> None:
    settings = Settings()
    frame = pd.DataFrame(
        {
            "role": ["user", "user"],
            "content": ["x", "y"],
            "created_at": ["2024-05-08T13:56:00+02:00", None],
        }
    )
    fast = build_rows(settings, frame, namespace="n", session_id="s")
    assert isinstance(fast, BuiltRows)
    assert fast[0]["created_at"] == dt.datetime(2024, 5, 8, 11, 56)
    assert fast[0]["session_id"] == "s" and fast[0]["namespace"] == "n"
    assert fast[0]["kind"] == "message" and fast[1]["metadata"] is None


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (pd.DataFrame({"session_id": ["a", "a"], "role": ["user", "user"]}), "content"),
        (
            pd.DataFrame(
                {"session_id": ["a", "a"], "role": ["user", "user"], "content": ["x", None]}
            ),
            "row 1",
        ),  # fmt: skip
        (
            pd.DataFrame({"session_id": [1, 2], "role": ["user", "user"], "content": ["x", "y"]}),
            "session_id",
        ),  # fmt: skip
        (
            pd.DataFrame(
                {
                    "session_id": ["a", "a"],
                    "role": ["user", "user"],
                    "content": ["x", "y"],
                    "importance": [0.5, 2.0],
                }
            ),
            "row 1",
        ),  # fmt: skip
        (
            pd.DataFrame(
                {
                    "session_id": ["a", "a"],
                    "role": ["user", "user"],
                    "content": ["x", "y"],
                    "importance": ["high", "low"],
                }
            ),
            "importance",
        ),  # fmt: skip
        (
            pd.DataFrame(
                {"session_id": ["a", "a"], "role": ["user", "robot"], "content": ["x", "y"]}
            ),
            "unknown role",
        ),  # fmt: skip
        (
            pd.DataFrame(
                {
                    "session_id": ["a", "a"],
                    "role": ["user", "user"],
                    "content": ["x", "y"],
                    "created_at": ["2024-01-01", "soon"],
                }
            ),
            "row 1",
        ),  # fmt: skip
        (
            pd.DataFrame(
                {"session_id": ["a"], "role": ["user"], "content": ["x"], "colour": ["red"]}
            ),
            "unknown field",
        ),  # fmt: skip
    ],
)
def test_bad_frames_are_refused_in_one_line_and_nothing_is_stored(
    mem, frame: pd.DataFrame, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message) as caught:
        mem.add_events(frame)
    assert "\n" not in str(caught.value)
    assert mem.status()["events"] == 0


def test_the_built_rows_have_the_columns_of_events() -> None:
    from nbmemory.store.schema import EVENTS

    assert EVENTS.names == ROW_KEYS


def test_a_secret_in_a_frame_is_redacted_in_the_stored_row_and_counted(mem) -> None:
    frame = pd.DataFrame(
        {"session_id": ["a"] * 3, "role": ["user"] * 3, "content": ["hi", SECRET, "bye"]}
    )
    before = frame["content"].tolist()
    ids = mem.add_events(frame)
    assert frame["content"].tolist() == before  # the caller's frame is left alone
    stored = mem.get(ids[1]).content
    assert "hunter2" not in stored and "[REDACTED]" in stored
    assert mem.get(ids[0]).content == "hi"
    details = mem.audit_log()["details"].tolist()
    assert any('"redacted": 1' in str(d) or "'redacted': 1" in str(d) for d in details)


def test_the_batch_estimate_equals_the_estimate_of_each_text() -> None:
    from nbmemory.importance import estimate_importance, estimate_importances

    texts = [
        "I'm vegetarian with a severe peanut allergy",
        "thanks!",
        "My sister’s birthday is on 12 March",
        "",
        "x " * 2500 + "I am allergic to cats",  # the speaker after the part read
        "We moved to Berlin in 2019",
        "İstanbul is where I live",  # lowercases to two characters
        "what do I like?",
        "ICH BIN's MY OWN",
        "Heads up: the API moved to port 8443.",  # no speaker: a settled cue
        "user session token flush",  # neither ("user" is not "use")
        "Décision : Use httpx instead of requests",
    ]
    roles = ["user", "user", "user", "user", "user", "assistant", "user", "user", "user"]
    roles += ["user", "user", "user"]
    expected = [estimate_importance(t, r) for t, r in zip(texts, roles, strict=True)]
    assert estimate_importances(texts, roles) == expected
    assert estimate_importances(texts[:6], roles[:6]) == expected[:6]
    assert any(value > 0 for value in expected)
