"""More services' credentials, found by their published format: a Sentry DSN's key,
a Mailgun API key, Atlassian API tokens and Bitbucket app passwords, a Telegram
bot's token in the Bot API's URL whatever its length (the documentation's
``bot123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11``), a RubyGems API key, and a
Datadog key (32 or 40 hex digits) right after its name.

Each starts with a literal (``key-``, ``ATATT3``, ``/bot``) or sits in a URL only the
service uses (``@o123.ingest.sentry.io``), which is the rule's needle.
"""

from __future__ import annotations

import re

from .rule import Rule, Span

#: Not inside a longer word; a ``\n`` escape before the token counts as a boundary.
_START = r"(?:(?<=\\[nrt])|(?<![A-Za-z0-9_]))"
_END = r"(?![A-Za-z0-9_])"


def _mixed_span(match: re.Match[str]) -> Span | None:
    """The match when it holds a digit and a letter past its prefix (a key does;
    ``key-`` and a word of 32 letters do not)."""
    value = match.group(0)[4:]
    return (
        match.span()
        if any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
        else None
    )


SERVICE_RULES: tuple[Rule, ...] = (
    # https://<public key>@o123.ingest.sentry.io/456 (and a legacy DSN's :<secret>)
    Rule(
        "sentry_dsn",
        r"(?i)\bhttps?://(?P<secret>[0-9a-f]{32})(?::[0-9a-f]{32})?@(?:[\w-]+\.)*sentry\.io\b",
        ("sentry.io",),
    ),
    Rule("mailgun_key", rf"{_START}key-[0-9a-z]{{32}}{_END}", ("key-",), _mixed_span),
    Rule(
        "atlassian_token",
        rf"{_START}(?:ATATT3[A-Za-z0-9_=-]{{20,}}|ATBB[A-Za-z0-9_=.-]{{28,}}){_END}",
        ("atatt3", "atbb"),
    ),
    Rule("rubygems_key", rf"{_START}rubygems_[0-9a-f]{{48}}{_END}", ("rubygems_",)),
    # "Datadog API key 9acb…", "DD_APP_KEY=…" is the key-value rule's
    Rule(
        "datadog_key",
        r"(?i)\b(?:datadog|dd)[ _-]?(?:api|app(?:lication)?)[ _-]?key\b[ \t]*(?:[:=]|is)?[ \t]*"
        rf"(?P<secret>[0-9a-f]{{40}}|[0-9a-f]{{32}}){_END}",
        r"(?:datadog|dd)[ _-]?(?:api|app)",
    ),
    # the Bot API's URL: api.telegram.org/bot<id>:<token>/getMe, a token of any length
    Rule(
        "telegram_bot_token",
        rf"/bot(?P<secret>\d{{5,12}}:[A-Za-z0-9_-]{{30,60}}){_END}",
        ("/bot",),
    ),
)
