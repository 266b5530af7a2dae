"""Wrong values a probe of every public method found escaping as the interpreter's
own errors (``TypeError``, ``ValueError``, ``OverflowError``, ``RecursionError``) or
taken as they were: each is now one :class:`~nbmemory.errors.InvalidInput` line
saying what to pass, and nothing stored changes.
"""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pandas as pd
import pytest

from nbmemory import InvalidInput, Memory
from nbmemory.validation import shown

NOW = dt.datetime(2024, 5, 6, 8, 0)


def _one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(exc.value)
    assert message and "\n" not in message, message
    return message


def _state(mem: Memory) -> tuple[int, ...]:
    tables = ("events", "sessions", "facts", "scheduled_tasks", "audit_log")
    return tuple(mem.store.fetchone(f"SELECT count(*) FROM {t}")[0] for t in tables)


# -- the token counter: the caller's code, checked as the embedder's is ---------------------


@pytest.mark.parametrize(
    ("counter", "said"),
    [
        (lambda text: 1 / 0, "ZeroDivisionError"),
        (lambda text: "5", "'5'"),
        (lambda text: -1, "-1"),
        (lambda text: math.nan, "nan"),
        (lambda text: True, "True"),
    ],
)
def test_a_token_counter_that_fails_or_answers_no_count_is_named(tmp_path, counter, said):
    with Memory(str(tmp_path / "a.duckdb"), embedder="hash", token_counter=counter) as mem:
        mem.add_event("s", "user", "the deploy runs on Fridays at 17:00")
        context = mem.get_context("s", "when do we deploy?")
        with pytest.raises(InvalidInput) as exc:
            context.to_prompt(max_tokens=10)
        message = _one_line(exc)
        assert "token counter" in message and said in message and "token_counter" in message


def test_a_token_counter_answering_numpy_or_whole_floats_is_taken(tmp_path):
    path = str(tmp_path / "a.duckdb")
    for counter in (lambda text: np.int64(len(text)), lambda text: float(len(text))):
        with Memory(path, embedder="hash", token_counter=counter) as mem:
            mem.add_event("s", "user", "the deploy runs on Fridays at 17:00")
            prompt = mem.get_context("s", "deploy").to_prompt(max_tokens=200)
            assert prompt.tokens == len(str(prompt)) and isinstance(prompt.tokens, int)


# -- get_context: options checked before the cache is looked up -----------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda mem: mem.get_context("s", "python", max_tokens=np.array([1, 2])),
        lambda mem: mem.get_context("s", "python", recency_limit=pd.NA),
        lambda mem: mem.get_context("s", pd.NA),
        lambda mem: mem.get_context("s", "python", explain=np.array([True, False])),
    ],
)
def test_get_context_refuses_an_array_or_na_once_a_context_is_cached(mem, call):
    mem.add_event("s", "user", "I write python every day")
    mem.get_context("s", "python")  # a context of the session is cached now
    with pytest.raises(InvalidInput) as exc:
        call(mem)
    _one_line(exc)


# -- a choice given as an array, pd.NA or a deep structure ----------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda mem: mem.search("x", mode=pd.NA),
        lambda mem: mem.search("x", mode=np.array(["hybrid", "vector"])),
        lambda mem: mem.facts.set("c", "k", "v", source=pd.NA),
        lambda mem: mem.tasks.schedule("n", "every day at 9am", "p", source=pd.NA),
        lambda mem: mem.memories.search_by_similarity("x", metric=pd.NA),
        lambda mem: mem.memories.list(filters={"kind": pd.NA}),
    ],
)
def test_a_choice_given_as_an_array_or_na_is_a_wrong_value(mem, call):
    mem.add_event("s", "user", "hello there")
    before = _state(mem)
    with pytest.raises(InvalidInput) as exc:
        call(mem)
    _one_line(exc)
    assert _state(mem) == before


def test_a_deep_structure_in_a_message_is_cut_not_a_recursion_error(mem):
    deep: dict = {}
    for _ in range(3000):
        deep = {"d": deep}
    mem.facts.set("c", "k", "v")
    with pytest.raises(InvalidInput) as exc:
        mem.facts.delete("c", "k", history=deep)
    assert len(_one_line(exc)) < 300
    assert mem.facts.get("c", "k")["value"] == "v"


