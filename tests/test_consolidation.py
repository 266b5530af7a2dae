"""Consolidation: old messages -> summaries + facts, never losing events when it fails."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import textwrap
import threading

import pytest

from nbmemory import InvalidInput, Memory
from nbmemory.knowledge.summarizer import Summary, extractive_summary

NOW = dt.datetime(2024, 5, 8, 12, 0)
OLD = NOW - dt.timedelta(hours=10)

CONVERSATION = [
    ("user", "Hi! My name is John and I love TypeScript."),
    ("assistant", "Nice to meet you, John. TypeScript is a great language."),
    ("user", "I live in Lisbon. I work at Acme Robotics."),
    ("assistant", "Lisbon is lovely. What does Acme Robotics build?"),
    ("user", "Warehouse robots. We are migrating the robot fleet software to TypeScript."),
]


def _seed(mem, session="s1", start=OLD, rows=CONVERSATION):
    ids = []
    for i, (role, text) in enumerate(rows):
        event = mem.add_event(session, role, text, created_at=start + dt.timedelta(minutes=i))
        ids.append(event.id)
    return ids


def _unconsolidated(mem):
    return mem.store.fetchone(
        "SELECT count(*) FROM events WHERE kind = 'message' AND consolidated_at IS NULL"
    )[0]


def _summaries(mem):
    return mem.events(kind="summary")


def test_failing_summarizer_leaves_every_event_unconsolidated_and_retries(mem):
    _seed(mem, "s1")
    _seed(mem, "s2")
    calls = []

    def broken(events):
        calls.append(len(events))
        raise TimeoutError("LLM unreachable")

    report = mem.consolidate(summarizer=broken, now=NOW)
    assert calls == [5, 5]
    assert set(report.failures) == {"s1", "s2"}
    assert "LLM unreachable" in report.failures["s1"]
    assert report.consolidated == 0 and not report.ok
    assert _unconsolidated(mem) == 10
    assert _summaries(mem).empty
    assert mem.facts().empty
    # next run (a working summarizer) picks every one of them up
    report = mem.consolidate(now=NOW + dt.timedelta(hours=6))
    assert report.ok and report.consolidated == 10
    assert _unconsolidated(mem) == 0
    assert len(_summaries(mem)) == 2


def test_successful_consolidation_writes_summaries_and_facts(mem):
    ids = _seed(mem)
    report = mem.consolidate(now=NOW)
    assert report.sessions == ["s1"] and report.consolidated == 5
    summary = mem.get_memory(report.summary_ids[0])
    assert summary.kind == "summary"
    assert summary.session_id == "s1"
    # the largest of its turns' (the name and the preference, 0.9)
    assert summary.importance == max(mem.get(i).importance for i in ids) == pytest.approx(0.9)
    assert summary.metadata["source_ids"] == ids
    assert summary.metadata["summarizer"] == "extractive_summary"
    assert "TypeScript" in summary.content
    stored = mem.events(session_id="s1", kind="message")
    assert stored["consolidated_at"].notna().all()
    facts = {(r.category, r.key): (r.value, r.source) for r in mem.facts().itertuples()}
    assert facts[("user", "name")] == ("John", "consolidation")
    assert facts[("user", "location")][0] == "Lisbon"
    assert facts[("user", "employer")][0] == "Acme Robotics"
    assert facts[("preference", "typescript")][0] == "loves TypeScript"
    assert len(mem.audit_log(action="consolidate")) == 1
    # a second run finds nothing new
    again = mem.consolidate(now=NOW)
    assert again.consolidated == 0 and again.summary_ids == []


def test_recent_events_and_non_messages_are_left_alone(mem):
    _seed(mem, "old")
    _seed(mem, "fresh", start=NOW - dt.timedelta(hours=1))
    mem.add_memory("a memory, not a message")
    report = mem.consolidate(now=NOW)
    assert report.sessions == ["old"]
    assert _unconsolidated(mem) == 5
    assert mem.consolidate(now=NOW, older_than_hours=0).sessions == ["fresh"]
    assert mem.store.fetchone(
        "SELECT count(*) FROM events WHERE kind <> 'message' AND consolidated_at IS NOT NULL"
    ) == (0,)


def test_summaries_join_get_context_and_originals_stay_queryable(mem):
    ids = _seed(mem)
    for i in range(12):  # newer chatter pushes the old turns out of recency
        mem.add_event("s1", "user", f"filler message {i}", created_at=NOW + dt.timedelta(minutes=i))
    report = mem.consolidate(now=NOW + dt.timedelta(minutes=30))
    mem.flush()
    context = mem.get_context("s1")
    assert report.summary_ids[0] in context.ids
    assert "salience" in next(i for i in context if i.id == report.summary_ids[0]).strategies
    hits = mem.search("Acme Robotics warehouse", limit=10)
    assert ids[2] in set(hits["id"])
    assert mem.get_event(ids[0]).content == CONVERSATION[0][1]


def test_a_failing_later_chunk_keeps_order_and_retries(mem):
    _seed(mem)
    seen = []

    def flaky(events):
        seen.append([e["content"] for e in events])
        if len(seen) == 2:
            raise RuntimeError("rate limited")
        return Summary(f"summary of {len(events)}", [("topic", f"chunk{len(seen)}", "x")])

    report = mem.consolidate(summarizer=flaky, now=NOW, chunk_size=2)
    assert report.consolidated == 2 and "rate limited" in report.failures["s1"]
    assert len(seen) == 2  # the third chunk waits for the second
    assert _unconsolidated(mem) == 3
    report = mem.consolidate(summarizer=flaky, now=NOW, chunk_size=2)
    assert report.ok and report.consolidated == 3
    assert _unconsolidated(mem) == 0
    assert list(mem.facts("topic")["source"]) == ["consolidation"] * 3


@pytest.mark.parametrize(
    "result",
    [None, "", "   ", 42, {"facts": []}, {"summary": "ok", "facts": [("", "k", "v")]}],
)
def test_unusable_summaries_count_as_failures(mem, result):
    _seed(mem)
    report = mem.consolidate(summarizer=lambda events: result, now=NOW)
    assert "s1" in report.failures
    assert _unconsolidated(mem) == 5
    assert _summaries(mem).empty


def test_dict_summaries_with_facts(mem):
    _seed(mem)

    def llm(events):
        return {
            "summary": "John, a TypeScript fan from Lisbon, works at Acme Robotics.",
            "facts": [{"category": "user", "key": "name", "value": "John"}],
        }

    mem.set_fact("user", "name", "Jon", source="user")
    report = mem.consolidate(summarizer=llm, now=NOW)
    assert report.facts == 1
    assert mem.get_fact("user", "name")["value"] == "John"
    assert list(mem.fact_history("user", "name")["value"]) == ["Jon"]
    summaries = _summaries(mem)
    assert summaries["content"].tolist() == [
        "John, a TypeScript fan from Lisbon, works at Acme Robotics."
    ]


def test_a_failure_while_storing_rolls_back_the_summary(mem, monkeypatch):
    _seed(mem)

    def broken_upsert(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(mem.store.facts, "upsert", broken_upsert)
    with pytest.raises(RuntimeError, match="disk full"):
        mem.consolidate(now=NOW)
    assert _summaries(mem).empty
    assert _unconsolidated(mem) == 5


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"older_than_hours": -1}, "older_than_hours"),
        ({"older_than_hours": "6"}, "older_than_hours"),
        ({"chunk_size": 0}, "chunk_size"),
        ({"summary_importance": 1.5}, "summary_importance"),
        ({"summarizer": "gpt"}, "summarizer"),
        ({"now": "noonish"}, "now"),
        ({"session_id": ""}, "session_id"),
    ],
)
def test_consolidate_bad_inputs(mem, kwargs, message):
    with pytest.raises(InvalidInput, match=message):
        mem.consolidate(**kwargs)


def test_extractive_summary_keeps_central_sentences_in_order():
    events = [
        {"role": "user", "content": text, "created_at": OLD + dt.timedelta(minutes=i)}
        for i, (_, text) in enumerate(CONVERSATION)
    ]
    summary = extractive_summary(events, max_sentences=3)
    lines = summary.text.splitlines()
    assert lines[0].startswith("Summary of 5 events (2024-05-08 02:00 to 2024-05-08 02:04)")
    assert len(lines) == 4
    positions = [
        next(i for i, e in enumerate(events) if line[8:] in e["content"]) for line in lines[1:]
    ]
    assert positions == sorted(positions)
    assert any("TypeScript" in line for line in lines[1:])
    with pytest.raises(ValueError):
        extractive_summary([{"role": "user", "content": "  "}])


def test_background_consolidation_runs_on_trigger_and_stops_on_close(store_path):
    called = threading.Event()

    def summarizer(events):
        called.set()
        return "background summary"

    mem = Memory(store_path, embedder="hash")
    _seed(mem)
    default = mem.consolidator  # started with the store
    consolidator = mem.start_consolidation(summarizer=summarizer, interval_hours=1000)
    assert not default.alive and mem.consolidator is consolidator  # replaced, not doubled
    assert consolidator.runs == 0
    assert consolidator.wait_for_run(consolidator.trigger(), timeout=30)
    assert called.is_set()
    assert consolidator.last_error is None
    assert consolidator.last_report.consolidated == 5
    assert _summaries(mem)["content"].tolist() == ["background summary"]
    mem.close()
    assert not consolidator.alive
    assert mem.consolidator is None


def test_stop_and_restart_consolidation(mem):
    with pytest.raises(InvalidInput, match="interval_hours"):
        mem.start_consolidation(interval_hours=0)
    first = mem.start_consolidation(interval_hours=1000)
    assert mem.stop_consolidation() is True
    assert not first.alive
    assert mem.stop_consolidation() is False
    second = mem.start_consolidation(interval_hours=1000)
    assert second.alive and mem.consolidator is second


@pytest.mark.slow
def test_running_consolidation_never_blocks_interpreter_exit(tmp_path):
    script = textwrap.dedent(
        f"""
        from nbmemory import Memory
        mem = Memory({str(tmp_path / "exit.duckdb")!r}, embedder="hash")
        mem.start_consolidation(interval_hours=1000)
        print("started", flush=True)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "started"


