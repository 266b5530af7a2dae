"""Deterministic long agent messages (2-4k characters): prose, code, logs, JSON, tracebacks.

What an agent's memory holds beside chat turns: an assistant's answer with a code
block, a tool's log output, a JSON payload, a stack trace.  Generated from a seed,
no network and no data set, so every run embeds the same texts.
"""

from __future__ import annotations

import json
import random

_WORDS = [
    "the",
    "agent",
    "reads",
    "config",
    "file",
    "before",
    "it",
    "starts",
    "worker",
    "thread",
    "and",
    "then",
    "writes",
    "result",
    "into",
    "store",
    "while",
    "user",
    "waits",
    "for",
    "answer",
    "about",
    "deployment",
    "cache",
    "index",
    "query",
    "latency",
    "memory",
    "budget",
    "retry",
    "policy",
    "database",
    "schema",
    "migration",
    "token",
    "window",
    "passage",
    "vector",
    "search",
    "ranking",
    "session",
    "summary",
    "tool",
    "output",
    "error",
    "handler",
    "queue",
    "timeout",
    "request",
]
_NAMES = ("Alice", "Bob", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana")
_MODULES = ("ingest", "planner", "scheduler", "indexer", "gateway", "billing", "auth")


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 20))]
    return words[0].capitalize() + " " + " ".join(words[1:]) + "."


def _prose(rng: random.Random) -> str:
    return " ".join(_sentence(rng) for _ in range(rng.randint(3, 6)))


def _code(rng: random.Random) -> str:
    name = rng.choice(_MODULES)
    lines = [f"def {name}_{rng.randint(1, 99)}(items, *, limit={rng.randint(2, 64)}):"]
    lines.append(f'    """{_sentence(rng)}"""')
    for i in range(rng.randint(4, 9)):
        lines.append(f"    value_{i} = [x * {rng.randint(2, 9)} for x in items if x > {i}]")
        lines.append(f"    if len(value_{i}) > limit:")
        lines.append(f"        raise ValueError('{name} got too many values: %d' % len(value_{i}))")
    lines.append("    return value_0")
    return "```python\n" + "\n".join(lines) + "\n```"


def _log(rng: random.Random) -> str:
    lines = []
    for i in range(rng.randint(6, 14)):
        level = rng.choice(("INFO", "INFO", "DEBUG", "WARN", "ERROR"))
        module = rng.choice(_MODULES)
        lines.append(
            f"2026-03-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
            f"{i:02d}Z {level:5} {module}[{rng.randint(100, 9999)}] request_id="
            f"{rng.getrandbits(48):012x} took {rng.randint(1, 5000)}ms status={rng.choice((200, 404, 500))}"
        )
    return "\n".join(lines)


def _json(rng: random.Random) -> str:
    payload = {
        "tool": rng.choice(_MODULES),
        "ok": rng.random() > 0.3,
        "items": [
            {
                "id": rng.randint(1, 10**6),
                "name": rng.choice(_NAMES),
                "score": round(rng.random(), 4),
            }
            for _ in range(rng.randint(3, 8))
        ],
        "note": _sentence(rng),
    }
    return json.dumps(payload, indent=2)


def _traceback(rng: random.Random) -> str:
    lines = ["Traceback (most recent call last):"]
    for _ in range(rng.randint(3, 7)):
        module = rng.choice(_MODULES)
        lines.append(
            f'  File "/srv/app/{module}/core.py", line {rng.randint(10, 900)}, in run_{module}'
        )
        lines.append(f"    result = self.{module}.handle(request, retries={rng.randint(1, 5)})")
    lines.append(f"KeyError: '{rng.choice(_WORDS)}_{rng.randint(1, 99)}'")
    return "\n".join(lines)


_PARTS = (_prose, _prose, _code, _log, _json, _traceback)


def long_message(rng: random.Random, low: int = 2000, high: int = 4000) -> str:
    """One message of ``low``..``high`` characters made of several kinds of parts."""
    target = rng.randint(low, high)
    parts: list[str] = [_prose(rng)]
    while sum(len(p) + 2 for p in parts) < target:
        parts.append(rng.choice(_PARTS)(rng))
    return "\n\n".join(parts)[:target]


def long_messages(n: int, seed: int = 36) -> list[str]:
    """``n`` long messages, the same for the same ``n`` and ``seed``."""
    rng = random.Random(seed)
    return [long_message(rng) for _ in range(n)]


def short_messages(n: int, seed: int = 37) -> list[str]:
    """``n`` chat turns of one or two sentences."""
    rng = random.Random(seed)
    return [" ".join(_sentence(rng) for _ in range(rng.randint(1, 2))) for _ in range(n)]
