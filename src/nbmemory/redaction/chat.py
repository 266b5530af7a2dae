"""Secrets as chat gives them without "<name> is <value>": access codes right after
their name, a Wi-Fi network's key, a password named after a question or after
the value, and a token named a few words before it.

* An access code is digits right after a name that only an access code has
  ("PIN 4921", "phone passcode 482910", "gate code 4412#", "verification code
  552913", "safe combination is 12-34-56", "your code: 881204 (expires in 10
  minutes)").  "code" alone is everywhere in technical chat ("status code 404",
  "exit code 1", "error code 500"): only these names, and 4 digits or more, are
  taken ("PIN diode", "pin 13" stay).
* A Wi-Fi network's key: "WPA key: …", "WiFi key: …", "SSID: Cafe / Key: …".
* Google's app passwords, four groups of four letters: "gmail app password abcd
  efgh ijkl mnop".
* "the password? it's Kangaroo#71", "password for the db? Qwe!rty987", "pass for
  the router: R0uter#Pw", "I changed it to Summer2024#, the password I mean", "set
  it to … as the password", "N4s-St0rage! is the password for the NAS", "mi clave
  es Clave2024!", "usuário admin, senha Adm1n#BR", "пароль: …", "パスワードは …":
  the value
  must look like a credential (a digit, a symbol or mixed case), as the names are
  ambiguous ("Need a password? It's free", "la clave del problema es …").
* A token named a few words before it, when it looks random (16+ characters
  mixing letters and digits): "the API key you gave me (a7f3c9e1b5d24f8e)", "store
  the token somewhere safe: 0f1e…".
"""

from __future__ import annotations

import re

from . import code, prose
from .rule import Rule, Span

_VALUE = prose.VALUE

# -- access codes ----------------------------------------------------------------------------
_CODE_NAME = (
    r"pin(?:[ -]?(?:code|number))?|passcode|otp"
    r"|(?:door|gate|alarm|access|security|entry|lock|safe|garage|unlock|keypad|building)[ _-]code"
    r"|(?:verification|2fa|mfa|sms|login|auth|authentication|one[ -]time)[ _-]code"
)
#: "PIN 4921", "gate code 4412#": the digits right after the name (4 to 12, not a
#: date, a time, a decimal or a range: "pin 2024-01-01" stays).
_CODE_BARE = (
    rf"(?i)(?<![\w-])(?:{_CODE_NAME}) (?P<secret>\d{{4,12}})(?=[#*]?(?![\w.,:/-]?\d)(?![\w-]))"
)
#: "safe combination is 12-34-56", "the combination for the lock: 4-19-33".
_COMBINATION = (
    r"(?i)(?<![\w-])(?:(?:safe|lock|locker|padlock|vault)[ _-]combination"
    r"|combination[ \t]+(?:to|for|of)[ \t]+(?:the|my|our|your)[ \t]+(?:safe|lock|locker|padlock|vault))"
    r"(?:[ \t]+(?:is|was)(?:[ \t]*:)?|[ \t]*[:=])[ \t]*"
    r"(?P<secret>\d{1,3}(?:[ -]\d{1,3}){2,5}|\d{3,8})(?![\w-]|[.,]\d)"
)
#: "your code: 881204 (expires in 10 minutes)": a code that expires is a one-time code.
_EXPIRING = (
    r"(?i)(?<![\w-])code(?::|[ \t]+is)[ \t]*(?P<secret>\d{4,10})[ \t]*[(,.;:–-]?[ \t]*"
    r"(?:it[ \t]+)?(?:expires|expiring|valid[ \t]+for|valid[ \t]+until)"
)

# -- Wi-Fi ---------------------------------------------------------------------------------------
#: "WPA key: …", "WiFi key: …", "wireless passphrase is …", "SSID: Cafe / Key: …".
_WIFI = (
    r"(?i)(?<![\w-])(?:(?:wpa[23]?|wi-?fi|wlan|wireless)(?:[ _-]?(?:network|guest))?"
    r"[ _-]?(?:key|psk|passphrase|code)"
    r"|ssid[ \t]*[:=]?[ \t]*[^\s/,;|]+[ \t]*[/,;|]?[ \t]*(?:key|pass(?:word)?|pw|psk|passphrase))"
    r"(?P<verb>[ \t]*[:=]|[ \t]+is)[ \t]*"
    rf"{_VALUE}"
)

