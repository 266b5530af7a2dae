"""Secret redaction and the file blocklist (Vectora's "Guardian").

Text is redacted *before* it is stored or embedded, so a secret pasted into a
conversation never reaches the DuckDB file or the model.  The defaults are
Vectora's two patterns (``password: ...`` and ``api_key = ...``) plus common token
formats: AWS access keys, GitHub tokens, OpenAI-style ``sk-`` keys, bearer
tokens, JWTs, Slack tokens and PEM private-key blocks.  More patterns are added
with ``Settings(redact_patterns=(...))``; ``Settings(redaction=False)`` turns
redaction off.

Only the secret is replaced by :data:`REDACTED` (``password: [REDACTED]``), so
the memory still says *that* a password was given.  Redaction is idempotent:
redacting already-redacted text changes nothing and counts nothing.

:func:`check_ingestable` refuses files that commonly hold secrets (``.env``,
``*.key``, ``*.pem``) before anything reads them.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .errors import InvalidInput

#: What replaces a secret.
REDACTED = "[REDACTED]"

# Secrets start after an optional quote and never with "[REDACTED]" (idempotence).
_VALUE = r"""['"]?(?P<secret>(?!\[REDACTED\])[^'"\s]+)"""

#: (name, regex) applied in this order.  A ``secret`` group, when present, is the
#: part replaced; otherwise the whole match is.
DEFAULT_PATTERNS: tuple[tuple[str, str], ...] = (
    (
        "private_key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
        r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
    ),
    ("aws_access_key_id", r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b"),
    (
        "aws_secret_access_key",
        r"(?i)aws_?secret_?access_?key\s*[:=]\s*['\"]?(?P<secret>[A-Za-z0-9/+=]{40})",
    ),
    ("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"),
    ("openai_key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    ("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"),
    ("bearer_token", r"(?i)\bbearer\s+(?P<secret>(?!\[REDACTED\])[A-Za-z0-9\-._~+/]{16,}=*)"),
    # Vectora's audit.redact_patterns, case-insensitive here
    ("password", r"(?i)password\s*[:=]\s*" + _VALUE),
    ("api_key", r"(?i)api[_-]?key\s*[:=]\s*" + _VALUE),
)

#: File names refused for ingestion (fnmatch patterns on the base name, case-insensitive).
BLOCKED_FILES: tuple[str, ...] = (".env", ".env.*", "*.env", "*.key", "*.pem")


@dataclass(frozen=True)
class Redaction:
    """The result of redacting one text: the safe text and how many secrets went."""

    text: str
    count: int
    kinds: tuple[str, ...] = ()


class Redactor:
    """Compiled redaction patterns; ``redact(text)`` returns a :class:`Redaction`."""

    def __init__(self, extra: Iterable[str] = (), *, defaults: bool = True) -> None:
        patterns = list(DEFAULT_PATTERNS) if defaults else []
        for index, pattern in enumerate(extra):
            patterns.append((f"custom_{index}", pattern))
        self.patterns: list[tuple[str, re.Pattern[str]]] = [
            (name, compile_pattern(regex, name)) for name, regex in patterns
        ]

    def redact(self, text: str) -> Redaction:
        """Replace every secret in ``text`` by ``[REDACTED]``."""
        total = 0
        kinds: list[str] = []
        for name, pattern in self.patterns:
            text, count = pattern.subn(_replace, text)
            if count:
                total += count
                kinds.append(name)
        return Redaction(text, total, tuple(kinds))


def _replace(match: re.Match[str]) -> str:
    if "secret" in match.re.groupindex and match.group("secret") is not None:
        start = match.start("secret") - match.start()
        end = match.end("secret") - match.start()
        whole = match.group(0)
        return whole[:start] + REDACTED + whole[end:]
    return REDACTED


def compile_pattern(regex: str, name: str = "pattern") -> re.Pattern[str]:
    """Compile one redaction regex; a bad one is an :class:`InvalidInput` naming it."""
    if not isinstance(regex, str) or not regex:
        raise InvalidInput(f"redaction {name} must be a non-empty regex string, got {regex!r}")
    try:
        compiled = re.compile(regex)
    except re.error as exc:
        raise InvalidInput(f"redaction {name} {regex!r} is not a valid regex: {exc}") from None
    if compiled.match(""):
        raise InvalidInput(
            f"redaction {name} {regex!r} matches empty text; it would redact nothing"
        )
    return compiled


def redact(text: str, extra: Iterable[str] = ()) -> Redaction:
    """Redact ``text`` with the default patterns plus ``extra`` (convenience for one-offs)."""
    return Redactor(extra).redact(text)


def blocked_reason(path: str | os.PathLike[str]) -> str | None:
    """Which blocklist pattern refuses ``path`` (by its base name), or None."""
    name = Path(path).name.lower()
    for pattern in BLOCKED_FILES:
        if fnmatch.fnmatchcase(name, pattern):
            return pattern
    return None


def check_ingestable(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path if it may be ingested; :class:`InvalidInput` for secret files.

    ``.env``, ``*.key`` and ``*.pem`` files usually hold credentials; they are never
    read, stored or embedded (the same blocklist applies to AGENTS.md).
    """
    resolved = Path(path).expanduser()
    pattern = blocked_reason(resolved)
    if pattern is not None:
        raise InvalidInput(
            f"refusing to ingest {resolved.name}: files matching {pattern!r} hold secrets and "
            "are never stored or embedded (blocklist: .env, *.key, *.pem); "
            "copy what the agent should know into a plain file such as AGENTS.md"
        )
    return resolved
