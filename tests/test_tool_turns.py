"""Tool-call turns: an assistant turn that only calls tools, as OpenAI-style agents log it.

``{"role": "assistant", "content": null, "tool_calls": [...]}`` is stored with its
content NULL (whatever blank it came as), never embedded, counted apart in
``status()``, and shown with its calls wherever turns are shown: ``events()``,
``recent()``, the context and its prompt, the notebook display, exports.  A turn
with neither content nor tool calls is still refused, naming the row.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from nbmemory import InvalidInput, Memory
from nbmemory.event_rows import tool_calls_text, turn_text

CALLS = [
    {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
]
#: How the turn reads in a prompt.
CALL_LINE = 'called get_weather({"city": "Paris"})'


def _conversation(mem: Memory, content: object = None) -> dict[str, str]:
    """A user question, the assistant's tool call, the tool's reply and the answer."""
    ids = {}
    ids["question"] = mem.add_event("s", "user", "What is the weather in Paris?").id
    ids["call"] = mem.add_event("s", "assistant", content, tool_calls=CALLS).id
    ids["reply"] = mem.add_event(
        "s", "tool", "Sunny, 21 C", tool_call_id="call_1", tool_name="get_weather"
    ).id
    ids["answer"] = mem.add_event("s", "assistant", "It is sunny in Paris, 21 C.").id
    return ids


def _stored(mem: Memory, event_id: str) -> tuple:
    return mem.store.fetchone(
        "SELECT content, tool_calls_json, embedding_model, embedding_error FROM events"
        " WHERE id = ?",
        [event_id],
    )


@pytest.mark.parametrize("content", [None, "", "  \n"], ids=["none", "empty", "blank"])
def test_a_tool_call_turn_without_text_is_stored_with_null_content(mem, content):
    ids = _conversation(mem, content)
    assert mem.flush()
    text, calls, model, error = _stored(mem, ids["call"])
    assert text is None and model is None and error is None  # never embedded, never failed
    assert json.loads(calls) == CALLS
    assert mem.get_event(ids["call"]).content is None
    assert mem.get_event(ids["call"]).importance == mem.settings.importance_by_role["assistant"]
    status = mem.status()
    assert (status["events"], status["embedded"], status["pending"], status["failed"]) == (
        4,
        3,
        0,
        0,
    )
    assert status["without_text"] == 1


def test_add_events_takes_tool_call_turns_from_dicts_and_dataframes(mem):
    rows = [
        {"session_id": "s", "role": "user", "content": "weather in Paris?"},
        {"session_id": "s", "role": "assistant", "content": None, "tool_calls": CALLS},
        {"session_id": "s", "role": "assistant", "content": "", "tool_calls": CALLS},
        {"session_id": "s", "role": "assistant", "tool_calls": CALLS},  # no content key
        {"session_id": "s", "role": "tool", "content": "Sunny", "tool_call_id": "call_1"},
    ]
    ids = mem.add_events(rows)
    frame = pd.DataFrame(rows)  # the missing content is NaN here
    assert math.isnan(frame.loc[3, "content"])
    ids += mem.add_events(frame, session_id="s")
    assert mem.flush()
    stored = mem.events()
    assert stored["id"].tolist() == ids
    assert stored["content"].isna().tolist() == [False, True, True, True, False] * 2
    calls = stored["tool_calls_json"].tolist()
    assert [json.loads(c) if isinstance(c, str) else None for c in calls] == (
        [None, CALLS, CALLS, CALLS, None] * 2
    )
    assert mem.status()["pending"] == 0 and mem.status()["without_text"] == 6


def _snapshot(mem: Memory) -> tuple:
    return (
        mem.events().to_json(date_format="iso"),
        mem.status()["counts"].to_json(date_format="iso"),
        mem.audit_log().to_json(date_format="iso"),
    )


@pytest.mark.parametrize(
    "row",
    [
        {"content": None},
        {"content": ""},
        {"content": None, "tool_calls": []},
        {"content": None, "tool_calls": {}},
        {"content": None, "tool_calls": "[]"},
        {"content": math.nan},  # a DataFrame's empty cell, in a dict: refused as not text
    ],
    ids=["none", "empty", "empty-list", "empty-dict", "empty-json", "nan"],
)
def test_a_turn_with_neither_content_nor_tool_calls_is_refused_naming_the_row(mem, row):
    _conversation(mem)
    assert mem.flush()
    before = _snapshot(mem)
    good = {"session_id": "s", "role": "user", "content": "fine"}
    with pytest.raises(InvalidInput, match=r"^row 1: content") as info:
        mem.add_events([good, {"session_id": "s", "role": "assistant", **row}])
    assert "\n" not in str(info.value)
    if not isinstance(row["content"], float):
        with pytest.raises(InvalidInput, match="content"):
            mem.add_event("s", "assistant", **row)
        frame = pd.DataFrame([good, {"session_id": "s", "role": "assistant", **row}])
        with pytest.raises(InvalidInput, match=r"^row 1: content"):
            mem.add_events(frame)
    assert _snapshot(mem) == before  # nothing of the refused calls was stored


def test_the_turn_is_shown_with_its_calls_in_recent_context_and_prompt(mem):
    ids = _conversation(mem)
    assert mem.flush()
    recent = mem.recent("s")
    call = recent[recent["id"] == ids["call"]].iloc[0]
    assert pd.isna(call["content"]) and json.loads(call["tool_calls_json"]) == CALLS
    context = mem.get_context("s", "weather in Paris")
    assert ids["call"] in context.ids
    prompt = context.to_prompt()
    lines = prompt.splitlines()
    assert any(line.endswith(f"assistant: {CALL_LINE}") for line in lines), prompt
    assert any(line.endswith("tool get_weather: Sunny, 21 C") for line in lines), prompt
    # the conversation reads in order: question, call, reply, answer
    order = [next(i for i, line in enumerate(lines) if part in line) for part in
             ("What is the weather", CALL_LINE, "Sunny, 21 C", "It is sunny")]  # fmt: skip
    assert order == sorted(order)
    assert CALL_LINE in context.to_text() and "get_weather" in context._repr_html_()
    assert context.to_frame().set_index("id").loc[ids["call"], "tool_calls_json"]
    assert "get_weather(" in mem.get_event(ids["call"])._repr_html_()


def test_a_tool_result_without_its_tools_name_is_named_after_the_call_it_answers(mem):
    """Agents often log a result by its ``tool_call_id`` alone: it was written
    ``tool: …`` while the call beside it said ``called get_weather(…)``."""
    mem.add_event("s", "assistant", None, tool_calls=CALLS)
    mem.add_event("s", "tool", "Sunny, 21 C", tool_call_id="call_1")
    mem.add_event("s", "tool", "no call of this id", tool_call_id="call_9")
    assert mem.flush()
    lines = mem.get_context("s", None).to_prompt().splitlines()
    assert any(line.endswith("tool get_weather: Sunny, 21 C") for line in lines), lines
    assert any(line.endswith("tool: no call of this id") for line in lines), lines


def test_a_turn_with_text_and_tool_calls_shows_both():
    assert turn_text("Let me check.", json.dumps(CALLS)) == f"Let me check. [{CALL_LINE}]"
    assert turn_text(None, json.dumps(CALLS)) == CALL_LINE
    assert turn_text("plain", None) == "plain"


@pytest.mark.parametrize(
    ("calls", "line"),
    [
        (CALLS, CALL_LINE),
        (  # Anthropic's tool_use block
            [{"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "tea"}}],
            'called search({"q": "tea"})',
        ),
        ([{"name": "ls", "args": ["-l"]}], 'called ls(["-l"])'),
        ({"tool_calls": CALLS}, CALL_LINE),
        (["free text"], "called free text"),
        ("not json at all", "called not json at all"),
    ],
    ids=["openai", "anthropic", "plain", "wrapped", "strings", "text"],
)
def test_tool_calls_read_as_one_line_in_the_common_shapes(mem, calls, line):
    event = mem.add_event("s", "assistant", None, tool_calls=calls)
    assert tool_calls_text(event.tool_calls_json) == line


def test_what_redaction_removed_from_the_calls_stays_removed_in_the_prompt(mem):
    token = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"
    calls = [{"function": {"name": "deploy", "arguments": json.dumps({"token": token})}}]
    event = mem.add_event("s", "assistant", None, tool_calls=calls)
    prompt = mem.get_context("s", "deploy").to_prompt()
    assert token not in prompt and token not in (event.tool_calls_json or "")
    assert "called deploy(" in prompt


def test_search_index_consolidation_and_export_take_a_null_content_row(store_path, tmp_path):
    with Memory(store_path, embedder="hash", background_consolidation=False) as mem:
        ids = _conversation(mem)
        assert mem.flush()
        for mode in ("vector", "keyword", "hybrid"):
            hits = mem.search("weather Paris", mode=mode)
            assert ids["call"] not in hits["id"].tolist()  # it has no text to match
            assert ids["question"] in hits["id"].tolist()
        assert mem.retry_failed_embeddings() == 0
        assert mem.reembed() == 0
        assert ids["call"] not in mem.memory_vectors()[0]["id"].tolist()
        report = mem.consolidate(older_than_hours=0)
        assert len(report.summary_ids) == 1 and report.ok
        export = tmp_path / "export.json"
        mem.export_json(export)
        item = next(e for e in json.loads(export.read_text())["events"] if e["id"] == ids["call"])
        assert item["content"] is None and json.loads(item["tool_calls_json"]) == CALLS
        mem.import_json(export, namespace="copy")
        copy = mem.events(namespace="copy")  # the ids are derived in another namespace
        turn = copy[copy["role"] == "assistant"].iloc[0]
        assert pd.isna(turn["content"]) and json.loads(turn["tool_calls_json"]) == CALLS
        mem.purge()
    with Memory(store_path, embedder="hash", background_consolidation=False) as again:
        # a reopened store queues nothing for the turn without text
        assert again.flush() and again.status()["pending"] == 0
        assert again.get_event(ids["call"]).content is None
        assert again.delete([ids["call"]]) == 1