def test_summaries_and_their_facts_are_redacted(mem):
    _seed(mem)
    secret = "xoxb-" + "1" * 20

    def leaky(events):
        return {"summary": f"user pasted {secret}", "facts": [("config", "slack", secret)]}

    mem.consolidate(summarizer=leaky, now=NOW)
    assert secret not in _summaries(mem)["content"].iloc[0]
    assert secret not in mem.get_fact("config", "slack")["value"]


def test_background_consolidation_starts_with_the_store_and_stops_on_close(store_path):
    """Seed 000: a background task every consolidation_interval_hours, without asking."""
    mem = Memory(store_path, embedder="hash")
    consolidator = mem.consolidator
    assert consolidator is not None and consolidator.alive
    mem.close()
    assert not consolidator.alive
    with Memory(store_path, embedder="hash", background_consolidation=False) as quiet:
        assert quiet.consolidator is None
    with Memory(store_path, embedder="hash", read_only=True) as reader:
        assert reader.consolidator is None


# -- where a summary sits, what it weighs, what it quotes ----------------------------------


def test_a_summary_is_dated_at_its_last_turn_and_sorts_before_a_later_correction() -> None:
    """The summary of 3-day-old turns was dated at the run (now): the newest line of the
    prompt, after the correction of what it summarised ("port 8080" after "moved to 8443")."""
    now = dt.datetime(2024, 5, 8, 12, 0, tzinfo=dt.timezone.utc)
    old = now - dt.timedelta(days=3)
    with Memory(":memory:", embedder="hash", background_consolidation=False) as mem:
        first = mem.add_event(
            "d1", "user", "Our API runs on port 8080 behind nginx.", created_at=old
        )
        last = mem.add_event(
            "d1", "assistant", "Noted, port 8080.", created_at=old + dt.timedelta(minutes=1)
        )
        fix = mem.add_event(
            "d2",
            "user",
            "Update: the API moved to port 8443.",
            created_at=now - dt.timedelta(hours=2),
        )
        report = mem.consolidation.run(now=now)
        summary = mem.get(report.summary_ids[0])
        assert summary.created_at == last.created_at > first.created_at
        assert summary.metadata["consolidated_at"] == now.replace(tzinfo=None).isoformat()
        assert summary.metadata["last_at"] == last.created_at.isoformat()
        mem.flush()
        prompt = mem.get_context("d3", "what is the API port?").to_prompt()
        assert "Noted, port 8080." in prompt and fix.content in prompt
        assert prompt.rindex("Noted, port 8080.") < prompt.index(fix.content)


