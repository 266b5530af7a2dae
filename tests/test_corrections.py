"""A later memory that changes what an earlier hit says is shown above it.

An agent was told on day 1 that its API runs on port 8080 (a long set-up answer,
a tool's listing) and on day 4 that "the API moved to port 8443".  Asked "which
port does the API listen on?", search ranked the 8080 set-up first and the move
third: a prompt cut short kept the stale port.  ``nbmemory.retrieval.corrections``
moves a change of what the question asks about just above the older hit it changes.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import pytest

from nbmemory import Memory, Settings
from nbmemory.retrieval.corrections import change_sentences, corrections_first

DAY = dt.datetime(2026, 11, 2, 9, 0)

SETUP = (
    "Here is a setup that works for a FastAPI service behind nginx. The app runs under "
    "uvicorn with four workers and nginx terminates TLS.\n\n```ini\n[Service]\n"
    "ExecStart=/srv/billing-api/.venv/bin/uvicorn billing.main:app --host 127.0.0.1 "
    "--port 8080 --workers 4\nRestart=on-failure\n```\n\nOnce it is up, the access log "
    "shows the upstream at 127.0.0.1:8080 answering in a few milliseconds. So to "
    "summarise: the API is on port 8080 locally and nginx exposes it on 443."
)
LISTING = (
    "State  Recv-Q Send-Q Local Address:Port  Peer Address:Port Process\n"
    'LISTEN 0      2048   127.0.0.1:8080      0.0.0.0:*     users:(("uvicorn",pid=2211))\n'
    'LISTEN 0      511    0.0.0.0:443         0.0.0.0:*     users:(("nginx",pid=1020))'
)
MOVE = (
    "Heads up: the API moved to port 8443, uvicorn terminates TLS itself now. "
    "8080 is closed on the firewall."
)


FILLER = (
    "The pipeline runs the unit tests first, then the integration tests against a real "
    "database, and publishes the coverage report as an artifact that the reviewers read "
    "before they approve a pull request, which keeps the main branch green most days."
)


@dataclass
class Hit:
    content: str
    created_at: dt.datetime | None
    signals: list[str] = field(default_factory=list)


def ranked(query: str, *hits: Hit) -> list[str]:
    """The hits' texts in the order corrections_first gives them."""
    order = corrections_first(
        hits,
        query,
        text=lambda h: h.content,
        created=lambda h: h.created_at,
        mark=lambda h: h.signals.append("correction"),
    )
    return [h.content for h in order]


def days(n: int) -> dt.datetime:
    return DAY + dt.timedelta(days=n)


def test_a_later_move_goes_above_the_set_up_it_changes():
    setup, listing, move = Hit(SETUP, days(0)), Hit(LISTING, days(0)), Hit(MOVE, days(3))
    assert ranked("which port does the API listen on?", setup, listing, move) == [
        MOVE,
        SETUP,
        LISTING,
    ]
    assert move.signals == ["correction"] and setup.signals == []


def test_a_question_about_the_earlier_value_keeps_the_order():
    hits = (Hit(SETUP, days(0)), Hit(LISTING, days(0)), Hit(MOVE, days(3)))
    for question in (
        "which port did the API use before the move?",
        "what port was the API on at first?",
        "which port did we start with for the API?",
    ):
        assert ranked(question, *hits) == [SETUP, LISTING, MOVE], question


def test_a_change_older_than_the_statement_is_not_moved():
    assert ranked(
        "which port does the API listen on?", Hit(SETUP, days(5)), Hit(MOVE, days(3))
    ) == [
        SETUP,
        MOVE,
    ]


def test_the_newest_of_a_chain_of_changes_leads():
    again = "Update: the API moved from 8443 to port 9443 for the new load balancer."
    hits = (Hit(SETUP, days(0)), Hit(MOVE, days(3)), Hit(again, days(6)))
    assert ranked("what port is the API on?", *hits) == [again, MOVE, SETUP]


RENAME = "I also renamed `fetch_batch` to `sync_token` so the name says what it does."


def in_order(question: str, older: str, later: str) -> list[str]:
    """The two texts as ranked for ``question``: ``older`` first, written 2 days before."""
    return ranked(question, Hit(older, days(0)), Hit(later, days(2)))


def test_a_change_of_something_the_question_does_not_ask_about_is_not_moved():
    docs = "Postgres 15 runs on db-prod-01; the API connects with a pool of 10."
    assert in_order("Which Postgres version do we run?", docs, RENAME) == [docs, RENAME]


def test_the_old_value_must_sit_beside_the_thing_it_was_the_value_of():
    # "name" and `fetch_batch` are in different sentences of a long older hit
    older = (
        "Branches follow the ticket-<number> pattern; name them so and the hook accepts "
        "them. " + FILLER + " " + FILLER + " We call `fetch_batch` from the worker."
    )
    assert in_order("How should I name a new branch?", older, RENAME) == [older, RENAME]
    # the same words in one sentence: the rename changes what the older hit names
    named = FILLER + " To name the loader we went with `fetch_batch`. " + FILLER
    assert in_order("what name does the loader have?", named, RENAME) == [RENAME, named]


