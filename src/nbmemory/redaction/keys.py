"""``key: value`` in every notation: which names say their value is a secret, and
which part of what follows is the secret (a quoted string, a bare word, a passphrase),
or that it is none (code such as ``password = getpass()``, a placeholder, a name).

:data:`SECRET_NAME` is the pattern of such names; :data:`KEY_VALUE` the rule's regex
and :func:`key_value_span` its span function (the rule itself is in :mod:`.rules`).
"""

from __future__ import annotations

import json
import re

from . import code, prose
from .rule import Span

# -- names that say their value is secret ------------------------------------------------
#: "Password" in the languages people also write to an agent in: Portuguese, Spanish,
#: French, German, Dutch (Italian writes "password").  ``clave`` is left out: it is
#: also Spanish for any key ("la clave del problema").
OTHER_PASSWORD = (
    r"senha|palavra[ _-]passe|contrase(?:ñ|n)a|mot[ _-]de[ _-]passe|passwort|kennwort|wachtwoord"
)
#: As the last word of a key: password, db_password, "aws_secret_access_key",
#: X-Api-Key, client_secret, auth_token, PGPASSWORD, MYSQL_PWD, SMTP_PASS, dbPassword,
#: apiKey ... (but not max_tokens, maxTokens, password_hint, token_count or passport).
SECRET_NAME = (
    r"(?:(?:[A-Za-z0-9]+[_.-])*"
    r"(?:pass(?:word|wd|phrase|code)|secret(?:[_-]?(?:access[_-]?)?key)?|credentials?|creds"
    r"|(?:api|access|private|client|signing|encryption|account|master|app|consumer|auth"
    r"|shared[_-]?access)[_-]?(?:key|secret)|apikey|private[_-]?key[_-]?id"
    r"|(?:auth|access|refresh|session|bearer|api|id|oauth)?[_-]?token"
    # camelCase, as JavaScript, Java, .NET and JSON name it: dbPassword, DbPassword,
    # keyStorePassword, clientSecret, authToken, apiKey, secretAccessKey
    r"|(?-i:[A-Za-z][a-z0-9]*(?:[A-Z][a-z0-9]*)*?(?:Pass(?:word|wd|phrase|code)|Secret|Token"
    r"|Credentials?|(?:Api|Access|Private|Client|Signing|Encryption|Account|Master|Secret)Key)"
    r"|(?:api|access|private|secret|client|signing|encryption|master)Key(?:Id)?))"
    r"|(?:[A-Za-z0-9]+[_.-])+(?:pass|pwd|pw)"
    r"|pgpassword|mysql_pwd|rediscli_auth|sshpass"
    # the word for a password in Portuguese, Spanish, French, German and Dutch
    rf"|{OTHER_PASSWORD})"
)
SECRET_KEY = re.compile(rf"(?i){SECRET_NAME}")
#: A variable whose name says it holds a secret (``hashed_password``, ``authToken``).
VARIABLE_NAME = re.compile(rf"(?i)(?:[a-z0-9_]*[_a-z])?{SECRET_NAME}")
_KEY_WORDS = r"(?:api|access|private|client|signing|encryption|account|master|app|consumer|secret)"
SECRET_NAME_NEEDLE = (
    rf"""(?:pass|password|passwd|passphrase|passcode|pwd|pw|pin|secret|credential|credentials|creds|{_KEY_WORDS}[_.\s-]?key|access[_-]?key"""
    r"""|key_id|key-id|token|auth|senha|contrase(?:ñ|n)a|passe|wort|wachtwoord)\\*["']?\s*[:=]"""
)
KEY_VALUE = (
    # (an .npmrc writes _authToken= and _auth=, the latter base64 of user:password)
    # (not a word after a colon: ``arn:aws:secretsmanager:…:secret:prod/db`` names a
    # secret; an .npmrc's ``//host/:_authToken=`` and PowerShell's ``$env:API_KEY=`` are)
    rf"(?i)(?<![A-Za-z0-9_])(?!(?<=:)(?<!\$env:)[A-Za-z])"
    # a word (or three: "mot de passe") followed by its separator, before the names are
    # tried at it: most words of a text are followed by a space, and fail here at once
    r"""(?=[\w.-]{2,100}(?: [\w.-]{1,20}){0,2}\\*["']?[ \t]*[:=!])"""
    rf"_*(?P<key>{SECRET_NAME}|(?<=_)auth)(?![A-Za-z0-9_])"
    # the key's closing quote, escaped at any depth (``\"password\": \"x\"``)
    r"""(?P<key_quote>\\*["'])?"""
    # ``=>`` only after a space (``key => v``); ``key=>v`` is ``=`` then the value ``>v``
    # (``password == "x"`` compares with a literal: that literal is the secret too)
    r"(?:[ \t]+=>|[ \t]*:=|(?P<compare>[ \t]*[!=]==?)|[ \t]*:|=|[ \t]+=(?!>))[ \t]*"
    # (a shell's line continued: ``AWS_SECRET_ACCESS_KEY=\`` then the value)
    r"(?:\\\r?\n[ \t]*)?"
    # a string's prefix (``b"…"``, ``f"…"``, ``r'…'``) before its quote
    r"""(?:[bBrRuUfF]{1,2}(?=\\*["']))?"""
    r"""(?:(?P<value_quote>\\*["'])|(?=[^\s"'\\]))"""
)
#: How a bare value ends: at white space, a quote, an escape (``\"``, ``\n``), before
#: the next field of a connection or query string (``;Database=``, ``&ssl=``) and,
#: after a quoted key (JSON-like text), at ``,`` ``}`` ``]``.
_BARE = re.compile(r"""(?:[^\s"'\\]|\\(?![\\"'nrtu/]))+""")
#: After ``=``, a bare value also ends where the next field of a connection or query
#: string starts (``password=x&ssl=true``); after ``:`` "Tr0ub&dor=3" is one password.
_BARE_FIELD = re.compile(rf"""(?:(?!{prose.NEXT_FIELD.pattern})(?:[^\s"'\\]|\\(?![\\"'nrtu/])))+""")
_BARE_IN_JSON = re.compile(r"""(?:[^\s"'\\,}\]]|\\(?![\\"'nrtu/]))+""")