# -- a password named around its value ------------------------------------------------------------
#: "the password? it's Kangaroo#71", "password for the db? it is P0stgres#Rocks.",
#: "and the password? Zebra!Stripe7" (a question and its answer)
_QUESTION = (
    r"(?i)(?<![\w-])(?P<name>pass(?:word|code|phrase)|pin|pwd?)"
    r"(?:[ \t]+(?:for|of|to|on)(?:[ \t]+[^\s?]+){1,3}?)?\?[ \t]+"
    r"(?:(?:it['’]s|it[ \t]+is|that['’]s|that[ \t]+is)[ \t]+)?"
    rf"{_VALUE}"
)
#: "N4s-St0rage! is the password for the NAS", "It's R0uter!Adm — that's the
#: password for the router": the value first (and the name last, or before what it
#: is for: "Argon2id is the password hashing …" names no password)
_VALUE_FIRST = (
    r"""(?im)(?<![\w-])(?P<bare>[^\s"'`]{6,200}?)[.,]?[ \t]+(?:[–—-][ \t]+)?"""
    r"(?:is|was|that['’]s|that[ \t]+is)[ \t]+(?:the|my|our|your)[ \t]+(?:new[ \t]+)?"
    r"(?:[\w-]+[ \t]+)?(?P<name>pass(?:word|code|phrase))"
    r"(?=[ \t]+(?:for|of|on|at|to)[ \t]|[ \t]*(?:[.,;:!?)]|$))"
)
_VALUE_FIRST_NEEDLE = (
    r"(?:is|was|that['’]s)[ \t]+(?:the|my|our|your)[ \t]+(?:new[ \t]+)?(?:[\w-]+[ \t]+)?pass"
)
#: "usuário admin, senha Adm1n#BR", "contraseña RootEs!22", "пароль: Parol!2024",
#: "パスワードは Nihon#Pass8 です": the name right before the value, no verb
_NAMED_BEFORE = (
    r"(?i)(?<![\w-])(?P<name>senha|contrase(?:ñ|n)a|пароль|パスワード)"
    r"(?:[ \t]*[:：=]|[ \t]*(?:は|が|:))?[ \t]*"
    rf"{_VALUE}"
)
#: "gmail app password abcd efgh ijkl mnop": Google's app passwords, four groups of four
_APP_PASSWORD = (
    r"(?i)(?<![\w-])app[ _-]?passwords?(?:[ \t]+(?:is|was))?[ \t]*:?[ \t]*"
    r"(?P<secret>(?-i:[a-z]{4}(?: [a-z]{4}){3}|[a-z]{16}))(?![\w-])"
)
#: "pass for the router: R0uter#Pw" ("pass" alone opens a password only before ":")
_PASS_FOR = rf"(?i)(?<![\w-])pass[ \t]+for(?:[ \t]+[^\s:]+){{1,3}}?[ \t]*:[ \t]*{_VALUE}"
#: "I changed it to Summer2024#, the password I mean"
_NAMED_AFTER = (
    r"(?i)(?<![\w-])(?:changed|set|reset|updated)[ \t]+it[ \t]+to[ \t]+"
    r"""(?P<bare>[^\s"'`,]{3,200}?)[.!]?,?[ \t]+(?:i[ \t]+mean[ \t]+|as[ \t]+)?(?:the|my|our)[ \t]+"""
    r"(?:new[ \t]+)?(?P<name>pass(?:word|code|phrase)|pin)(?![\w-])"
)
#: "mi clave es Clave2024!", "la clave del wifi es …" (not "la clave del problema es …")
_CLAVE = (
    r"(?i)(?<![\w-])(?:(?:mi|tu|su|nuestra)[ \t]+clave"
    r"|(?:la[ \t]+)?clave[ \t]+(?:del|de[ \t]+la|de)[ \t]+(?:wi-?fi|red|router|correo|banco"
    r"|cuenta|servidor|tarjeta))"
    r"(?:[ \t]+(?:nueva|actual))?[ \t]+(?:es|era|fue)(?:[ \t]*:)?[ \t]+"
    rf"{_VALUE}"
)

