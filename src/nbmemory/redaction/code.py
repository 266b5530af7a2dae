"""Values that are code, not secrets: what follows ``password =`` in a program.

An agent's memory holds much code, and code names its secrets far more often than
it holds them: ``password = getpass()``, ``token: str``, ``login(password=password)``,
``api_key = os.environ["API_KEY"]``, ``secret: ${{ secrets.DEPLOY }}``.  Redacting
those garbles the code (``api_key = [REDACTED]"API_KEY"]``) and hides nothing.  A
bare value after a secret's name is code when it is a call, an index or an
attribute of an object, a type or a literal such as ``None``, a keyword, a variable
that itself names a secret, or a template's placeholder; a value of any other shape
is still the secret (``DB_PASSWORD=hunter2``, ``token: ab12cd34``,
``PASSWORD=password``).  Measured on 59,570 paragraphs of Python's standard library
and the packages this project installs (docs/reliability.md).
"""

from __future__ import annotations

import re

#: Types and literals, as Python, TypeScript, Go, Rust, Java and YAML write them
#: (and MySQL's "Access denied … (using password: YES)", which says whether one was given).
_TYPES_AND_LITERALS = frozenset(
    [
        "str",
        "bytes",
        "bytearray",
        "int",
        "bool",
        "float",
        "none",
        "null",
        "nil",
        "undefined",
        "true",
        "false",
        "yes",
        "no",
        "any",
        "string",
        "number",
        "boolean",
        "object",
        "optional",
        "union",
        "secretstr",
        "secretbytes",
        "char",
        "void",
        "unknown",
        "never",
        "pathlike",
        "path",
        "uuid",
        "dict",
        "list",
        "tuple",
        "set",
        "mapping",
        "sequence",
        "callable",
        "self",
        "cls",
    ]
)
#: Words that start an expression or a statement, never a password.
_KEYWORDS = frozenset(
    [
        "raise",
        "return",
        "continue",
        "break",
        "lambda",
        "await",
        "yield",
        "del",
        "assert",
        "import",
        "not",
        "new",
        "typeof",
        "function",
        "async",
    ]
)
#: A call or an index (``getpass()``, ``os.environ[``, ``Optional[str]``,
#: ``self._get_param(``), after any chain of attributes (JavaScript's optional
#: chaining too: ``req.headers.authorization?.split(``).
_CALL = re.compile(r"[A-Za-z_](?:[\w.]|::|\?\.)*[(\[]")
#: One part of an attribute chain as programs name things: snake_case, UPPER_CASE,
#: camelCase or PascalCase words (a password such as ``Xk9.Pq2z`` is none of these).
_PART = r"(?:_*[a-z][a-z0-9_]*(?:[A-Z][a-z0-9_]*)*|_*[A-Z][A-Z0-9_]*|(?:[A-Z][a-z0-9]+)+)"
_ATTRIBUTE = re.compile(rf"{_PART}(?:\.{_PART})+")
#: A template's or a shell's placeholder: ``${DB_PASS}``, ``$DB_PASS``, ``{{ x }}``,
#: ``${{ secrets.X }}``, ``<your-password>``, ``%s``, ``{token}``, ``****``, a
#: command's output (``$(cat /run/secrets/db)``: the secret is in the file), what
#: a README asks to fill in (``your-api-key-here``, ``your_password``) and an elided
#: value (``...``, ``sk-...``, ``Password=...;``).
_PLACEHOLDER = re.compile(
    r"""\$\{|\$\(|\{\{|\$[A-Za-z_]\w*$|<[^<>]*>$|%\(?\w*\)?s$|\{[A-Za-z_][\w.\[\]:!]*\}"""
    r"""|[*•xX]{3,}$|(?:[a-z]{2,8}[-_]){0,2}(?:\.{3,}|…+);?$|(?i:your)[-_][\w-]*$"""
)
#: Objects whose attributes programs read secrets from.
_OBJECTS = frozenset(
    [
        "self",
        "this",
        "cls",
        "os",
        "env",
        "environ",
        "process",
        "settings",
        "config",
        "conf",
        "cfg",
        "args",
        "options",
        "opts",
        "request",
        "req",
        "response",
        "res",
        "resp",
        "ctx",
        "context",
        "app",
        "params",
        "kwargs",
        "secrets",
        "vars",
        "creds",
        "credentials",
        "auth",
        "client",
        "session",
        "user",
        "account",
        "data",
        "payload",
        "body",
        "headers",
    ]
)
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
#: What follows a variable in code: an argument's or an entry's end, a statement's
#: end, a condition's colon, an operator (``token = token or os.environ.get(…)``).
_AFTER_VARIABLE = re.compile(
    r"[ \t]*(?:[,)}\];:]|(?:or|and|if|else|is|in|not)[ \t]|\|\||&&|\?\?|[=!]=)"
)
#: A YAML tag before a value (``password: !vault |``, ``password: !secret wifi_pw``,
#: CloudFormation's ``!Ref DbPassword``): the value is elsewhere, named or encrypted.
_YAML_TAG = re.compile(
    r"!(?:vault|secret|env|env_var|include|ref|sub|getatt|importvalue|join|select|findinmap"
    r"|base64|if|split|cidr|encrypted)(?![\w-])",
    re.IGNORECASE,
)
#: A file's path: ``/run/secrets/db``, ``~/.aws/credentials``, ``./keys/app.pem``,
#: ``./pw.txt`` (``kubectl … --from-file=password=./pw.txt``).
_PATH = re.compile(r"(?:~|\.{1,2})/|/[\w.-]+/")
#: A value up to the punctuation that ends it in code.
_HEAD = re.compile(r"[^,;:)\]}=|]*")
#: An environment variable's name: UPPER_CASE with an underscore.
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
#: A type's name: PascalCase or UPPER_CASE, maybe private (``TokenOpt``, ``_FORMAT_TYPE``).
_TYPE_NAME = re.compile(r"_*(?:[A-Z][a-z0-9]+)+[A-Z]?|_*[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
#: What follows a type in an annotation: a default, a union, an argument's end.
_AFTER_TYPE = re.compile(r"[ \t]*(?:=[ \t]*[^\s=]|\||[,)\]])")


def is_placeholder(value: str) -> bool:
    """Whether ``value`` (quoted or not) is a template's or a shell's placeholder."""
    return _PLACEHOLDER.match(value) is not None


#: ``fetch(url, {credentials: "include"})``: the Fetch API's values, not secrets.
_FETCH_CREDENTIALS = frozenset(["include", "same-origin", "omit"])


def names_key(value: str, key: str, secret_name: re.Pattern[str]) -> bool:
    """Whether a quoted value is a name, not a secret: the key's own name or its end
    (``LAST_TOKEN = "LAST_TOKEN"``, ``X_ACCESS_TOKEN = "X-Access-Token"``), or an
    environment variable's name (``ACCESS_KEY = "AWS_ACCESS_KEY_ID"``)."""
    if value in _FETCH_CREDENTIALS and key.lower() == "credentials":
        return True
    folded = value.lower().replace("-", "_")
    if len(folded) >= 4 and key.lower().replace("-", "_").endswith(folded):
        return True
    return _ENV_NAME.fullmatch(value) is not None and secret_name.search(value) is not None


def is_code(
    text: str,
    start: int,
    end: int,
    secret_name: re.Pattern[str] | None = None,
    *,
    key: str = "",
    annotation: bool = False,
    attribute: bool = False,
    argument: bool = False,
) -> bool:
    """Whether the bare value ``text[start:end]`` after a secret's name is code.

    ``secret_name`` matches a name that says its value is a secret; ``annotation``
    says the value followed ``name:`` (it may be a type: ``token: TokenOpt = None``),
    ``attribute`` that the name is an object's (``self.token = token``), ``argument``
    that it is a keyword argument's (``f(token=token``).
    """
    raw = text[start:end]
    if raw[:1] in ("{", "[", "(", ")", "]", "}", ","):
        return True  # a literal ({}, [...], (...)), or the end of an argument list
    if _YAML_TAG.match(raw):
        return True  # password: !vault |
    if is_placeholder(raw) or _CALL.match(raw) or _PATH.match(raw):
        return True  # ${DB_PASS}, getpass(), ~/.aws/credentials
    # the value without what ends it in code: token, / None) / token)["name"]
    value = _HEAD.match(raw).group()  # type: ignore[union-attr]
    if not value:
        return False
    if value.lower() in _TYPES_AND_LITERALS or value in _KEYWORDS:
        return True
    if _ATTRIBUTE.fullmatch(value):
        # an object's attribute (``self.token``, ``settings.DB_PASSWORD``,
        # ``req.headers.authorization;``), not a dotted token (``abc.def.ghi``)
        parts = value.split(".")
        return (
            parts[0] in _OBJECTS
            or any("_" in part or part.isupper() or not part.islower() for part in parts)
            or value != raw
        )
    if value.isdigit() and len(value) <= 3:
        return True  # ProcessAccessToken = 9: a constant (a PIN has 4 digits or more)
    if not _IDENTIFIER.fullmatch(value):
        return False
    if attribute or len(value) <= 2 and (value == raw or raw[len(value)] in ",;:)]}|"):
        return True  # t.lastToken=r, (minified), self.token = token (not "pw: A=0")
    if argument and ("_" in value or not value.islower() and not value.isupper()):
        return True  # f(nextToken=token_for_next_page): a variable
    if argument and value == key:
        return True  # f(a, token=token): the variable of the argument's name
    if annotation and _TYPE_NAME.fullmatch(value) and _AFTER_TYPE.match(text, start + len(value)):
        return True  # token: TokenOpt = None, password: _PasswordType | None
    if secret_name is not None and secret_name.fullmatch(value):
        # a variable that names a secret: an argument, an entry or a statement
        # (``login(password=password)``), or a longer name (``hashed_password``);
        # ``PASSWORD=password`` at the end of a line is the password itself
        lowered = value.lower()
        if lowered not in ("password", "passwd", "passphrase", "secret", "token", "pass"):
            return True
        return _AFTER_VARIABLE.match(text, start + len(value)) is not None
    return False