def closing_quote(text: str, start: int, quote: str, depth: int) -> int | None:
    """Where a string value that starts at ``start`` ends: the position of its
    closing quote (with the backslashes that escape it at ``depth``), or None.

    At depth ``n`` (``n`` backslashes before the opening quote: 0, 1, 3, 7 ...) the
    closing quote follows a run of backslashes whose length is ``n`` modulo
    ``2(n+1)``: escaped quotes and backslashes inside the value have other lengths.
    """
    index = start
    period = 2 * (depth + 1)
    while index < len(text):
        char = text[index]
        if char == "\n":
            return None
        if char == "\\":
            run = index
            while run < len(text) and text[run] == "\\":
                run += 1
            if run < len(text) and text[run] == quote and (run - index) % period == depth:
                return index
            index = run + 1
            continue
        if char == quote:
            return index
        index += 1
    return None


def key_value_span(match: re.Match[str]) -> Span | None:
    text = match.string
    start = match.end()
    if text.endswith("://", 0, match.start()):
        return None  # https://x-access-token:ghs_…@github.com: the URL's rule keeps the host
    opening = match.group("value_quote")
    if opening is not None:
        end = closing_quote(text, start, opening[-1], len(opening) - 1)
        if end is None:  # never closed: to the end of the line
            newline = text.find("\n", start)
            end = len(text) if newline < 0 else newline
        value = text[start:end]
        if (
            end <= start
            or code.is_placeholder(value)
            or code.names_key(value, match.group("key"), VARIABLE_NAME)
        ):
            return None  # "{{ vault_db_password }}", "${DB_PASSWORD}", LAST_TOKEN = "LAST_TOKEN"
        if not match.group("key_quote") and value[0] in ")],;+ \t":
            return None  # getpass("Password: "): the quote closes the prompt's string
        if len(value) < 3 or _METHOD_AFTER.match(text, end + len(opening)):
            return None  # token = b"|".join(parts): a separator, a format string
        if match.group("compare") and not prose.looks_secret(value, prose.STRONG, quoted=False):
            return None  # token == "async": a lexer, not a password
        if _names_its_secrets(value):
            return None  # GOOGLE_CREDENTIALS='{"private_key": …}': its keys' rules take them
        return start, end
    if text.startswith("{", start) and text.endswith(";", 0, match.start()):
        return braced_field(text, start)  # ODBC: ;Pwd={Br4ced;Pw};
    if match.group("key_quote"):
        bare = _BARE_IN_JSON.match(text, start)
    else:
        bare = (_BARE_FIELD if match.group(0).rstrip().endswith("=") else _BARE).match(text, start)
    if bare is None:
        return None
    key = match.group(0).rstrip()
    colon = not match.group("key_quote") and key.endswith(":")
    field = _FIELD.match(text, start, bare.end()) if colon else None
    if field is not None:
        return field.end(), bare.end()  # "Credentials: key=AKIA… secret=…": the field's value
    if code.is_code(
        text,
        start,
        bare.end(),
        VARIABLE_NAME,
        key=match.group("key"),
        annotation=colon,
        # self.token = token, this.password = value (not spring.datasource.password=x)
        attribute=text[max(0, match.start() - 1) : match.start()] == "."
        or match.group("key").startswith(("self.", "this.", "cls.")),
        argument=_ARGUMENT_BEFORE.search(text, max(0, match.start() - 3), match.start())
        is not None,
    ):
        return None  # password = getpass(), token: str, login(password=password)
    if colon and _PASSWORD_KEY.search(key):
        # "passphrase: correct horse battery staple" (YAML reads the whole line too;
        # after "=" a value is one word, as a shell or an env file reads it)
        other = _OTHER_KEY.search(key) is not None  # "senha: a mesma de antes" reads Portuguese
        kind = prose.OTHER if other else prose.WEAK
        first = text[start : bare.end()]
        secret = prose.looks_secret(first, kind, quoted=False, code=True)
        return with_phrase(text, start, bare.end(), kind, secret=secret, quoted=False)
    if colon and not prose.looks_secret(text[start : bare.end()], prose.WEAK, quoted=False):
        return None  # ":param token: The token to use", "token: see above"
    return start, bare.end()


