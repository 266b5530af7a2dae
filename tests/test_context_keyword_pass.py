"""A memory that only keywords connect to a short query reaches the context.

``get_context``'s relevance keeps memories over a cosine floor (0.2 in the hybrid
profile) out of the prompt when they are unrelated.  A query naming a rare term
("respx", "KRaft", an invoice id) gets a low cosine even from the one memory that
names it, and the floor dropped that memory while ``search`` ranked it first.
"""

from __future__ import annotations

import pytest

from nbmemory import Memory

TURNS = [
    ("user", "How do I mock Stripe in tests?"),
    (
        "assistant",
        "Wrap the Stripe client in a small PaymentGateway class and inject a fake; for the "
        "HTTP layer, respx or responses can stub api.stripe.com.",
    ),
    ("user", "We need a job queue for invoice PDFs. Kafka or Redis Streams?"),
    ("assistant", "Redis Streams: consumer group workers, at most 5 retries, then a dead letter."),
    ("user", "Can we cache the exchange rates?"),
    ("assistant", "Yes, in Redis with a 1 hour TTL keyed by date and currency pair."),
]


@pytest.fixture
def chat(store_path, real_embedder):
    with Memory(store_path, embedder=real_embedder) as mem:
        for role, text in TURNS:
            mem.add_event("s1", role, text)
        mem.flush()
        yield mem


@pytest.mark.real_model
def test_the_memory_search_ranks_first_for_a_rare_term_is_in_the_context(chat):
    hits = chat.search("respx", limit=3)
    assert "respx" in hits.content.iloc[0]
    assert hits.similarity.iloc[0] < chat.settings.relevance_threshold  # under the floor
    relevant = [item.content for item in chat.get_context("s2", "respx").by_strategy("relevance")]
    assert relevant and "respx" in relevant[0]


@pytest.mark.real_model
def test_a_term_no_memory_holds_does_not_open_the_floor(chat):
    # "KRaft" is in no memory: the floor keeps out what it kept out before
    relevant = chat.get_context("s2", "KRaft").by_strategy("relevance")
    assert all(item.similarity > chat.settings.relevance_threshold for item in relevant)
