"""The shape of one redaction rule, and what replaces a secret.

Kept apart from :mod:`.rules` so that the families of rules in their own modules
(:mod:`.commands`) can build :class:`Rule` values without importing the list
they are part of.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

#: What replaces a secret.
REDACTED = "[REDACTED]"

Span = tuple[int, int]


@dataclass(frozen=True)
class Rule:
    """One kind of secret: its name (the kind reported), regex and needle."""

    name: str
    regex: str
    #: What the lowercased text of every match contains: literals (merged with the
    #: other rules' into one trie-shaped regex), or a regex over lowercase text.
    needle: str | tuple[str, ...]
    #: The secret's span in a match, or None when the match is not a secret; by
    #: default the first ``secret…`` group that matched, else the whole match.
    span: Callable[[re.Match[str]], Span | None] | None = None
    #: For a rule whose match holds several secrets (a table's rows, a manifest's
    #: values), their spans instead (none when the match holds no secret).
    spans: Callable[[re.Match[str]], list[Span]] | None = None
    #: The needle holds a ``:`` or an ``=`` (searched only in texts that have one).
    separated: bool = False
    #: Personal data rather than a credential: on only with ``redact_pii``.
    pii: bool = False


def secret_span(match: re.Match[str]) -> Span | None:
    """The span of the first ``secret…`` group that matched, else the whole match."""
    for name, value in match.groupdict().items():
        if value is not None and name.startswith("secret"):
            return match.span(name)
    return match.span()