def _names_its_secrets(value: str) -> bool:
    """Whether a quoted value is a JSON object that names its secrets (a service
    account's file in ``GOOGLE_CREDENTIALS='{…}'``): then the rules find them inside
    (``"private_key": …``, ``"client_secret": …``) and its other fields stay (the
    project, the account's e-mail); a JSON value naming none is the secret whole."""
    if not value.startswith("{") or not value.endswith("}"):
        return False
    try:
        document = json.loads(value)
    except (ValueError, RecursionError):
        return False
    return isinstance(document, dict) and any(
        isinstance(key, str) and SECRET_KEY.fullmatch(key) is not None for key in document
    )


#: A field's name at the start of a value after ``:`` ("Credentials: key=AKIA…
#: secret=…" lists fields): only the field's value is the secret, not its name.
_FIELD = re.compile(
    r"(?i)(?:key|id|user(?:name)?|secret|token|pass(?:word)?|access[_-]?key(?:[_-]?id)?"
    r"|secret[_-]?(?:access[_-]?)?key)=(?=[^\s=])"
)
#: An ODBC connection string's braced value: any characters, ``}}`` for a brace.
#: (200 characters at most: a text of unclosed braces is not searched to its end each time)
_BRACED = re.compile(r"\{(?P<inner>(?:[^}\n]|\}\}){0,200})\}(?=;|\s|$|[\"'])")


def braced_field(text: str, start: int) -> Span | None:
    """A connection string's field value in braces (``Pwd={Br4ced;Pw}``: the braces
    let it hold ``;``), the inside of the braces; a placeholder (``{password}``) is none."""
    braced = _BRACED.match(text, start)
    if braced is None or code.is_placeholder(braced.group(0)):
        return None
    if not braced.group("inner").strip("0123456789"):
        return None  # Password={0}: a format string's field
    return braced.span("inner")


#: A method called on the string: ``"|".join(…)``, ``"{}:{}".format(…)``.
_METHOD_AFTER = re.compile(r"\.[A-Za-z_]\w*\(")
#: A keyword argument's start: ``f(token=token)``, ``g(a, password=password``.
_ARGUMENT_BEFORE = re.compile(r"[(,][ \t]*\Z")
#: A key that names a password, whose bare value may be a phrase of plain words.
_PASSWORD_KEY = re.compile(rf"(?i)pass(?:word|wd|phrase|code)?\b|pwd?\b|{OTHER_PASSWORD}")
_OTHER_KEY = re.compile(rf"(?i){OTHER_PASSWORD}")


def with_phrase(
    text: str, start: int, end: int, kind: str, *, secret: bool, quoted: bool
) -> Span | None:
    """The value, or the passphrase it starts ("correct horse battery staple"), for a
    password's names (:func:`prose.phrase_end`); None when neither is a secret."""
    if not quoted and kind in (prose.WEAK, prose.OTHER) and text[start:end].isalpha():
        longer = prose.phrase_end(text, end, first_secret=secret, kind=kind)
        if longer is not None:
            return start, longer
    return (start, end) if secret else None