def test_a_pandas_object_in_a_message_is_named_on_one_line():
    assert shown(pd.Series(["c"])) == "a Series of 1"
    assert shown(pd.DataFrame({"a": [1, 2]})) == "a DataFrame of 2"
    assert shown("short") == "'short'"


# -- the scheduler near the last date a datetime holds ---------------------------------------


def test_a_schedule_past_the_year_9999_is_refused_and_nothing_is_stored(mem):
    before = _state(mem)
    late = dt.datetime(9999, 12, 31, 23, 0)
    with pytest.raises(InvalidInput, match="before the year 10000"):
        mem.tasks.schedule("n", "every day at 9pm", "p", now=late)
    with pytest.raises(InvalidInput, match="past the year 9999") as exc:
        mem.tasks.schedule("n", "in 99999999999 minutes", "p", now=NOW)
    _one_line(exc)
    assert _state(mem) == before


def test_a_recurring_task_with_no_later_time_runs_once_more_and_is_done(mem):
    mem.tasks.schedule("nightly", "every day at 9pm", "p", now=dt.datetime(9999, 12, 30, 8))
    fired = mem.tasks.run_due(lambda task: "ok", now=dt.datetime(9999, 12, 31, 23, 59))
    assert [run["name"] for run in fired] == ["nightly"]
    assert mem.tasks.list().empty  # no later run: it is done, not paused with an error


# -- facts: numbers that are not a value ------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [10**5000, math.nan, math.inf, -math.inf, np.float64("nan")],
    ids=["10**5000", "nan", "inf", "-inf", "np.nan"],
)
def test_a_fact_value_that_is_no_number_to_remember_is_refused(mem, value):
    before = _state(mem)
    with pytest.raises(InvalidInput) as exc:
        mem.facts.set("c", "k", value)
    assert "value" in _one_line(exc)
    assert _state(mem) == before


def test_a_fact_value_that_is_a_number_is_stored_as_its_text(mem):
    mem.facts.set("c", "port", 8443)
    mem.facts.set("c", "ratio", 0.25)
    assert mem.facts.get("c", "port")["value"] == "8443"
    assert mem.facts.get("c", "ratio")["value"] == "0.25"


# -- paging, sizes ----------------------------------------------------------------------------


def test_pages_names_an_option_it_does_not_take(mem):
    mem.memories.add("hello there")
    with pytest.raises(InvalidInput, match="pages\\(\\) has no option 'bogus'") as exc:
        next(mem.memories.pages(bogus=1))
    _one_line(exc)
    with pytest.raises(InvalidInput, match="memories.search"):
        next(mem.memories.pages("hello", bogus=1))
    assert len(next(mem.memories.pages(limit=5))) == 1


def test_a_text_just_over_the_limit_says_by_how_much(mem):
    limit = mem.settings.max_content_bytes
    with pytest.raises(InvalidInput) as exc:
        mem.add_event("s", "user", "x" * (limit + 10))
    message = _one_line(exc)
    assert f"{limit + 10:,} bytes" in message and f"{limit:,}" in message


# -- the research toolkit -------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda mem: mem.research.load_locomo(5),
        lambda mem: mem.research.load_conversation(5),
        lambda mem: mem.research.evaluate(5),
        lambda mem: mem.research.evaluate([5]),
        lambda mem: mem.research.labelled_similarities("a path"),
        lambda mem: mem.research.similarities(5),
        lambda mem: mem.research.similarities(["q"], relevant=5),
        lambda mem: mem.research.similarities(["q"], relevant=pd.DataFrame({"ids": [["a"]]})),
        lambda mem: mem.research.importance_histogram(cut=""),
        lambda mem: mem.research.importance_histogram(cut=2),
        lambda mem: mem.research.importance_histogram(title=object()),
        lambda mem: mem.research.importance_histogram(by=5),
    ],
)
def test_the_research_toolkit_says_what_to_pass(mem, call):
    pytest.importorskip("plotly")
    mem.add_event("s", "user", "hello there")
    mem.flush()
    before = _state(mem)
    with pytest.raises(InvalidInput) as exc:
        call(mem)
    _one_line(exc)
    assert _state(mem) == before
