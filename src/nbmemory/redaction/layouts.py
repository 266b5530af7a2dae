"""Secrets whose name and value are laid out by markup instead of written together.

The key-value and prose rules need the value right after its name.  Pasted
documents put markup between them, or put them on two lines:

* Markdown around the name: ``**Password:** B0ldMd!Pw``, ``**password**: `x```,
  ``*token*: …``;
* a Markdown table: a row ``| Password | T4bleV!al |``, or a column named
  ``password`` under a header (``| user | password |`` then ``| admin | … |``);
* Kubernetes' and Compose's name/value pairs in YAML: ``- name: DB_PASSWORD`` and
  ``value: …`` on the next line (as :mod:`.structure` reads them in JSON), and a
  Docker config's ``auth: <base64 of user:password>`` written as YAML;
* ``pass`` alone as a key (``pass=…``, ``pass: …``, ``user: admin`` then
  ``pass: …``): "pass" also opens a test's result and a boarding pass ("PASS:
  test_login", "boarding pass: gate 12"), so the value must look like a password
  (:func:`pass_value`).

A table's or a row's value must look like a credential (a digit, a symbol, mixed
case): API documentation tables name a password's *type* there
(``| password | string |``).
"""

from __future__ import annotations

import base64
import re

from . import code, prose
from .keys import SECRET_NAME
from .rule import Rule, Span

_VALUE = prose.VALUE
_NAME = r"pass(?:word|wd|phrase|code)?|pwd?|secret|token|api[ _-]?key|access[ _-]?key"

#: ``**Password:** x``, ``**password**: x``, ``*token*: x``, ``__Password__: x``.
_BOLD = (
    # (not a URL's user: ``https://__token__:glpat-…@gitlab.com``)
    rf"(?i)(?<![\w*/])(?P<mark>\*{{1,2}}|_{{1,2}})(?P<name>{_NAME})"
    r"(?:[ \t]*:[ \t]*(?P=mark)|(?P=mark)[ \t]*:)[ \t]*"
    rf"{_VALUE}"
)


def _bold_span(match: re.Match[str]) -> Span | None:
    start, end, quoted = prose.value_span(match)
    value = match.string[start:end].strip("*_")
    end = start + len(value)
    kind = prose.name_class(match.group("name"))
    if code.is_placeholder(value):
        return None
    return (start, end) if prose.looks_secret(value, kind, quoted=quoted, code=True) else None


# -- Markdown tables -------------------------------------------------------------------------
#: A row of two cells, the first naming a secret: ``| Password | T4bleV!al |``.
_ROW = (
    rf"(?im)^[ \t]*\|[ \t]*(?:\*\*)?(?P<name>{_NAME})(?:\*\*)?[ \t]*\|"
    r"[ \t]*(?P<cell>[^|\n]*?)[ \t]*\|[ \t]*\r?$"
)
#: A header naming a password column, its rule line and the rows under it.
_TABLE = (
    r"(?im)^(?P<header>[ \t]*\|[^\n]*\|)[ \t]*\r?\n[ \t]*\|[ \t:|-]*-[ \t:|-]*\r?\n"
    r"(?P<rows>(?:[ \t]*\|[^\n]*\|[ \t]*(?:\r?\n|$))+)"
)
_COLUMN = re.compile(rf"(?i)(?:\*\*)?(?:{_NAME})(?:\*\*)?")
_CELL = re.compile(r"\|([^|\n]*)(?=\|)")


def _credential(value: str) -> bool:
    """Whether a cell's value looks like a credential, not a type or a word."""
    if not value or " " in value or code.is_placeholder(value):
        return False
    return prose.looks_secret(value, prose.STRONG, quoted=False, code=True)


def _cell_span(start: int, cell: str) -> Span | None:
    """The span of a cell's value (inside its backticks), when it is a credential."""
    stripped = cell.strip()
    offset = start + cell.index(stripped) if stripped else start
    inner = stripped.strip("`*")
    if inner != stripped:
        offset += stripped.index(inner)
    return (offset, offset + len(inner)) if _credential(inner) else None


def _row_span(match: re.Match[str]) -> Span | None:
    return _cell_span(match.start("cell"), match.group("cell"))


def _table_spans(match: re.Match[str]) -> list[Span]:
    """The cells of the columns a table's header names as secrets."""
    header = [cell.group(1).strip() for cell in _CELL.finditer(match.group("header"))]
    columns = [i for i, name in enumerate(header) if _COLUMN.fullmatch(name)]
    if not columns or len(header) < 2:
        return []
    spans: list[Span] = []
    position = match.start("rows")
    for line in match.group("rows").splitlines(keepends=True):
        cells = list(_CELL.finditer(line))
        for index in columns:
            if index < len(cells) and len(cells) == len(header):
                span = _cell_span(position + cells[index].start(1), cells[index].group(1))
                if span is not None:
                    spans.append(span)
        position += len(line)
    return spans