# -- the same names in markup, calls and SQL ---------------------------------------------------
#: ``<password>x</password>`` (Maven's settings.xml, Spring, .NET, plists' keys aside)
#: and ``<add key="DbPassword" value="x"/>``, ``<property name="token" value="x"/>``.
MARKUP = (
    rf"(?i)<(?P<tag>{SECRET_NAME})(?:\s[^<>]*)?>(?P<secret>[^<>\n]{{1,500}})</(?P=tag)>"
    rf"""|(?:key|name)\s*=\s*["'](?:{SECRET_NAME})["']\s+value\s*=\s*"""
    r"""(?P<q>["'])(?P<secret_attr>[^"'\n]{1,500})(?P=q)"""
)
#: (an element's match holds its end tag, an attribute's match its "value")
MARKUP_NEEDLE = ("</", "value")
#: A secret set by name in code: ``os.environ["DB_PASSWORD"] = "x"``,
#: ``keyring.set_password("svc", "bob", "x")`` aside (the name is not the secret's),
#: ``app.config['SECRET_KEY'] = 'x'``, ``os.environ.setdefault("API_KEY", "x")``,
#: PHP's ``define('DB_PASSWORD', 'x')``.
ARGUMENT = (
    rf"""(?i)(?:\[\s*(?P<open>\\*["'])(?:{SECRET_NAME})(?P=open)\] ?=(?!=)"""
    r"|\b(?:setdefault|define|putenv|setenv|setItem|set)\(\s*"
    rf"""(?P<open2>\\*["'])(?:{SECRET_NAME})(?P=open2)\s*,)\s*"""
    r"""(?P<q>\\*["'])(?P<secret>[^"'\\\n]{1,500})(?P=q)"""
)
#: (a literal each match holds: the quote before the bracket, or the call's name)
ARGUMENT_NEEDLE = (
    "'] =",
    "']=",
    '"] =',
    '"]=',
    "setdefault(",
    "define(",
    "putenv(",
    "setenv(",
    "setitem(",
    "set(",
)
#: ``os.environ["STRIPE_KEY"] = "…"``: an environment variable named ``…_KEY`` set in
#: code holds a key when its value is a token (12+ characters, three digits and three
#: letters at least, no path: ``os.environ["SORT_KEY"] = "created_at"``,
#: ``os.environ["S3_KEY"] = "a/b.csv"`` and ``os.environ["PRIMARY_KEY"] = "user_id_2"`` stay).
ENV_KEY = (
    r"""(?:\[\s*(?P<open>\\*["'])(?:[A-Z][A-Z0-9]*_)+KEY(?P=open)\] ?=(?!=)"""
    r"|\b(?:setdefault|putenv|setenv)\(\s*"
    r"""(?P<open2>\\*["'])(?:[A-Z][A-Z0-9]*_)+KEY(?P=open2)\s*,)\s*"""
    r"""(?P<q>\\*["'])(?P<secret>[\w+=-]{12,500})(?P=q)"""
)


def env_key_span(match: re.Match[str]) -> Span | None:
    value = match.group("secret")
    if sum(c.isdigit() for c in value) < 3 or sum(c.isalpha() for c in value) < 3:
        return None
    return match.span("secret")


#: A user and a password given to a call: ``requests.get(url, auth=("u", "p"))``,
#: ``HTTPBasicAuth("u", "p")``, ``smtp.login("u", "p")``, ``keyring.set_password("svc",
#: "u", "p")``.
_Q = r"""\\*["']"""
CALL_PAIR = (
    r"(?:\bauth ?= ?\(|\b(?:HTTPBasicAuth|HTTPDigestAuth|BasicAuth|DigestAuth|\.login)\(|"
    rf"\bset_password\(\s*{_Q}[^\"'\n]*{_Q}\s*,)"
    rf"\s*{_Q}[^\"'\n]*{_Q}\s*,\s*(?P<q>{_Q})(?P<secret>[^\"'\\\n]{{1,200}})(?P=q)"
)
CALL_PAIR_NEEDLE = ("auth=(", "auth =(", "auth= (", "auth = (", "auth(", "login(", "set_password(")
#: SQL that sets a password: ``CREATE USER app WITH PASSWORD 'x'``, ``ALTER ROLE r
#: PASSWORD 'x'``, MySQL's ``IDENTIFIED BY 'x'``, ``SET PASSWORD = 'x'``,
#: ``mysqladmin password 'x'``.
SQL = (
    r"""(?i)(?:\bwith\s+(?:encrypted\s+)?password|\blogin\s+password"""
    r"""|\b(?:user|role)\b[^;\n]{0,80}?\bidentified\s+by"""
    r"""|\bset\s+password(?:\s+for\s+\S+)?\s*=|\brole\s+\S+\s+password|\bmysqladmin\b[^\n|;]*?"""
    r"""\spassword)(?: | ?= ?)(?:\\*(?P<q>["']))(?P<secret>[^"'\\\n]{1,200})(?P=q)"""
)
#: (each match holds "password" then its quote, or "identified by")
SQL_NEEDLE = tuple(
    f"password{between}{escape}{quote}"
    for between in (" ", "=", " =", "= ", " = ")
    for escape in ("", "\\")
    for quote in "'\""
) + ("identified by", "set password")


def quoted_value_span(match: re.Match[str]) -> Span | None:
    """The secret group of the markup, call and SQL rules (an element's text, an
    attribute's or an argument's value), unless a placeholder
    (``<password>${DB_PASSWORD}</password>``)."""
    group = "secret" if match.group("secret") is not None else "secret_attr"
    start, end = match.span(group)
    value = match.string[start:end].strip()
    return None if not value or code.is_placeholder(value) else (start, end)
