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

import bisect
import fnmatch
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import InvalidInput

#: What replaces a secret.
REDACTED = "[REDACTED]"

# A value after a secret's name: in double or single quotes (may hold spaces), or
# bare up to a space or a quote.  Never "[REDACTED]",
# so redacting twice changes nothing and counts nothing.
_NOT_DONE = r"(?!\[REDACTED\])"
_VALUE = (
    rf""""(?P<secret_dq>{_NOT_DONE}[^"\n]+)"|'(?P<secret_sq>{_NOT_DONE}[^'\n]+)'"""
    rf"""|(?P<secret>{_NOT_DONE}[^\s"']+)"""
)
# A name that says its value is secret, as the last word of a key: password,
# db_password, "aws_secret_access_key", X-Api-Key, client_secret, auth_token ...
# (but not max_tokens, password_hint or passport).
_SECRET_NAME = (
    r"(?:[A-Za-z0-9]+[_.-])*"
    r"(?:pass(?:word|wd|phrase)|secret(?:[_-]?(?:access[_-]?)?key)?|credentials?"
    r"|(?:api|access|private|client|signing|encryption)[_-]?(?:key|secret)|apikey"
    r"|(?:auth|access|refresh|session|bearer|api|id)?[_-]?token)"
)
_KEY_VALUE = (
    rf"(?i)(?<![A-Za-z0-9_]){_SECRET_NAME}(?![A-Za-z0-9_])"
    # ``=>`` only after a space (``key => v``); ``key=>v`` is ``=`` then the value ``>v``
    rf"""["']?(?:\s+=>|\s*:=|\s*:|=|\s+=(?!>))\s*(?:{_VALUE})"""
)
_PEM = r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"

#: (name, regex) applied in this order.  A ``secret`` group (``secret``,
#: ``secret_dq``, ``secret_sq``), when present, is the part replaced; otherwise
#: the whole match is.
DEFAULT_PATTERNS: tuple[tuple[str, str], ...] = (
    # the block, or as much of it as was pasted (a missing END line)
    (
        "private_key",
        _PEM + r"(?:\s*[A-Za-z0-9+/=]{4,})*\s*(?:-----END [A-Z0-9 ]*PRIVATE KEY"
        r"(?: BLOCK)?-----)?",
    ),  # fmt: skip
    ("aws_access_key_id", r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b"),
    ("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"),
    ("openai_key", r"\bsk-(?:proj-|svcacct-|admin-|ant-)?[A-Za-z0-9_-]{20,}"),
    ("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    ("stripe_key", r"\b[rsp]k_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}\b"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"),
    (
        "authorization",
        rf"(?i)\bauthorization[\"']?\s*[:=]\s*[\"']?(?:basic|bearer|token|digest)?\s*"
        rf"(?P<secret>{_NOT_DONE}[A-Za-z0-9\-._~+/]{{8,}}=*)",
    ),
    ("bearer_token", rf"(?i)\bbearer\s+(?P<secret>{_NOT_DONE}[A-Za-z0-9\-._~+/]{{16,}}=*)"),
    # user:password@ in a URL (the user name stays)
    ("url_password", rf"\b[a-z][a-z0-9+.-]*://[^\s/:@]*:(?P<secret>{_NOT_DONE}[^\s/@]+)@"),
    # Vectora's password / api_key patterns, grown to JSON, YAML, dicts and env files
    ("secret_value", _KEY_VALUE),
    # 13-19 digits of a card number (Luhn-checked, see _CHECKS)
    ("payment_card", r"(?<![\d-])[3-6]\d{3}(?:[ -]?\d){9,15}(?![\d-])"),
)

