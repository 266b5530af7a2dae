"""Credentials in the files and strings whose shape says where they are: a PuTTY key
file's private lines, a PEM key's body pasted without its BEGIN line, a Kubernetes Secret's values, a credentials CSV's password
column, a Wi-Fi QR code's password, a Terraform variable's default, an Oracle
connect string and a password passed as a SQL statement's parameter.

Each has a marker no prose has (``Private-Lines: 1``, ``kind: Secret``, a header
``User name,Password,…``, ``WIFI:S:…;P:…;;``, ``jdbc:oracle:thin:``, ``WITH PASSWORD
%s``), so the value is judged only for being a placeholder; what looks like one
without its marker (a ConfigMap's ``data:``, a CSV without a password column,
``docker pull library/nginx@sha256:…``) is left alone.
"""

from __future__ import annotations

import bisect
import functools
import re

from . import code
from .keys import SECRET_KEY
from .rule import Rule, Span

#: A line break as pasted: real, or escaped at any depth of JSON (``\n``, ``\\n`` ...).
_NL = r"(?:\r?\n|\\+[rn])"

# -- PuTTY's key file (.ppk) -------------------------------------------------------------------
#: ``Private-Lines: N`` and the N lines of base64 after it; ``Private-MAC: …``.
_PUTTY = (
    rf"(?i)private-lines:[ \t]*(?P<lines>\d{{1,4}})[ \t]*{_NL}"
    r"(?P<secret>[A-Za-z0-9+/=]+(?=[ \t]*(?:\r?\n|\\+[rn]|$))"
    rf"(?:{_NL}[A-Za-z0-9+/=]+(?=[ \t]*(?:\r?\n|\\+[rn]|$)))*)"
    r"|private-mac:[ \t]*(?P<secret_mac>[0-9a-fA-F]{4,})"
)
_LINE_BREAK = re.compile(_NL)


def _putty_span(match: re.Match[str]) -> Span | None:
    """The private lines (as many as the header says), or the MAC."""
    if match.group("secret") is None:
        return match.span("secret_mac")
    start = match.start("secret")
    wanted = int(match.group("lines"))
    breaks = list(_LINE_BREAK.finditer(match.group("secret")))
    if wanted < 1:
        return None
    end = match.end("secret") if len(breaks) < wanted else start + breaks[wanted - 1].start()
    return start, end


# -- a Kubernetes Secret -----------------------------------------------------------------------
#: The line that makes a YAML document (or a list's item) a Secret.
_MANIFEST = r"""(?m)^[ \t]*(?:-[ \t]+)?(?P<key>kind): (?P<q>["']?)Secret(?P=q)[ \t]*(?:#.*)?\r?$"""
_MANIFEST_LINE = re.compile(_MANIFEST)
_DOCUMENT_MARK = re.compile(r"(?:---|\.\.\.)(?:[ \t].*)?\r?")
_DATA = re.compile(r"[ \t]*(?:-[ \t]+)?(?:data|stringData):[ \t]*(?:#.*)?\r?")
_ITEM = re.compile(r" *-[ \t]+")
_ENTRY = re.compile(
    r"""(?P<key>[^\s:#'"][^:\n]*|"[^"\n]*"|'[^'\n]*'):(?:[ \t]+(?P<value>[^\n]*?))?[ \t]*\r?$"""
)
_BLOCK_SCALAR = re.compile(r"[|>][+-]?\d?(?:[ \t]+#.*)?")