# -- name/value pairs on two lines -----------------------------------------------------------
#: ``- name: DB_PASSWORD`` then ``value: …`` (Kubernetes env, Compose, Helm values).
_NAME_VALUE = (
    rf"""(?im)(?<![\w-])name:[ \t]*(?P<q>["']?)(?:{SECRET_NAME})(?P=q)[ \t]*\r?\n"""
    rf"[ \t]*value:[ \t]*{_VALUE}"
)


def _name_value_span(match: re.Match[str]) -> Span | None:
    start, end, quoted = prose.value_span(match)
    value = match.string[start:end]
    if code.is_placeholder(value) or not quoted and code.is_code(match.string, start, end):
        return None  # value: ${DB_PASSWORD}, value: !Ref DbPassword
    return (start, end) if prose.looks_secret(value, prose.WEAK, quoted=quoted) else None


# -- "pass" alone as a key ---------------------------------------------------------------------
_PASS_KEY = (
    r"""(?im)(?<![\w.$-])pass(?P<key_quote>\\*["'])?[ \t]*(?P<verb>[:=])(?![:=])[ \t]*"""
    rf"{_VALUE}"
)
#: A test's name or a file's path (``PASS: test_login``, ``PASS: src/app.test.ts``).
_IDENTIFIER_OR_PATH = re.compile(r"[a-z0-9_]*_[a-z0-9_]*|[\w.-]*[/.][\w./-]*|[\w-]+::[\w:]+")


def pass_value(value: str) -> bool:
    """Whether a value given after ``pass`` alone is a password: 6 characters or
    more, a letter with a digit or a symbol, and not a test's name, a class's name,
    a path or a count ("PASS: test_login", "pass: BatchedProviderA", "pass: 12 of 12")."""
    if len(value) < 6 or code.is_placeholder(value) or _IDENTIFIER_OR_PATH.fullmatch(value):
        return False
    if not any(c.isalpha() for c in value) or value.isalpha():
        return False  # "pass: BatchedProviderA": a class's name, not a password
    return prose.looks_secret(value, prose.STRONG, quoted=False, code=True)


def _pass_span(match: re.Match[str]) -> Span | None:
    start, end, quoted = prose.value_span(match)
    value = match.string[start:end]
    if not quoted and code.is_code(match.string, start, end):
        return None  # pass = getpass()
    return (start, end) if pass_value(value) else None


# -- Docker's auth in YAML ------------------------------------------------------------------
#: ``auth: <base64 of user:password>`` (a Docker config's ``auths`` written as YAML).
_DOCKER_AUTH = (
    r"""(?im)^[ \t]*(?P<q>["']?)auth(?P=q)[ \t]*:[ \t]*(?P<v>["']?)"""
    r"(?P<secret>[A-Za-z0-9+/]{12,}={0,2})(?P=v)[ \t]*,?[ \t]*\r?$"
)


def _docker_auth_span(match: re.Match[str]) -> Span | None:
    """The value, when it decodes to ``user:password`` (``auth: required`` does not)."""
    try:
        decoded = base64.b64decode(match.group("secret"), validate=True)
    except ValueError:
        return None
    return match.span("secret") if b":" in decoded else None


LAYOUT_RULES: tuple[Rule, ...] = (
    Rule(
        "secret_value",
        _BOLD,
        r"(?:pass|pw|pwd|word|wd|phrase|code|secret|token|key)"
        r"(?:[ \t]*:[ \t]*[*_]|[*_]{1,2}[ \t]*:)",
        _bold_span,
        separated=True,
    ),
    Rule("secret_value", _ROW, r"\|[ \t]*\**(?:pass|pw|secret|token|api|access)", _row_span),
    Rule(
        "secret_value",
        _TABLE,
        r"\|[ \t]*\**(?:pass|pw|secret|token|api|access)",
        spans=_table_spans,
    ),
    Rule("secret_value", _DOCKER_AUTH, r"auth[\"']?[ \t]*:", _docker_auth_span, separated=True),
    Rule("secret_value", _NAME_VALUE, ("value:",), _name_value_span, separated=True),
    Rule("secret_value", _PASS_KEY, r"pass\\*[\"']?[ \t]*[:=]", _pass_span, separated=True),
)