# -- a token a few words after its name ------------------------------------------------------------
_TOKEN_NAME = r"api[ _-]?key|access[ _-]?key|token|secret|password|passphrase"
#: "the API key you gave me (a7f3…)": the words between say who gave or made it.
_GIVEN_IN_PARENS = (
    rf"(?i)(?<![\w-])(?:{_TOKEN_NAME})(?:[ \t]+(?:you|i|we|they|he|she|gave|given|give|sent|shared"
    r"|provided|generated|created|made|got|me|us|him|her|them|earlier|just|yesterday|before))"
    r"{0,5}[ \t]*\((?P<secret>[A-Za-z0-9_+/=-]{16,200})\)"
)
#: "store the token somewhere safe: 0f1e…", "copy your new API key now: …"
_STORE = (
    r"(?i)(?<![\w-])(?:store|save|keep|copy|note|write[ \t]+down)[ \t]+(?:[\w'’-]+[ \t]+){0,3}?"
    rf"(?:{_TOKEN_NAME})(?:[ \t]+[\w'’-]+){{0,4}}?[ \t]*:[ \t]*"
    r"(?P<secret>[A-Za-z0-9_+/=-]{16,200})(?![^\s.,;!?)])"
)


def _credential(match: re.Match[str]) -> Span | None:
    """The value, when it looks like a credential (a PIN's when the name is a PIN)."""
    start, end, quoted = prose.value_span(match)
    value = match.string[start:end]
    name = match.groupdict().get("name")
    kind = prose.PIN if name and name.lower() == "pin" else prose.STRONG
    if kind == prose.STRONG and (len(value) < 6 or value.lower() in prose.OTHER_DESCRIBING):
        return None
    return (start, end) if prose.looks_secret(value, kind, quoted=quoted, code=True) else None


def _wifi_span(match: re.Match[str]) -> Span | None:
    start, end, quoted = prose.value_span(match)
    if (
        not quoted
        and match.group("verb").strip() in (":", "=")
        and code.is_code(match.string, start, end)
    ):
        return None  # wifi_key = get_key()
    value = match.string[start:end]
    return (start, end) if prose.looks_secret(value, prose.WEAK, quoted=quoted, code=True) else None


def _random_span(match: re.Match[str]) -> Span | None:
    """A token that looks random: letters and digits, three of each at least."""
    value = match.group("secret")
    digits = sum(c.isdigit() for c in value)
    letters = sum(c.isalpha() for c in value)
    return match.span("secret") if digits >= 3 and letters >= 3 else None


CHAT_RULES: tuple[Rule, ...] = (
    Rule("access_code", _CODE_BARE, ("pin ", "code ", "otp ")),
    Rule("access_code", _COMBINATION, ("combination",)),
    Rule("access_code", _EXPIRING, ("expir", "valid for", "valid until")),
    Rule("wifi_password", _WIFI, ("wpa", "wifi", "wi-fi", "wlan", "wireless", "ssid"), _wifi_span),
    Rule(
        "secret_prose",
        _QUESTION,
        r"(?:word|code|phrase|pin|pwd?)(?:[ \t][^?\n]{0,60})?\?",
        _credential,
    ),
    Rule("secret_prose", _VALUE_FIRST, _VALUE_FIRST_NEEDLE, _credential),
    Rule("secret_prose", _NAMED_BEFORE, ("senha", "contrase", "пароль", "パスワード"), _credential),
    Rule(
        "secret_prose",
        _APP_PASSWORD,
        ("app password", "app-password", "app_password", "apppassword"),
    ),
    Rule("secret_prose", _PASS_FOR, ("pass for",), _credential),
    Rule("secret_prose", _NAMED_AFTER, ("d it to", "set it to"), _credential),
    Rule("secret_prose", _CLAVE, ("clave",), _credential),
    # (the bracket and the token's start: rarer than the names)
    Rule("secret_prose", _GIVEN_IN_PARENS, r"\([a-z0-9_+/=-]{16}", _random_span),
    Rule("secret_prose", _STORE, ("store", "save", "keep", "copy", "note", "write"), _random_span),
)