def _lines(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The (start, end) of each line in ``text[start:end]`` (without its line break)."""
    found = []
    position = start
    while position < end:
        stop = text.find("\n", position, end)
        stop = end if stop < 0 else stop
        found.append((position, stop))
        position = stop + 1
    return found


def _indent(line: str) -> int | None:
    """The column of a line's key (after its spaces), None for a blank or comment line."""
    stripped = line.lstrip(" ")
    if not stripped.strip() or stripped.startswith("#"):
        return None
    return len(line) - len(stripped)


def _layout(line: str) -> tuple[int, int] | None:
    """A line's indent and the column of its key (``- key`` puts it two deeper), None
    for a blank or comment line; a document's marker (``---``) is at -1, before all."""
    indent = _indent(line)
    if indent is None:
        return None
    if indent == 0 and _DOCUMENT_MARK.fullmatch(line):
        return -1, -1
    item = _ITEM.match(line)
    return indent, item.end() if item else indent


def _mapping(text: str, lines: list[tuple[int, int]], index: int, column: int) -> tuple[int, int]:
    """The lines (first, and past the last) of the mapping whose key at ``column`` is
    on line ``index``: a document's, or a list item's from its ``- `` line on."""

    def layout(number: int) -> tuple[int, int] | None:
        return _layout(text[lines[number][0] : lines[number][1]])

    first = index
    if (layout(index) or (0, 0))[0] == column:  # not the item's first line: keys above too
        while first > 0:
            above = layout(first - 1)
            if above is not None and above[0] < column:
                if above[1] == column:  # the item's first line ("- apiVersion: v1")
                    first -= 1
                break
            first -= 1
    last = index + 1
    while last < len(lines):
        below = layout(last)
        if below is not None and below[0] < column:
            break
        last += 1
    return first, last


def _value_spans(text: str, start: int, column: int, limit: int) -> list[Span]:
    """The values of the map after ``data:`` (keys deeper than ``column``), up to ``limit``."""
    spans: list[Span] = []
    lines = _lines(text, start, limit)
    entry_indent: int | None = None
    index = 0
    while index < len(lines):
        line_start, line_end = lines[index]
        index += 1
        indent = _indent(text[line_start:line_end])
        if indent is None:
            continue
        if indent <= column:
            break
        entry_indent = indent if entry_indent is None else entry_indent
        if indent != entry_indent:
            continue
        entry = _ENTRY.match(text, line_start + indent, line_end)
        if entry is None or entry.group("value") is None:
            continue
        value_start, value_end = entry.span("value")
        value = entry.group("value")
        if _BLOCK_SCALAR.fullmatch(value):  # key: | and the lines deeper than the key
            block = []
            while index < len(lines):
                deeper = _indent(text[lines[index][0] : lines[index][1]])
                if deeper is not None and deeper <= indent:
                    break
                block.append(lines[index])
                index += 1
            while block and _indent(text[block[-1][0] : block[-1][1]]) is None:
                block.pop()
            if block:
                first = block[0][0] + (_indent(text[block[0][0] : block[0][1]]) or 0)
                spans.append((first, block[-1][1]))
            continue
        if " #" in value:
            value = value[: value.index(" #")].rstrip()
            value_end = value_start + len(value)
        if len(value) >= 2 and value[0] in "'\"" and value[-1] == value[0]:
            value_start, value_end, value = value_start + 1, value_end - 1, value[1:-1]
        if value and value not in ("~", "null") and not code.is_placeholder(value):
            spans.append((value_start, value_end))
    return spans


@functools.lru_cache(maxsize=1)
def _secret_values(text: str) -> tuple[int, tuple[Span, ...]]:
    """Where the first Secret's ``kind`` line starts, and the values under ``data:``
    and ``stringData:`` of every Secret in ``text``, each mapping read once."""
    lines = _lines(text, 0, len(text))
    starts = [start for start, _ in lines]
    spans: list[Span] = []
    read: dict[int, tuple[int, int]] = {}  # column -> the last mapping read at it
    first_kind = -1
    for kind in _MANIFEST_LINE.finditer(text):
        first_kind = kind.start() if first_kind < 0 else first_kind
        index = bisect.bisect_right(starts, kind.start()) - 1
        column = kind.start("key") - kind.start()
        if column in read and read[column][0] <= index < read[column][1]:
            continue  # a second kind line in a mapping already read
        first, last = read[column] = _mapping(text, lines, index, column)
        for start, end in lines[first:last]:
            layout = _layout(text[start:end])
            if layout is not None and layout[1] == column and _DATA.fullmatch(text, start, end):
                spans.extend(_value_spans(text, end + 1, column, lines[last - 1][1]))
    return first_kind, tuple(spans)


def _manifest_spans(match: re.Match[str]) -> list[Span]:
    """The values under ``data:`` and ``stringData:`` of the Secrets of the text (all
    given at its first ``kind: Secret``, the mappings read in one pass): in the
    mapping of the ``kind`` line (a document between ``---`` lines, or a list's item)."""
    first, spans = _secret_values(match.string)
    return list(spans) if match.start() == first else []


# -- a credentials CSV ---------------------------------------------------------------------------
#: The columns whose cells are secrets (the AWS console's ``User name,Password,Access
#: key ID,Secret access key,Console login link``).
_CSV_SECRET_COLUMNS = frozenset(["password", "secret access key"])
_CSV_NAMES = r"(?:password|secret access key)"
_CSV_HEADER = rf"(?im)^(?P<header>[^\n]*,{_CSV_NAMES}(?:,[^\n]*)?|{_CSV_NAMES},[^\n]*)\r?$"
_CSV_NEEDLE = (",password", "password,", ",secret access key", "secret access key,")
_CSV_FIELD = re.compile(
    r"""[ \t]*(?:"(?P<quoted>(?:[^"\n]|"")*)"|(?P<bare>[^,\n]*?))[ \t]*(?P<sep>,|$)"""
)
_COLUMN_NAME = re.compile(r"[A-Za-z][\w .-]{0,39}")


def _csv_fields(text: str, start: int, end: int) -> list[Span] | None:
    """The spans of the fields of the CSV line ``text[start:end]``, None if it is not one."""
    if end > start and text[end - 1] == "\r":
        end -= 1
    fields: list[Span] = []
    position = start
    while True:
        field = _CSV_FIELD.match(text, position, end)
        if field is None or len(fields) > 50:
            return None
        group = "quoted" if field.group("quoted") is not None else "bare"
        fields.append(field.span(group))
        if not field.group("sep"):
            return fields
        position = field.end()


def _csv_spans(match: re.Match[str]) -> list[Span]:
    """The secret columns' cells of the rows under a CSV header naming them."""
    text = match.string
    header = _csv_fields(text, match.start("header"), match.end("header"))
    if header is None or len(header) < 2:
        return []
    names = [text[a:b].strip().lower() for a, b in header]
    if not all(_COLUMN_NAME.fullmatch(name) for name in names):
        return []  # a column that is no name: code ("def login(user, password):") or prose
    columns = [index for index, name in enumerate(names) if name in _CSV_SECRET_COLUMNS]
    spans: list[Span] = []
    for start, end in _lines(text, match.end() + 1, len(text)):
        row = _csv_fields(text, start, end)
        if row is None or len(row) != len(header):
            break
        for index in columns:
            cell_start, cell_end = row[index]
            if cell_end > cell_start and not code.is_placeholder(text[cell_start:cell_end]):
                spans.append((cell_start, cell_end))
    return spans


# -- a Wi-Fi QR code, a Terraform variable ------------------------------------------------------
#: ``WIFI:S:HomeNet;T:WPA;P:secret;;`` (the fields in any order, ``\;`` escaped).
_WIFI_QR = r"(?i)\bWIFI:(?:[^;\n]*;){0,8}?P:(?P<secret>(?:\\.|[^;\\\n])+)"
#: ``variable "db_password" { … default = "…" }``: a default of a variable whose name
#: names a secret, or that says ``sensitive = true``.
_TF_VARIABLE = r'variable\s+"(?P<name>[\w-]{1,100})"\s*\{(?P<body>(?:[^{}]|\{[^{}]*\}){0,4000}?)\}'
_TF_DEFAULT = re.compile(r'(?m)^[ \t]*default[ \t]*=[ \t]*"(?P<value>[^"\n]+)"')
_TF_SENSITIVE = re.compile(r"(?m)^[ \t]*sensitive[ \t]*=[ \t]*true\b")


def _tf_variable_span(match: re.Match[str]) -> Span | None:
    body = match.group("body")
    default = _TF_DEFAULT.search(body)
    if default is None or code.is_placeholder(default.group("value")):
        return None
    if not SECRET_KEY.fullmatch(match.group("name")) and not _TF_SENSITIVE.search(body):
        return None
    start = match.start("body") + default.start("value")
    return start, start + len(default.group("value"))


# -- Oracle's user/password@database -------------------------------------------------------------
_ORACLE_TOOLS = ("sqlplus", "sqlldr", "expdp", "impdp", "dgmgrl", "rman target")
_ORACLE = (
    r"(?i)(?:jdbc:oracle:(?:thin|oci8?|kprb):"
    rf"|(?<![\w-])(?:{'|'.join(_ORACLE_TOOLS)})(?:[ \t]+-\w+)*[ \t]+(?:userid=)?[\"']?)"
    r"""(?P<user>[\w$#.]{1,128})/(?P<secret>[^\s/@"']{1,128})(?=@|["']?(?:\s|$))"""
)
#: A file given to a tool where its logon would be (``sqlplus scripts/setup.sql``).
_ORACLE_FILE = re.compile(r"(?i).*\.(?:sql|ctl|dat|dmp|par|log|txt|csv)")


def _oracle_span(match: re.Match[str]) -> Span | None:
    value = match.group("secret")
    if _ORACLE_FILE.fullmatch(value) or code.is_placeholder(value):
        return None
    return match.span("secret")


# -- a password as a SQL statement's parameter ---------------------------------------------------
#: ``cursor.execute("CREATE USER bob WITH PASSWORD %s", ("pw",))``: the statement's
#: string, then its parameters; the one at the password's placeholder is the secret.
_SQL_PARAMETER = (
    r"""(?i)(?P<q>["'])(?P<head>[^"'\n]{0,300}?)\b(?:password|identified by) (?P<mark>%s|\?)"""
    r"""(?![\w%])[^"'\n]{0,300}(?P=q)\s*,\s*[(\[]"""
)
_PARAMETER = re.compile(
    r"""\s*(?:(?P<q>["'])(?P<value>[^"'\\\n]*)(?P=q)|[^,()\[\]"'\n]*(?:\([^()\n]*\))?[^,()\[\]"'\n]*)"""
    r"""\s*(?P<end>,|[)\]])"""
)


def _sql_parameter_span(match: re.Match[str]) -> Span | None:
    wanted = match.group("head").count(match.group("mark"))
    position = match.end()
    for _ in range(wanted):  # the parameters before the password's
        before = _PARAMETER.match(match.string, position)
        if before is None or before.group("end") != ",":
            return None
        position = before.end()
    parameter = _PARAMETER.match(match.string, position)
    if parameter is None:
        return None
    value = parameter.group("value")
    if not value or code.is_placeholder(value):
        return None
    return parameter.span("value")


#: A PEM private key's END line (its body before it may have lost the BEGIN line).
_PEM_END = r"-----END[ A-Z0-9_-]{0,60}?PRIVATE KEY(?: BLOCK)?-----"
_BASE64_LINE = re.compile(r"[ \t]*[A-Za-z0-9+/=]{16,}[ \t]*")


def _pem_body_span(match: re.Match[str]) -> Span | None:
    """The base64 lines right above an END line, and the END line: "just the body, no
    header:" then the key (with its BEGIN line, the private-key rule takes it whole).
    Each END line looks back only over its own body, so the rule stays linear."""
    text = match.string
    start = match.start()
    while start > 0 and text[start - 1] == "\n":
        line_start = text.rfind("\n", 0, start - 1) + 1
        if not _BASE64_LINE.fullmatch(text, line_start, start - 1):
            break
        start = line_start
    return (start, match.end()) if start < match.start() else None


FORMAT_RULES: tuple[Rule, ...] = (
    Rule("private_key", _PUTTY, ("private-lines:", "private-mac:"), _putty_span),
    Rule("private_key", _PEM_END, ("-----end",), _pem_body_span),
    Rule(
        "secret_value",
        _MANIFEST,
        ("kind: secret", 'kind: "secret"', "kind: 'secret'"),
        spans=_manifest_spans,
    ),
    Rule("secret_value", _CSV_HEADER, _CSV_NEEDLE, spans=_csv_spans),
    Rule("secret_value", _WIFI_QR, ("wifi:",)),
    Rule("secret_value", _TF_VARIABLE, ('variable "',), _tf_variable_span),
    Rule(
        "secret_value",
        _ORACLE,
        ("dbc:oracle:", *_ORACLE_TOOLS),
        _oracle_span,
    ),
    Rule(
        "secret_value",
        _SQL_PARAMETER,
        ("password %s", "password ?", "identified by"),
        _sql_parameter_span,
    ),
)