def test_a_version_switch_names_the_old_version():
    docs = "We run Postgres 15 on db-prod-01 and connect through pgbouncer."
    switch = "FYI we switched from Postgres 15 to 16 last night; pgbouncer is unchanged."
    assert in_order("what Postgres version do we run?", docs, switch) == [switch, docs]


def test_long_sentences_and_prose_without_a_change_are_not_read_as_changes():
    long = (
        "Before changing anything I ran the existing suite to have a baseline and then I "
        "looked at every module that touches the ledger, the gateway and the worker pool, "
        "which took most of the afternoon, and moved the notes to the wiki for the team."
    )
    assert change_sentences(long) == []
    assert change_sentences("The API is on port 8080 locally.") == []
    ((terms, values),) = change_sentences(MOVE)
    assert {"port", "api"} <= terms and {"8443", "8080"} <= values
    # a value that ends the sentence is the value, not "8443."
    ((_, values),) = change_sentences("Ops moved the API from 8080 to 8443.")
    assert {"8080", "8443"} <= values


def test_a_short_older_hit_is_one_statement():
    # a tool's listing names the port in its header and 8080 on another line
    listing, move = Hit(LISTING, days(0)), Hit(MOVE, days(3))
    assert ranked("which port does the API listen on?", listing, move) == [MOVE, LISTING]


def test_hits_without_a_time_or_alone_are_left_as_they_are():
    assert ranked("which port?", Hit(MOVE, days(3))) == [MOVE]
    assert ranked("which port does the API listen on?", Hit(SETUP, None), Hit(MOVE, days(3))) == [
        SETUP,
        MOVE,
    ]


@pytest.fixture
def agent(store_path, real_embedder):
    """An agent's store: the set-up on day 1, other work, the move on day 4."""
    with Memory(store_path, embedder=real_embedder) as mem:
        turns = [
            (0, "user", "I'm setting up billing-api, a FastAPI app on port 8080 behind nginx."),
            (0, "assistant", SETUP),
            (0, "tool", LISTING),
            (0, "assistant", "uvicorn is listening on 127.0.0.1:8080 and nginx on 443."),
            (1, "user", "Which formatter should we use? I've always used black."),
            (1, "assistant", "Use ruff for lint and format, line length 100."),
            (2, "user", "How do I set up structured logging?"),
            (2, "assistant", "structlog with a JSON renderer; bind the request id per request."),
            (3, "user", MOVE),
        ]
        for day, role, text in turns:
            mem.add_event(f"d{day}", role, text, created_at=days(day))
        mem.flush()
        yield mem


@pytest.mark.real_model
def test_search_puts_the_move_above_the_set_up(agent):
    question = "which port does the API listen on?"
    without = agent.search(question, limit=5, settings=Settings(signal_weights={"corrections": 0}))
    assert without.content.iloc[0] != MOVE  # what the agent got before
    hits = agent.search(question, limit=5)
    assert hits.content.iloc[0] == MOVE
    assert "correction" in hits.signals.iloc[0]
    assert set(hits.id) == set(without.id)  # the same hits, in another order


@pytest.mark.real_model
def test_a_short_prompt_keeps_the_new_port(agent):
    prompt = agent.get_context("d4", "which port does the API listen on?").to_prompt(max_tokens=120)
    assert "8443" in prompt


@pytest.mark.real_model
def test_the_first_hit_does_not_depend_on_how_many_are_asked_for(agent):
    """The step looks at the best ten hits whatever the limit: ``search(q, limit=1)``
    returned the stale listing while ``limit=5`` put the move first."""
    question = "which port does the API listen on?"
    for limit in (1, 2, 3, 5, 10):
        assert agent.search(question, limit=limit).content.iloc[0] == MOVE, limit
    assert len(agent.search(question, limit=2)) == 2
    ranked = agent.core.retriever.ranked
    assert ranked(question, limit=1) == ranked(question, limit=10)[:1]


@pytest.mark.real_model
def test_the_context_puts_the_move_above_the_set_up(agent):
    """``get_context``'s relevance (the default hybrid profile, no reranker) ranked
    without the step: the set-up led, and a prompt kept 8080 alone when the set-up
    was long."""
    question = "which port does the API listen on?"
    texts = [item.content for item in agent.get_context("d4", question).items]
    assert texts.index(MOVE) < min(texts.index(SETUP), texts.index(LISTING))
    off = agent.get_context("d4", question, settings=Settings(signal_weights={"corrections": 0}))
    plain = [item.content for item in off.items]
    assert plain.index(MOVE) > plain.index(LISTING)  # what the context gave before
