"""A session's tool history, read from the turns it recorded.

003 keeps a *histórico de ferramentas* in every session's operational state and
expects a continued session to have it (``tool_history_preserved: true``).  An
agent need not write it: the turns it records are the history.  Each tool call of
an assistant turn (``tool_calls=[...]``, OpenAI's or Anthropic's shape) is one
entry, and a ``role="tool"`` turn answering it (same ``tool_call_id``) fills that
entry's ``result``; a tool turn that answers no recorded call is an entry of its
own.  Text is as stored, so what redaction removed stays removed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..core import Core

#: Tool turns of a session read for its history (the most recent ones).
MAX_TURNS = 500


def _parsed(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def _calls(tool_calls_json: Any) -> list[Any]:
    calls = _parsed(tool_calls_json)
    if isinstance(calls, Mapping) and isinstance(calls.get("tool_calls"), list):
        calls = calls["tool_calls"]
    if calls is None or calls == "":
        return []
    return calls if isinstance(calls, list) else [calls]


def _call_entry(call: Any) -> tuple[str | None, Any, str | None]:
    """(tool name, arguments, call id) of one stored call, whatever its shape."""
    if not isinstance(call, Mapping):
        return (str(call), None, None)
    function = call.get("function")
    source = function if isinstance(function, Mapping) else call
    name = source.get("name")
    arguments = source.get("arguments", source.get("input", source.get("args")))
    call_id = call.get("id")
    return (
        None if name is None else str(name),
        _parsed(arguments),
        None if call_id is None else str(call_id),
    )


def tool_history(core: Core, namespace: str, session_id: str) -> list[dict[str, Any]]:
    """The session's tool calls, oldest first: ``tool``, ``arguments``, ``call_id``,
    ``result`` (the answering tool turn's content, or None), ``event_id``, ``at``."""
    entries: list[dict[str, Any]] = []
    by_call_id: dict[str, dict[str, Any]] = {}
    for turn in core.store.sessions.tool_turns(namespace, session_id, MAX_TURNS):
        for call in _calls(turn["tool_calls_json"]):
            name, arguments, call_id = _call_entry(call)
            entry = {
                "tool": name,
                "arguments": arguments,
                "call_id": call_id,
                "result": None,
                "event_id": turn["id"],
                "at": turn["created_at"],
            }
            entries.append(entry)
            if call_id is not None:
                by_call_id[call_id] = entry
        if turn["role"] != "tool":
            continue
        answered = by_call_id.get(turn["tool_call_id"] or "")
        if answered is not None and answered["result"] is None:
            answered["result"] = turn["content"]
            if answered["tool"] is None:
                answered["tool"] = turn["tool_name"]
            continue
        meta = _parsed(turn["metadata"])
        entries.append(
            {
                "tool": turn["tool_name"],
                "arguments": meta.get("args") if isinstance(meta, Mapping) else None,
                "call_id": turn["tool_call_id"],
                "result": turn["content"],
                "event_id": turn["id"],
                "at": turn["created_at"],
            }
        )
    return entries