def test_a_summary_weighs_what_its_sources_weigh() -> None:
    """A summary got importance 0.9 whatever it summarised: five of them took every
    salience slot from the preference they summarise."""
    with Memory(":memory:", embedder="hash", background_consolidation=False) as mem:
        chat = [
            mem.add_event("chat", "user", "Thanks, that fixed it!", created_at=OLD),
            mem.add_event("chat", "assistant", "Glad it works.", created_at=OLD),
        ]
        prefs = [
            mem.add_event("prefs", "user", "Let me check the logs first.", created_at=OLD),
            mem.add_event("prefs", "user", "I prefer short answers with code.", created_at=OLD),
        ]
        report = mem.consolidation.run(now=NOW)
        by_session = {mem.get(i).session_id: mem.get(i) for i in report.summary_ids}
        assert by_session["chat"].importance == max(e.importance for e in chat) == 0.5
        assert by_session["prefs"].importance == max(e.importance for e in prefs)
        assert by_session["prefs"].importance == prefs[1].importance >= 0.8
        # an explicit importance still wins
        mem.add_event("later", "user", "Thanks!", created_at=OLD)
        again = mem.consolidation.run(now=NOW, summary_importance=0.95)
        assert mem.get(again.summary_ids[0]).importance == 0.95


TRACEBACK_TURN = """This happens on every deploy since this morning:

```
Traceback (most recent call last):
  File "/srv/billing-api/.venv/lib/python3.11/site-packages/sqlalchemy/engine/base.py", line 145, in __init__
    self._dbapi_connection = engine.raw_connection()
psycopg.OperationalError: connection failed: remaining connection slots are reserved
```

what's going on?"""

