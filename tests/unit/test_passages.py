"""Splitting long texts into overlapping passages (``nbmemory.retrieval.passages``)."""

from __future__ import annotations

import json

import pytest

from nbmemory.retrieval.passages import (
    looks_prose,
    passage_size,
    segments,
    split_passages,
    word_spans,
)


def _prose_and_code(lines: int = 60) -> str:
    parts = []
    for i in range(lines):
        if i % 3 == 0:
            parts.append(f"The deploy step number {i} restarted the worker pool after the check.")
        else:
            parts.append(f"    result_{i} = compute_value(alpha={i}, beta=[1, 2, 3], mode='fast')")
    return "\n".join(parts)


def _tokens(text: str, span: tuple[int, int]) -> int:
    return len(word_spans(text[span[0] : span[1]]))


def test_short_text_is_one_span() -> None:
    text = "A short memory about the weekly report."
    assert split_passages(text, word_spans, 256) == [(0, len(text))]
    assert split_passages("", word_spans, 256) == [(0, 0)]


def test_passages_cover_the_text_and_overlap() -> None:
    text = _prose_and_code()
    spans = split_passages(text, word_spans, 64)
    assert len(spans) > 3
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    for before, after in zip(spans, spans[1:], strict=False):
        assert after[0] < before[1]  # overlap: no character left out between them
        assert after[0] > before[0]  # progress
    size, _ = passage_size(64)
    assert all(_tokens(text, span) <= size + 1 for span in spans)


def test_code_lines_are_not_cut_when_a_break_is_near() -> None:
    text = _prose_and_code()
    spans = split_passages(text, word_spans, 128)
    assert len(spans) > 3
    for _, stop in spans[:-1]:
        # each passage but the last ends at the end of a line
        assert stop == len(text) or text[stop] == "\n", repr(text[stop - 20 : stop + 5])


def test_json_without_newlines_is_still_bounded() -> None:
    text = json.dumps([{"key": f"value_{i}", "n": i, "ok": True} for i in range(150)])
    assert "\n" not in text and len(text) > 4000
    spans = split_passages(text, word_spans, 128)
    size, _ = passage_size(128)
    assert len(spans) > 5
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(_tokens(text, span) <= size for span in spans)
    assert all(after[0] < before[1] for before, after in zip(spans, spans[1:], strict=False))


def test_a_tail_sentence_lands_whole_in_a_passage() -> None:
    text = _prose_and_code() + "\nThe staging database password rotates every Friday at noon."
    tail = text.rindex("The staging")
    spans = split_passages(text, word_spans, 64)
    assert any(start <= tail and stop == len(text) for start, stop in spans)


def _code_block(lines: int) -> str:
    body = "\n".join(f"    value_{i} = [x * {i} for x in items if x > {i}]" for i in range(lines))
    return f"```python\ndef plan(items):\n{body}\n\n    return value_0\n```"


def test_prose_after_a_code_block_is_a_passage_of_its_own() -> None:
    """A fact stated after pasted code is not one line of a passage of code."""
    fact = "Rollbacks of the billing service need approval from Kofi."
    text = "Here is the fix for the planner.\n\n" + _code_block(40) + "\n\n" + fact
    spans = split_passages(text, word_spans, 128)
    last = text[spans[-1][0] : spans[-1][1]]
    assert last.strip() == fact
    assert spans[0][0] == 0 and spans[-1][1] == len(text)


def test_segments_tile_the_text_by_kind() -> None:
    prose = "The worker restarts after the check.\n\nThen it reads the config again."
    log = "\n".join(
        f"2026-03-0{i}T10:00:0{i}Z INFO worker[12{i}] took {i * 37}ms status=200"
        for i in range(1, 6)
    )
    text = prose + "\n\n" + _code_block(3) + "\n\n" + log + "\n\nThat is all for today."
    parts = segments(text)
    assert parts[0][0] == 0 and parts[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(parts, parts[1:], strict=False))
    kinds = [looks_prose(text[start:stop]) for start, stop in parts]
    assert kinds == [True, False, True]  # the code block and the log are one run
    assert text[parts[0][0] : parts[0][1]].startswith(prose)  # both prose paragraphs


def test_a_blank_line_inside_a_fence_does_not_end_the_block() -> None:
    text = "Intro sentence for the block below.\n\n" + _code_block(4) + "\n\nClosing words here."
    parts = segments(text)
    assert len(parts) == 3
    middle = text[parts[1][0] : parts[1][1]]
    assert middle.startswith("```python") and "return value_0\n```" in middle


def test_a_short_caption_stays_with_what_follows() -> None:
    text = "Output:\n\n" + _code_block(60)
    spans = split_passages(text, word_spans, 128)
    assert text[spans[0][0] : spans[0][1]].startswith("Output:\n\n```python")


def test_log_lines_and_json_are_not_prose() -> None:
    assert looks_prose("The agent reads the file before it starts, then writes (twice).")
    assert not looks_prose("2026-03-22T16:49:07Z WARN scheduler[7061] took 222ms status=200")
    assert not looks_prose(json.dumps({"tool": "indexer", "ok": True, "items": [1, 2, 3]}))


PYTHON_TRACEBACK = """Traceback (most recent call last):
  File "/srv/app/planner/core.py", line 337, in run_planner
    result = self.planner.handle(request, retries=3)
  File "/srv/app/billing/core.py", line 865, in run_billing
    result = self.billing.handle(request, retries=2)
KeyError: 'schema_55'"""