#: For each default pattern, a cheap regex that every match of the pattern also
#: matches (a literal it starts with, or a word every secret name holds): a text
#: without it is not searched with the pattern (most texts hold none).
_NEEDLES: dict[str, str] = {
    "private_key": r"-----BEGIN",
    "aws_access_key_id": r"A(?:KIA|SIA|GPA|IDA|ROA|NPA|NVA|IPA)",
    "github_token": r"gh[pousr]_|github_pat_",
    "openai_key": r"sk-",
    "slack_token": r"xox",
    "stripe_key": r"k_(?:live|test)_",
    "google_api_key": r"AIza",
    "jwt": r"eyJ",
    "authorization": r"""(?i:authorization)["']?\s*[:=]""",
    "bearer_token": r"(?i:bearer)",
    "url_password": r"://",
    # the last word of every secret name (see _SECRET_NAME), then what may follow it
    "secret_value": r"""(?i:(?:word|wd|phrase|secret|credentials?|key|token)["']?\s*[:=])""",
    # the shortest card number the pattern takes
    "payment_card": r"[3-6]\d{3}(?:[ -]?\d){9}",
}
_COMPILED_NEEDLES = {name: re.compile(needle) for name, needle in _NEEDLES.items()}
#: The needles that hold a ``:`` or an ``=`` (searched only in a text that has one).
_SEPARATED = frozenset({"authorization", "url_password", "secret_value"})
#: The other needles in one pattern, and these in another: a text with none (most
#: texts) is scanned once, and only texts with a ``:`` or ``=`` twice.
_ANY_NEEDLE = re.compile(
    "|".join(f"(?:{needle})" for name, needle in _NEEDLES.items() if name not in _SEPARATED)
)
_ANY_SEPARATED_NEEDLE = re.compile(
    "|".join(f"(?:{needle})" for name, needle in _NEEDLES.items() if name in _SEPARATED)
)


def _some_needle(text: str) -> bool:
    """Whether any needle is in ``text`` (else no default pattern can match it)."""
    if _ANY_NEEDLE.search(text) is not None:
        return True
    return ("=" in text or ":" in text) and _ANY_SEPARATED_NEEDLE.search(text) is not None


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
        #: Whether every pattern has a needle (then a text with none is returned as is).
        self._all_needled = all(name in _COMPILED_NEEDLES for name, _ in self.patterns)

    def suspects(self, texts: Sequence[str]) -> list[int]:
        """The positions of the texts :meth:`redact` may change, ascending: those
        holding a needle (all of them when a pattern has none).

        The batch is searched as one string, its texts joined by NUL, which no
        needle matches: one regex call per needle found instead of two per text
        (about a tenth of ``add_events``' time in batches of 1,000, profiled at 400k rows).
        """
        if not self._all_needled:
            return list(range(len(texts)))
        joined = "\0".join(texts)
        starts = [0] * len(texts)
        for index in range(1, len(texts)):
            starts[index] = starts[index - 1] + len(texts[index - 1]) + 1
        found: set[int] = set()
        for pattern in (_ANY_NEEDLE, _ANY_SEPARATED_NEEDLE):
            if pattern is _ANY_SEPARATED_NEEDLE and "=" not in joined and ":" not in joined:
                continue
            position = 0
            while (match := pattern.search(joined, position)) is not None:
                index = bisect.bisect_right(starts, match.start()) - 1
                found.add(index)
                if index + 1 == len(texts):
                    break
                position = starts[index + 1]
        return sorted(found)

    def redact(self, text: str) -> Redaction:
        """Replace every secret in ``text`` by ``[REDACTED]``."""
        total = 0
        kinds: list[str] = []
        some_needle = _some_needle(text)
        if not some_needle and self._all_needled:
            return Redaction(text, 0)
        for name, pattern in self.patterns:
            needle = _COMPILED_NEEDLES.get(name)
            if needle is not None and (not some_needle or needle.search(text) is None):
                continue
            check = _CHECKS.get(name)
            found = 0

            def replace(match: re.Match[str], check: Any = check) -> str:
                nonlocal found
                if check is not None and not check(match):
                    return match.group(0)
                found += 1
                return _replace(match)

            text = pattern.sub(replace, text)
            if found:
                total += found
                kinds.append(name)
        return Redaction(text, total, tuple(kinds))


def _replace(match: re.Match[str]) -> str:
    for group in ("secret", "secret_dq", "secret_sq"):
        if group in match.re.groupindex and match.group(group) is not None:
            start = match.start(group) - match.start()
            end = match.end(group) - match.start()
            whole = match.group(0)
            return whole[:start] + REDACTED + whole[end:]
    return REDACTED


def _luhn(match: re.Match[str]) -> bool:
    """Whether the digits pass the Luhn check (what makes a number a card number)."""
    digits = [int(c) for c in match.group(0) if c.isdigit()]
    total = 0
    for i, digit in enumerate(reversed(digits)):
        if i % 2:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


#: Extra checks a match must pass to count as a secret.
_CHECKS = {"payment_card": _luhn}


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