YAML_TURN = """Ruff replaces black for both linting and formatting in the billing service.

```yaml
repos:
  - repo: https://github.com/astral-sh/ruff-pre-commit
    rev: v0.6.9
    hooks:
      - id: ruff
      - id: ruff-format
```

Run ruff format on the billing service once, then drop black from the dev
dependencies and from CI in the same pull request.

| tool | role |
|---|---|
| ruff | lint and format |"""


def test_the_extractive_summary_quotes_prose_not_tracebacks_or_yaml() -> None:
    events = [
        {"role": "user", "content": TRACEBACK_TURN, "created_at": OLD},
        {"role": "assistant", "content": YAML_TURN, "created_at": OLD},
        {"role": "user", "content": "ruff:\n  - id: ruff-format\n  - id: ruff", "created_at": OLD},
        {"role": "user", "content": "The billing service pool is too small.", "created_at": OLD},
    ]
    lines = extractive_summary(events, max_sentences=5).text.splitlines()[1:]
    assert lines, "no sentence kept"
    quoted = "\n".join(lines)
    for code in ('File "', "line 145", "- id:", "rev:", "repos:", "self._dbapi", "Traceback"):
        assert code not in quoted, quoted
    assert "Ruff replaces black for both linting and formatting" in quoted
    # a hard-wrapped sentence is quoted whole, a table row not at all
    assert "drop black from the dev dependencies and from CI in the same pull request" in quoted
    assert "| ruff |" not in quoted


def test_a_chunk_of_code_alone_is_still_summarised() -> None:
    events = [{"role": "tool", "content": "```\n$ ls\nbase.py  main.py\n```", "created_at": OLD}]
    summary = extractive_summary(events)
    assert "base.py" in summary.text


def test_the_summary_keeps_the_corrections_and_preferences_of_an_agents_session():
    """An agent's session summarised to its most repeated words: "Run the tests
    please.", a pytest progress line and set-up questions, without the port change
    or the preference it was kept for."""
    turns = [
        ("user", "I prefer pytest over unittest, please use it for every test you write."),
        ("user", "How do I set up the API server on the new VM?"),
        ("assistant", "Set up the API server with uvicorn behind nginx; the API server "
                      "listens on port 8080 and the tests check the API server."),
        ("user", "Run the tests please."),
        ("tool", "tests/test_api.py ............                [100%]"),
        ("assistant", "The tests pass: the API server answers and the tests of the API are green."),
        ("user", "Heads up: the port is now 8443, we moved the API off 8080 yesterday."),
        ("user", "Run the tests again please, the API tests."),
        ("tool", "tests/test_api.py ....F.......                [100%]"),
        ("assistant", "One of the API tests fails because the tests still call the old server."),
    ]  # fmt: skip
    summary = extractive_summary(
        [{"role": role, "content": text} for role, text in turns], max_sentences=3
    ).text
    assert "the port is now 8443" in summary
    assert "I prefer pytest" in summary
    assert "[100%]" not in summary
