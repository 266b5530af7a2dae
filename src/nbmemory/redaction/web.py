"""Credentials of the web: a request's cookies, its Authorization header, a URL's password.

Which part of a ``Cookie:``/``Set-Cookie:`` header or of ``curl -b`` is the secret,
when an ``Authorization`` value is code rather than a credential, and when a URL's
``user:password@`` is a template's rather than a password (the rules themselves
are in :mod:`.rules`).
"""

from __future__ import annotations

import re

from . import code
from .commands import command_words
from .rule import Span


def cookie_span(match: re.Match[str]) -> Span | None:
    """A Cookie header's pairs (all of them), a Set-Cookie header's first value, or
    curl's ``-b name=value``, when a value is long enough to be a session's id."""
    start, end = match.span("secret")
    text = match.string
    if match.group("set") or text.startswith("-b", match.start()):
        cut = [i for i in (text.find(";", start, end), text.find(" ", start, end)) if i >= 0]
        end = min(cut, default=end)  # one cookie: its attributes (Path=/) are not secret
    values = [pair.partition("=")[2].strip() for pair in text[start:end].split(";")]
    if not any(len(v) >= 8 and " " not in v and not code.is_placeholder(v) for v in values):
        return None  # "Cookie: lang=en", "cookie: name=value pairs the browser sends"
    if text.startswith("-", match.start()) and "curl" not in command_words(text, match.start()):
        return None  # -b is curl's cookie jar, not other commands' flag
    if end - start and (match.group("set") or text.startswith("-b", match.start())):
        start = text.index("=", start, end) + 1
    return start, len(text[:end].rstrip())


def authorization_span(match: re.Match[str]) -> Span | None:
    start, end = match.span("secret")
    if match.string[end : end + 1] in ("(", "[") or code.is_code(match.string, start, end):
        return None  # authorization = self._get_param("authorization")
    return start, end


#: The user of a URL written as a template (``scheme://username:password@host``).
_TEMPLATE_USER = re.compile(r"(?i)(?:user(?:[_-]?name)?|login|<[^<>]*>|\$\{[^}]*\}|\$\w+)?")
_TEMPLATE_PASSWORD = frozenset(["password", "pass", "passwd", "pwd", "secret"])


def url_password_span(match: re.Match[str]) -> Span | None:
    """A URL's password, unless a template's: a placeholder (``<password>``,
    ``${DB_PASS}``), or the word "password" after a user that is a word too
    (``postgres://user:password@host``; ``postgres://postgres:password@db`` is one)."""
    value = match.group("secret")
    if code.is_placeholder(value):
        return None
    if value.lower() in _TEMPLATE_PASSWORD and _TEMPLATE_USER.fullmatch(match.group("user")):
        return None
    return match.span("secret")
