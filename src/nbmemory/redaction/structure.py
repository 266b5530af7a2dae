"""Redaction inside JSON: decode, redact each string and each secret-named value, re-encode.

Agents write JSON inside JSON: an OpenAI-style tool call's ``arguments`` is a
JSON-encoded string (``"{\\"password\\": \\"hunter2\\"}"``), a tool result is JSON
text in ``content``, metadata holds a service-account file as a string.  Regexes
over the encoded text see escaped quotes and ``\\n`` for newlines; here the text is
decoded instead, every string in it is redacted as text (itself decoded again if
it is JSON), and a value under a key that names a secret (``password``,
``api_key``, ``private_key`` …) is replaced whatever its type.  When something
changed, the document is encoded again in the style it was written in (the same
separators, indentation and ASCII escaping, found by re-encoding the original),
so the stored text is valid JSON of the same shape; when nothing changed the
text is returned as it was, byte for byte.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from . import code
from .layouts import pass_value
from .rules import REDACTED, SECRET_KEY

#: A text redactor: (text, depth) -> (text, kinds found).
TextRedactor = Callable[[str, int], tuple[str, list[str]]]
#: A command-line scanner for argv lists: joined text -> spans and kinds.
ArgvScanner = Callable[[str], list[tuple[int, int, str]]]

_NOT_JSON = object()
#: Keys that name the variable in name/value pairs (``{"name": "DB_PASSWORD", "value": …}``:
#: Kubernetes env, CloudFormation parameters, form fields).
_PAIR_NAMES = ("name", "key", "parameterkey", "parametername", "variable", "field", "label")
_PAIR_VALUES = ("value", "parametervalue", "secretvalue")
_PIN = re.compile(r"\d{4,12}")
_STYLES: tuple[dict[str, Any], ...] = tuple(
    {"ensure_ascii": ascii_, "separators": separators, "indent": indent}
    for indent in (None, 2, 4, "\t")
    for ascii_ in (False, True)
    for separators in (((", ", ": "), (",", ":")) if indent is None else ((",", ": "),))
)


def loads(text: str) -> Any:
    """``text`` decoded when it is a JSON object, array or string, else ``_NOT_JSON``."""
    stripped = text.strip()
    if len(stripped) < 2 or stripped[0] not in '{["' or stripped[-1] not in '}]"':
        return _NOT_JSON
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):
        return _NOT_JSON


def is_json(value: Any) -> bool:
    return value is not _NOT_JSON


def dumps_like(text: str, old: Any, new: Any) -> str:
    """``new`` encoded in the style ``text`` (the encoding of ``old``) was written in."""
    stripped = text.strip()
    lead = text[: len(text) - len(text.lstrip())]
    trail = text[len(text.rstrip()) :]
    for style in _STYLES:
        try:
            if json.dumps(old, **style) == stripped:
                return lead + json.dumps(new, **style) + trail
        except (ValueError, RecursionError):  # pragma: no cover - old came from json.loads
            break
    return lead + json.dumps(new, ensure_ascii=False) + trail


#: A user:password pair in base64, as Docker's and npm's "auth" keep it.
_BASE64_CREDENTIAL = re.compile(r"[A-Za-z0-9+/]{12,}={0,2}")


def secret_key(key: str, value: Any) -> bool:
    """Whether a dict key says its value is secret (``pin`` only for 4-12 digits,
    ``pwd`` only when the value is not a path: it is also the working directory,
    ``pass`` only for a value shaped like a password)."""
    name = key.strip().replace(" ", "_")
    lowered = name.lower()
    if lowered in ("pw", "passcode", "creds"):
        return True
    if lowered == "pin":
        return _PIN.fullmatch(str(value)) is not None and not isinstance(value, bool)
    if lowered == "pwd":
        return isinstance(value, str | int) and not str(value).startswith(("/", "~", "."))
    if lowered == "pass":  # {"pass": "Xk9!mmQ2"}, not {"pass": "test_login"}
        return isinstance(value, str) and pass_value(value)
    if lowered in ("auth", "_auth"):  # ~/.docker/config.json, .npmrc: base64 of user:password
        return isinstance(value, str) and _BASE64_CREDENTIAL.fullmatch(value) is not None
    return SECRET_KEY.fullmatch(name) is not None


#: The keys of a Kubernetes Secret whose values are all secret (``kubectl get secret -o json``).
_MANIFEST_KEYS = ("data", "stringData")


def _manifest(node: dict[str, Any]) -> bool:
    """Whether ``node`` is a Kubernetes Secret (``{"kind": "Secret", "data": {…}}``)."""
    return node.get("kind") == "Secret" and any(
        isinstance(node.get(key), dict) for key in _MANIFEST_KEYS
    )


def _pair_value_key(node: dict[str, Any]) -> str | None:
    """In a name/value pair naming a secret, the key of the value to redact."""
    lowered = {k.lower(): k for k in node if isinstance(k, str)}
    for name_key in _PAIR_NAMES:
        name = node.get(lowered.get(name_key, ""))
        if isinstance(name, str) and SECRET_KEY.fullmatch(name.strip().replace(" ", "_")):
            for value_key in _PAIR_VALUES:
                if value_key in lowered:
                    return lowered[value_key]
    return None


class Walker:
    """One redaction of a decoded document (kinds found are appended to ``found``)."""

    def __init__(self, redact_text: TextRedactor, argv: ArgvScanner, depth: int) -> None:
        self.redact_text = redact_text
        self.argv = argv
        self.depth = depth
        self.found: list[str] = []

    def walk(self, node: Any, secret: bool = False) -> Any:
        if isinstance(node, str):
            if secret:
                # a placeholder stays, as in text: {"password": "${DB_PASSWORD}"}
                if node and not node.startswith(REDACTED) and not code.is_placeholder(node):
                    self.found.append("secret_value")
                    return REDACTED
                return node
            text, kinds = self.redact_text(node, self.depth + 1)
            self.found.extend(kinds)
            return text
        if isinstance(node, bool) or node is None:
            return node
        if isinstance(node, int | float):
            if secret:
                self.found.append("secret_value")
                return REDACTED
            return node
        if isinstance(node, dict):
            pair = None if secret else _pair_value_key(node)
            manifest = not secret and _manifest(node)
            out: dict[Any, Any] = {}
            for key, value in node.items():
                under = (
                    secret
                    or key == pair
                    or (manifest and key in _MANIFEST_KEYS and isinstance(value, dict))
                    or (isinstance(key, str) and secret_key(key, value))
                )
                if isinstance(key, str):
                    key, kinds = self.redact_text(key, self.depth + 1)
                    self.found.extend(kinds)
                out[key] = self.walk(value, under)
            return out
        if isinstance(node, list):
            items = [self.walk(item, secret) for item in node]
            if not secret and len(items) > 1 and all(isinstance(i, str) for i in items):
                items = self._argv(items)
            return items
        return node  # pragma: no cover - json.loads makes nothing else

    def _argv(self, items: list[str]) -> list[str]:
        """An argv list (``["mysql", "-uroot", "-pS3cret"]``) read as one command line."""
        joined = " ".join(items)
        spans = self.argv(joined)
        if not spans:
            return items
        out = []
        position = 0
        for item in items:
            start, end = position, position + len(item)
            cuts = [
                (max(a, start) - start, min(b, end) - start)
                for a, b, _ in spans
                if a < end and b > start
            ]
            for a, b in sorted(cuts, reverse=True):
                item = item[:a] + REDACTED + item[b:]
            out.append(item)
            position = end + 1
        self.found.extend(kind for _, _, kind in spans)
        return out
