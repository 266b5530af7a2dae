"""Option parsing of the magics: argparse parsers that raise ``UsageError``, and the
splitting of a magic line into options and free text (a question keeps its
apostrophes and punctuation as typed).
"""

from __future__ import annotations

import argparse
import re
import shlex
import string
from collections.abc import Callable, Mapping
from typing import Any

from IPython.core.error import UsageError


class HelpShown(Exception):
    """Raised by a parser after printing ``--help``: the magic returns quietly."""


def one_line(text: object) -> str:
    """A message on one line (a UsageError shows no traceback, and no line breaks)."""
    return " ".join(str(text).split())


class Parser(argparse.ArgumentParser):
    """argparse that raises ``UsageError`` and returns after ``--help`` (never exits)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {one_line(message)} (see {self.prog} --help)")

    def exit(self, status: int = 0, message: str | None = None) -> None:  # type: ignore[override]
        if status:
            raise UsageError(one_line(message or f"{self.prog}: bad usage"))
        raise HelpShown


# One token: quoted segments and other non-space characters; an unbalanced quote
# (the apostrophe of "what's") is an ordinary character.
_TOKEN = re.compile(r"""(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\S)+""")
_NUMBER = re.compile(r"^-\d+(\.\d*)?$")


def _unquote(raw: str) -> str:
    """Shell-unquote one token (``"a b"`` -> ``a b``); left as typed if it will not parse."""
    try:
        parts = shlex.split(raw)
    except ValueError:
        return raw
    return "".join(parts) if parts else ""


def split_line(parser: argparse.ArgumentParser, line: str) -> tuple[list[str], str]:
    """Separate the options of ``line`` (unquoted, for argparse) from its free text.

    The free text (a query) keeps its apostrophes and punctuation as typed; one pair
    of quotes around the whole of it is removed.  ``--`` ends the options.
    """
    takes_value = {
        opt: action.nargs != 0 for action in parser._actions for opt in action.option_strings
    }
    options: list[str] = []
    words: list[str] = []
    tokens = _TOKEN.findall(line)
    i = 0
    while i < len(tokens):
        raw = tokens[i]
        if raw == "--":
            words.extend(tokens[i + 1 :])
            break
        if raw.startswith("-") and raw != "-" and not _NUMBER.match(raw):
            name = raw.split("=", 1)[0]
            options.append(_unquote(raw))
            if takes_value.get(name) and "=" not in raw and i + 1 < len(tokens):
                options.append(_unquote(tokens[i + 1]))
                i += 1
        else:
            words.append(raw)
        i += 1
    text = " ".join(words)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = _unquote(text)
    return options, text


def tokens(line: str) -> list[str]:
    return [_unquote(raw) for raw in _TOKEN.findall(line)]


def with_usage(parser: argparse.ArgumentParser) -> Callable[[Callable], Callable]:
    """Append the parser's help to the magic's docstring (what ``%recall?`` shows)."""

    def decorate(func: Callable) -> Callable:
        func.__doc__ = (func.__doc__ or "") + "\n" + parser.format_help()
        return func

    return decorate


REMEMBER = Parser(
    prog="%%remember",
    description="Store the cell body as one memory (exactly as written).",
)
REMEMBER.add_argument("--role", help="user, assistant, tool or system (default: MemoryMagics.role)")
REMEMBER.add_argument("--session", help="session id (default: MemoryMagics.session)")
REMEMBER.add_argument(
    "--importance",
    type=float,
    help="0..1 (default: the role's, user/assistant 0.5, tool 0.3 ..., or the estimate from the text when higher)",
)
REMEMBER.add_argument("--namespace", help="namespace (default: MemoryMagics.namespace)")
REMEMBER.add_argument("--kind", default="message", help="event kind (default: message)")
REMEMBER.add_argument(
    "--meta",
    action="append",
    default=[],
    metavar="KEY=VALUE",
    help="metadata, repeatable; values are stored as text",
)
REMEMBER.add_argument(
    "-i",
    "--interpolate",
    action="store_true",
    help="fill {name} in the body from the notebook's variables ({{ and }} for braces)",
)

RECALL = Parser(
    prog="%recall",
    description=(
        "Semantic search over the memories: a DataFrame best first, with the columns id, "
        "content, role, session, similarity (cosine), importance, created_at, score (what "
        "the ranking sorts by: the fused score in hybrid mode, the cosine in vector mode) "
        "signals (what found each hit: vector, keyword, neighbour) and passage (the part of "
        "a long memory that matched). Bare %recall and "
        "numeric arguments (%recall 12, %recall 3-5) are IPython's history recall; %rep "
        "always is. To search for a number, write %recall -- 2024."
    ),
)
RECALL.add_argument(
    "-k", type=int, help="how many hits, 1 or more (default: MemoryMagics.recall_limit, 5)"
)
RECALL.add_argument(
    "--threshold", type=float, help="keep hits with similarity >= T (default: none, top k)"
)
RECALL.add_argument(
    "--mode",
    choices=("hybrid", "vector", "keyword"),
    help="ranking: hybrid (cosine + keywords + neighbouring turns), vector (cosine only) "
    "or keyword (BM25); default: the profile's",
)
RECALL.add_argument("--session", help="only this session")
RECALL.add_argument("--role", help="only this role")
RECALL.add_argument("--since", help="created at or after (ISO-8601)")
RECALL.add_argument("--until", help="created at or before (ISO-8601)")

CONTEXT = Parser(
    prog="%context",
    description=(
        "The tri-hybrid context an agent would get: recency + salience + relevance, "
        "each row saying which strategy found it and with what score."
    ),
)
CONTEXT.add_argument("--session", help="session id (default: MemoryMagics.session)")
CONTEXT.add_argument(
    "--threshold",
    type=float,
    help="relevance threshold for this call (default: the profile's, 0.2 hybrid, 0.65 spec)",
)
CONTEXT.add_argument(
    "--explain", action="store_true", help="also list the near misses and by how much"
)

MEMORY = Parser(prog="%memory", description="Housekeeping of the notebook's memory store.")
_SUB = MEMORY.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
_STATUS = _SUB.add_parser(
    "status",
    help="path, model, counts per session and kind, embedding backlog",
    description="Path, model, counts per namespace, session and kind, embedding backlog.",
)
_SESSIONS = _SUB.add_parser("sessions", help="sessions as a DataFrame")
_SESSIONS.add_argument("--namespace", help="this namespace (default: MemoryMagics.namespace)")
_SESSIONS.add_argument("--all", action="store_true", help="sessions of every namespace")
_FACTS = _SUB.add_parser("facts", help="long-term facts as a DataFrame")
_FACTS.add_argument("--category", help="only this category")
_FORGET = _SUB.add_parser(
    "forget",
    help="delete memories by id or by filter",
    description="Delete memories by id, or every memory matching the filters.",
)
_FORGET.add_argument("ids", nargs="*", metavar="ID", help="event ids")
_FORGET.add_argument("--session", help="every memory of this session")
_FORGET.add_argument("--role", help="... with this role")
_FORGET.add_argument("--since", help="... created at or after (ISO-8601)")
_FORGET.add_argument("--until", help="... created at or before (ISO-8601)")
_FORGET.add_argument("--all", action="store_true", help="every memory of the namespace")
_FORGET.add_argument(
    "--dry-run", action="store_true", help="show what would be forgotten, delete nothing"
)
_FORGET.add_argument(
    "--purge",
    action="store_true",
    help="then rewrite the store file, so the forgotten text is gone from its bytes too",
)
_EXPORT = _SUB.add_parser("export", help="write memories to a JSON file")
_EXPORT.add_argument("path", help="JSON file to write")
_EXPORT.add_argument("--session", help="only this session")
_EXPORT.add_argument("--namespace", help="only this namespace")
_EXPORT.add_argument(
    "--force", action="store_true", help="replace a file that is not an export (never a database)"
)
_IMPORT = _SUB.add_parser("import", help="read memories from a JSON file written by export")
_IMPORT.add_argument("path", help="JSON file to read")
_IMPORT.add_argument("--namespace", help="import into this namespace")
_CONSOLIDATE = _SUB.add_parser(
    "consolidate",
    help="summarise the messages older than the interval (6 h) now",
    description="Summarise old messages now; --compact replaces them by their summaries "
    "(the originals archived: %memory restore brings them back).",
)
_CONSOLIDATE.add_argument(
    "--compact", action="store_true", help="move the originals to the archive"
)
_CONSOLIDATE.add_argument(
    "--older-than-hours", type=float, help="older than this (default: the 6-hour interval)"
)
_CONSOLIDATE.add_argument("--session", help="only this session")
_RESTORE = _SUB.add_parser("restore", help="bring back the events one summary replaced")
_RESTORE.add_argument("summary_id", help="the summary's id")
_LEARN = _SUB.add_parser(
    "learn",
    help="append a learning to a section of AGENTS.md (redacted) and sync it",
    description="Append TEXT under SECTION of AGENTS.md (the configured file, else "
    "./AGENTS.md), redacted, then sync it into the store.",
)
_LEARN.add_argument("section", help="the heading to append under (quote it if it has spaces)")
_LEARN.add_argument("text", nargs="+", help="the learning")
_FLUSH = _SUB.add_parser("flush", help="wait until every memory is embedded; then show status")
_FLUSH.add_argument("--timeout", type=float, help="seconds to wait at most")
_CLOSE = _SUB.add_parser("close", help="close the store file (the next magic reopens it)")
_OPEN = _SUB.add_parser(
    "open",
    help="the Memory the magics use, to hand to Python code or a widget (mem = %%memory open)",
)


# One history range of IPython's %recall/%history (``12``, ``3-5``, ``~1/2``, ``4:6``,
# ``-3``): the grammar of IPython's ``history.range_re``, with at least one digit.
_HISTORY_RANGE = re.compile(r"(?:~?\d+/)?\d*(?:[-:](?:~?\d+/)?\d+)?")


def is_history_request(line: str) -> bool:
    """Bare ``%recall`` or history numbers/ranges (``12``, ``3-5``, ``~1/2``) only.

    ``--`` ends the options and starts the query, so ``%recall -- 2024`` is a search
    for "2024", never a history range.

    >>> [is_history_request(s) for s in ("", "12", "3-5 7", "~1/2", "-- 2024", "2024 -k 3")]
    [True, True, True, True, False, False]
    """
    words = line.split()
    return all(_HISTORY_RANGE.fullmatch(w) and re.search(r"\d", w) for w in words)


def parse_meta(pairs: list[str]) -> dict[str, str] | None:
    result: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"%%remember: --meta takes key=value, got {pair!r}")
        result[key.strip()] = value
    return result or None


def interpolate(body: str, user_ns: Mapping[str, Any]) -> str:
    """``str.format`` with the notebook's variables: names, ``.attr`` and ``[key]`` only.

    A field that cannot be filled is named in a one-line ``UsageError``:

    >>> interpolate("{d[a][b]}", {"d": {"a": 1}})
    Traceback (most recent call last):
    ...
    IPython.core.error.UsageError: %%remember --interpolate: {d[a][b]} cannot be filled: 'int' object is not subscriptable; write {{ and }} for literal braces
    """
    try:
        return _NotebookFormatter().vformat(body, (), user_ns)
    except (ValueError, AttributeError, IndexError, TypeError, KeyError) as exc:
        raise UsageError(f"%%remember --interpolate: {one_line(exc)}") from None


_BRACES = "write {{ and }} for literal braces"


class _NotebookFormatter(string.Formatter):
    """``string.Formatter`` whose errors say which field of the cell is wrong."""

    def get_value(self, key: int | str, args: Any, kwargs: Mapping[str, Any]) -> Any:
        if isinstance(key, int):  # {} or {0}: there are no positional arguments
            raise UsageError(
                f"%%remember --interpolate: a field without a name ({{}} or {{{key}}}) has "
                f"nothing to fill it: name a variable of the notebook, e.g. {{x}}; {_BRACES}"
            )
        if key not in kwargs:
            raise UsageError(
                f"%%remember --interpolate: {{{key}}} names no variable of the notebook; "
                f"define it, or {_BRACES}"
            )
        return kwargs[key]

    def get_field(self, field_name: str, args: Any, kwargs: Mapping[str, Any]) -> Any:
        try:
            return super().get_field(field_name, args, kwargs)
        except (KeyError, AttributeError, IndexError, TypeError, ValueError) as exc:
            reason = f"no key {exc.args[0]!r}" if isinstance(exc, KeyError) else one_line(exc)
            raise UsageError(
                f"%%remember --interpolate: {{{field_name}}} cannot be filled: {reason}; {_BRACES}"
            ) from None

    def format_field(self, value: Any, format_spec: str) -> Any:
        try:
            return super().format_field(value, format_spec)
        except (ValueError, TypeError) as exc:
            raise UsageError(
                f"%%remember --interpolate: the format :{format_spec} does not fit a "
                f"{type(value).__name__} ({one_line(exc)}); {_BRACES}"
            ) from None


def no_match(args: Any, namespace: str, roles: Any) -> str | None:
    """What ``%recall``'s filters asked for that no memory has (None: no filter given).

    An unknown role is named with the roles there are.
    """
    asked = [
        f"{label} {value!r}"
        for label, value in (
            ("role", args.role),
            ("session", args.session),
            ("a time since", args.since),
            ("a time until", args.until),
        )
        if value is not None
    ]
    if not asked:
        return None
    hint = "drop or change the filter"
    if args.role is not None and args.role not in roles:
        hint = f"roles: {', '.join(roles)}"
    return f"no memory in namespace {namespace!r} has {' and '.join(asked)}; {hint}"
