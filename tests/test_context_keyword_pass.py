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


#: An assistant's answer of 2,133 characters, most of it code and logs.
LOGGING_ANSWER = """\
For structured logs, configure the standard library once at start-up and let every
module use `logging.getLogger(__name__)`:

```python
import logging.config

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {"()": "pythonjsonlogger.jsonlogger.JsonFormatter",
                 "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s"},
    },
    "handlers": {
        "stdout": {"class": "logging.StreamHandler", "formatter": "json"},
    },
    "root": {"handlers": ["stdout"], "level": "INFO"},
    "loggers": {
        "sqlalchemy.engine": {"level": "WARNING"},
        "uvicorn.access": {"level": "WARNING"},
    },
}

def setup_logging(level: str = "INFO") -> None:
    LOGGING["root"]["level"] = level
    logging.config.dictConfig(LOGGING)
```

A log line then looks like this:

```json
{"asctime": "2026-03-03 10:12:01,332", "levelname": "INFO", "name": "orders.api", "message": "order created", "order_id": 1812}
```

Pass extra fields with `extra=`:

```python
log.info("order created", extra={"order_id": order.id, "total": str(order.total)})
```

Sample of what journald showed before the change, for comparison:

```text
Mar 03 10:11:58 vm-orders gunicorn[811]: [2026-03-03 10:11:58 +0000] [811] [INFO] Booting worker with pid: 811
Mar 03 10:11:59 vm-orders gunicorn[811]: INFO:     Started server process [811]
Mar 03 10:11:59 vm-orders gunicorn[811]: INFO:     Waiting for application startup.
Mar 03 10:12:01 vm-orders gunicorn[811]: INFO:orders.api:order created
Mar 03 10:12:01 vm-orders gunicorn[811]: WARNING:sqlalchemy.pool:Connection pool is at capacity
```

Keep the log level at INFO in production and DEBUG only on staging. Ship the JSON
lines with vector or fluent-bit to Loki; Grafana can then filter on `order_id`.
Request ids: add a middleware that reads `X-Request-ID` (or makes a UUID4) and puts it
in a contextvar, and a logging filter that copies it into every record, so one
request's lines can be followed across the API and the worker. The retention on Loki
is 14 days; anything older goes to the S3 bucket orders-logs-archive in eu-west-1.
"""


@pytest.mark.real_model
def test_one_shared_word_does_not_open_the_floor(store_path, real_embedder):
    """A short turn that shares one word ("old") with the question and nothing else
    got past the floor at cosine 0.02: the keyword pass was measured against the
    question's best BM25, which a long answer, divided by its length, keeps low.  It
    now also asks for half the floor's cosine ("respx" above has 0.17)."""
    with Memory(store_path, embedder=real_embedder) as mem:
        mem.add_event("s1", "assistant", LOGGING_ANSWER)
        mem.add_event(
            "s1",
            "assistant",
            "One test fails: test_create_order_timeout still expects the old timeout. "
            "I'll update it.",
        )
        mem.add_events([{"session_id": "s2", "role": "user", "content": f"chatter {i}"}
                        for i in range(10)])  # fmt: skip
        mem.flush()
        relevant = mem.get_context("s2", "which S3 bucket holds old logs?").by_strategy("relevance")
        assert [item.content for item in relevant] == [LOGGING_ANSWER]
