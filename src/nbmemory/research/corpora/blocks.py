"""Code blocks and log output, generated from a seeded ``random.Random``.

Both generated corpora paste these into long messages, as a user or an agent
pastes a traceback or a snippet: text that is long, full of identifiers, numbers
and keywords (``timeout``, ``port``, ``retry``) that rarely answer a question.
They make keyword matching on long messages as hard as it is in a real
technical chat.  Every function takes the ``rng`` so a corpus is the same for
the same seed.
"""

from __future__ import annotations

import datetime as dt
import random

MODULES = (
    "auth",
    "billing",
    "scheduler",
    "ingest",
    "gateway",
    "reports",
    "sync",
    "notifier",
    "search",
    "storage",
    "exporter",
    "webhooks",
)
VERBS = ("load", "fetch", "parse", "flush", "render", "resolve", "merge", "refresh", "sync")
NOUNS = ("batch", "token", "invoice", "session", "record", "payload", "manifest", "chunk", "job")
LEVELS = ("INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR")
LOG_EVENTS = (
    "request handled in {ms} ms status={status}",
    "connect to 10.0.{a}.{b}:{port} timed out after {s}s",
    "retrying {noun} {n}/{m} after {ms} ms backoff",
    "cache miss for key {noun}:{hex}",
    "worker {n} picked up {noun} {hex}",
    "slow query ({ms} ms): select * from {noun}s where id = ${n}",
    "released lock {noun}-{hex} held for {ms} ms",
    "queue depth {n}, oldest message {s}s",
    "health check ok on port {port}",
    "config reloaded from /etc/{module}/{module}.toml",
)


def identifier(rng: random.Random) -> str:
    """A function-like name: ``fetch_invoice``."""
    return f"{rng.choice(VERBS)}_{rng.choice(NOUNS)}"


def log_block(rng: random.Random, start: dt.datetime, lines: int | None = None) -> str:
    """A fenced block of log lines starting at ``start`` (timestamps, levels, modules)."""
    count = lines or rng.randint(5, 10)
    stamp = start
    out = []
    for _ in range(count):
        stamp += dt.timedelta(milliseconds=rng.randint(3, 4000))
        event = rng.choice(LOG_EVENTS).format(
            ms=rng.randint(2, 2400),
            status=rng.choice((200, 200, 201, 404, 409, 500, 503)),
            a=rng.randint(0, 9),
            b=rng.randint(2, 250),
            port=rng.choice((5432, 6379, 8080, 9000, 9200, 4317, 11211)),
            s=rng.randint(1, 60),
            noun=rng.choice(NOUNS),
            n=rng.randint(1, 9),
            m=rng.randint(3, 9),
            hex=f"{rng.getrandbits(24):06x}",
            module=rng.choice(MODULES),
        )
        out.append(
            f"{stamp:%Y-%m-%dT%H:%M:%S}.{stamp.microsecond // 1000:03d}Z "
            f"{rng.choice(LEVELS):5} {rng.choice(MODULES)}: {event}"
        )
    return "```\n" + "\n".join(out) + "\n```"


def python_block(rng: random.Random) -> str:
    """A fenced Python function of 6-12 lines with generated names."""
    name = identifier(rng)
    noun = rng.choice(NOUNS)
    lines = [
        f"def {name}({noun}_id: str, *, limit: int = {rng.choice((10, 50, 100, 500))}) -> list:",
        f'    """{rng.choice(VERBS).capitalize()} the {noun}s of one {rng.choice(NOUNS)}."""',
        f"    rows = db.query({noun}s).filter(id={noun}_id).limit(limit).all()",
    ]
    extra = [
        f"    if not rows:\n        raise NotFound(f'no {noun} {{{noun}_id}}')",
        f"    rows = [r for r in rows if r.state != '{rng.choice(('deleted', 'stale', 'draft'))}']",
        f"    log.debug('{name}: %d rows', len(rows))",
        f"    cache.set(f'{noun}:{{{noun}_id}}', rows, ttl={rng.choice((30, 60, 300, 3600))})",
        f"    metrics.increment('{rng.choice(MODULES)}.{name}')",
    ]
    rng.shuffle(extra)
    lines += extra[: rng.randint(2, len(extra))]
    lines.append("    return rows")
    return "```python\n" + "\n".join(lines) + "\n```"


def shell_block(rng: random.Random) -> str:
    """A fenced shell session: a command or two and their output."""
    module = rng.choice(MODULES)
    commands = [
        f"$ pytest tests/test_{module}.py -q\n"
        f"{'.' * rng.randint(8, 30)}{'F' * rng.randint(0, 2)}\n"
        f"{rng.randint(10, 80)} passed, {rng.randint(0, 2)} failed in {rng.randint(1, 40)}.{rng.randint(10, 99)}s",
        "$ git log --oneline -3\n"
        + "\n".join(
            f"{rng.getrandbits(28):07x} {module}: {rng.choice(VERBS)} {rng.choice(NOUNS)}s"
            for _ in range(3)
        ),
        f"$ docker compose ps\nNAME          STATUS    PORTS\n{module}-1     running   "
        f"0.0.0.0:{rng.randint(3000, 9999)}->{rng.randint(3000, 9999)}/tcp",
        f"$ curl -s localhost:{rng.randint(3000, 9999)}/healthz\n"
        f'{{"status": "ok", "uptime_s": {rng.randint(10, 90000)}}}',
    ]
    rng.shuffle(commands)
    return "```console\n" + "\n".join(commands[: rng.randint(1, 2)]) + "\n```"


#: The kinds of block :func:`any_block` makes.
KINDS = ("log", "python", "shell")


def any_block(rng: random.Random, start: dt.datetime, kind: str | None = None) -> str:
    """A block of ``kind`` (one of :data:`KINDS`, chosen by ``rng`` when None)."""
    kind = kind or rng.choice(KINDS)
    if kind == "log":
        return log_block(rng, start)
    return python_block(rng) if kind == "python" else shell_block(rng)