JAVA_STACK = """Exception in thread "main" java.lang.NullPointerException: name is null
\tat com.example.app.UserService.validate(UserService.java:42)
\tat com.example.app.UserService.create(UserService.java:17)
\tat com.example.app.Main.main(Main.java:9)"""

JS_STACK = """TypeError: Cannot read properties of undefined (reading 'map')
    at renderList (/home/ana/project/src/components/List.jsx:12:23)
    at processChild (/home/ana/project/node_modules/react-dom/server.js:3353:14)"""

PYTHON_CODE = """def load_config(path):
    with open(path) as handle:
        data = yaml.safe_load(handle)
    if not data:
        raise ValueError("empty config")
    return Settings(**data)"""


DIFF = """--- a/src/config.py
+++ b/src/config.py
@@ -10,7 +10,7 @@ class Settings:
-    port: int = 8080
+    port: int = 8443
     host: str = "0.0.0.0"
     debug: bool = False"""


def test_code_and_stack_traces_pasted_without_a_fence_are_not_prose() -> None:
    """Mostly words, like prose, but laid out line by line as code (the traceback, the
    stack traces and the code read as prose before: a sentence after them shared
    their passages)."""
    for pasted in (PYTHON_TRACEBACK, JAVA_STACK, JS_STACK, PYTHON_CODE, DIFF):
        assert not looks_prose(pasted), pasted
    # a list nested under prose, with fewer indented lines than not, stays prose
    plan = "The plan:\n1. Review the migration.\n   - check the rollback\n2. Ship it."
    assert looks_prose(plan)
    # and so does a Markdown answer whose nested bullets are most of its lines
    bullets = (
        "Here is what changed:\n- **Retries**: back off exponentially\n"
        "  - capped at 30 s\n  - jittered\n- **Config**: read the environment first\n"
        "  * then the file\n    1. the project's\n    2) the user's"
    )
    assert looks_prose(bullets)
    assert looks_prose("Hi Marta,\nthe offsite is in Ljubljana.\nBest, Ana")


SHELL_SESSION = """$ pytest tests/test_billing.py -q
........F.
FAILED tests/test_billing.py::test_refund_rounding - assert 10.01 == 10.0
1 failed, 9 passed in 0.84s
$ git log --oneline -2
3f2a9c1 Round refunds half to even
9b7e001 Add the refund endpoint"""

SQL = """SELECT customer_id, count(*) AS orders, sum(total) AS spent
FROM orders o
JOIN customers c ON c.id = o.customer_id
WHERE o.created_at >= date '2026-01-01'
GROUP BY customer_id
ORDER BY spent DESC
LIMIT 20"""

REPL = """>>> import billing
>>> billing.refund(order_id=4412, amount=Decimal("10.005"))
Refund(order_id=4412, amount=Decimal('10.00'), status='queued')"""


def test_shell_sessions_and_sql_pasted_without_a_fence_are_not_prose() -> None:
    """A terminal session (``$``, ``>>>`` prompts) and a SQL query are mostly words
    and not indented, so they read as prose before; prose that merely mentions a
    command or starts with an upper-case word stays prose."""
    for pasted in (
        SHELL_SESSION,
        SQL,
        REPL,
        "$ docker compose up -d",
        "select * from users where id = 4412;",
        "deploy@web-2:~/app$ systemctl restart app\nJob for app.service failed.",
    ):
        assert not looks_prose(pasted), pasted
    for sentence in (
        "UPDATE: the port is now 8443.",
        "Select the rows you need from the export, then run $ make again.",
        "Insert into the form the order's number, then press Refund.",
        "$5 a month is what the plan costs.",
    ):
        assert looks_prose(sentence), sentence


def test_a_sentence_with_a_number_or_two_is_prose() -> None:
    """Facts carry numbers (a port, a time, a date): one number in four words or fewer
    is prose; log lines and key=value output, with a number for nearly every word, are
    not (all three sentences below were not prose before)."""
    for sentence in (
        "the port is now 8443",
        "The staging database password rotates every Thursday at 04:00.",
        "Timings after the change, over 60 runs on my machine: p50 23 ms, p95 249 ms,"
        " down from roughly twice that before.",
    ):
        assert looks_prose(sentence), sentence
    assert not looks_prose("INFO took 222 ms status 200 retries 3 pid 7061")
    assert not looks_prose("id=4412 user=88 took=31ms rows=1200 ok=1")


@pytest.mark.parametrize(
    ("pasted", "marker"),
    [(PYTHON_TRACEBACK, "schema_55"), (SHELL_SESSION, "test_refund"), (SQL, "customer_id")],
    ids=["traceback", "shell session", "sql"],
)
def test_a_fact_after_unfenced_output_gets_a_passage_without_it(pasted, marker) -> None:
    prose = " ".join(["The nightly import failed again on the planner host."] * 6)
    for fact in (
        "Rollbacks of the billing service need approval from Kofi.",
        "The staging database password rotates every Thursday at 04:00.",
    ):
        text = prose + "\n\n" + "\n\n".join([pasted] * 4) + "\n\n" + fact
        spans = split_passages(text, word_spans, 128)
        holding = [text[a:b] for a, b in spans if fact in text[a:b]]
        assert holding and all(marker not in passage for passage in holding), holding
