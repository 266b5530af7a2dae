"""The redaction rules: what a secret looks like, and the cheap needle each is found by.

Each :class:`Rule` is a regex, a *needle* (lowercase literals or a cheap regex
that the lowercased text of every match of the rule contains, so a text without
it is never searched with the rule) and,
where the regex alone cannot tell, a function that says which part of a match is
the secret, or that it is none (a failed checksum, a describing word, a command
whose ``-p`` is a port).  The rules see text at any depth of JSON escaping: a
quote may be ``"``, ``\\"`` or ``\\\\\\"``, a newline ``\\n`` or ``\\\\n``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from . import checksums, code, keys, prose, web
from .chat import CHAT_RULES
from .commands import CLI_RULES
from .formats import FORMAT_RULES
from .keys import SECRET_KEY
from .layouts import LAYOUT_RULES
from .logins import LOGIN_RULES
from .phrases import CARD_CODE as _CARD_CODE
from .phrases import PHRASE_RULES
from .rule import REDACTED, Rule, Span, secret_span
from .services import SERVICE_RULES

__all__ = ["REDACTED", "RULES", "SECRET_KEY", "Rule", "Span", "secret_span"]


def _checked(check: Callable[[str], bool]) -> Callable[[re.Match[str]], Span | None]:
    def span(match: re.Match[str]) -> Span | None:
        return secret_span(match) if check(match.group(0)) else None

    return span


# -- where a token may start and end ----------------------------------------------------
#: Not inside a longer word; a ``\n`` escape before the token counts as a boundary.
_START = r"(?:(?<=\\[nrt])|(?<![A-Za-z0-9_]))"
_END = r"(?![A-Za-z0-9_])"
_NOT_DONE = r"(?!\[REDACTED\])"

# -- private key blocks ------------------------------------------------------------------
_PEM_NAME = r"[ A-Z0-9_-]{0,60}?PRIVATE KEY(?: BLOCK)?-----"
#: A line break as pasted: real, or escaped at any depth of JSON (``\n``, ``\\n`` ...).
_NL = r"(?:\r?\n|\\+[rn])"
_PRIVATE_KEY = (
    rf"-----BEGIN{_PEM_NAME}"
    # the whole block up to its END line (within 20,000 characters: a PGP key with
    # subkeys is under 10k, and before the next BEGIN: each BEGIN line of a text
    # without END lines looks only that far, not 20k), whatever the newlines are ...
    rf"(?:(?:[^-]|-(?!----BEGIN)){{0,20000}}?-----END{_PEM_NAME}"
    # ... or, with no END line, the header lines and the base64 lines that follow
    rf"|(?:[ \t]*{_NL}[ \t]*[A-Za-z][A-Za-z0-9-]*: [^\r\n\\\"]*)*"
    rf"(?:(?:[ \t]*{_NL})+[ \t]*[A-Za-z0-9+/=]+|[ \t]+[A-Za-z0-9+/=]{{20,}})*)"
)

# -- secrets in prose ----------------------------------------------------------------------
#: "pass" alone is a password only after what it opens ("db pass: …", "root pass is
#: …"); a boarding pass, a test's PASS or a mountain pass are not.
_QUALIFIED_PASS = (
    r"(?:db|database|wi-?fi|admin|root|user|login|account|server|ssh|vpn|e-?mail|router"
    r"|sudo|ftp|sql|mysql|postgres|redis)[ _-]pass"
)
#: One-time codes: "the OTP is 552913", "2FA code: 118822" (digits, as a door code).
_ONE_TIME = r"otp|(?:verification|2fa|mfa|sms|login|auth|authentication|one[ -]time)[ _-]code"
_PROSE_NAME = (
    rf"pass(?:word|code|wd|[ _-]?phrase)|pword|{_QUALIFIED_PASS}|pwd?|pin(?:[ -]?(?:code|number))?"
    r"|secret(?:[ _-]key)?|(?:api|access|auth|bearer|session|refresh|bot)[ _-]?(?:token|key)"
    r"|token|(?:door|gate|alarm|access|security|entry|lock|safe|garage|unlock)[ _-]code"
    rf"|{_ONE_TIME}|{_CARD_CODE}"
)
_PROSE_VALUE = prose.VALUE
_PROSE_IS = (
    r"(?i)(?<![A-Za-z0-9_-])(?:"
    # the password (for the prod db) is / was / remains / 's / changed to ...
    rf"(?P<name>{_PROSE_NAME})"
    # (a word of the qualifier may hold dots inside: "for jdoe@corp.com")
    r"(?P<qual>\s+(?:for|of|to|on|at|as)(?:\s+[^\s.,;:!?](?:[^\s,;:!?]*[^\s.,;:!?])?){1,3}?"
    r"|[ \t]*\([^()\n]{1,40}\))?"
    # "was changed to" before "was": the value after "was" would be "changed"
    r"(?P<verb>\s+(?:(?:is|was|has\s+been|got)\s+)?(?:changed|set|updated|reset)\s+to(?![\w-])"
    r"|\s+(?:is|was|are|remains|will\s+be|should\s+be)(?![\w-])"
    # "'s" right after the name only ("password for bob's account: …" is no verb)
    r"|(?(qual)(?!)|['’]s(?![\w-]))|[ \t]*(?:-+>|→)|[ \t]+[–—-](?=[ \t])"
    # "password for prod: …", "password (staging): …"
    r"|(?(qual)[ \t]*:(?![:=/])|(?!)))"
    r"(?:\s+(?:now|still|just|simply|actually|currently|always))?"
    r"(?:[ \t]*:)?[ \t]*"
    # set / change (my wifi) password to ...
    r"|(?:set|change|changed|update|updated|reset)\s+(?:(?:the|my|our|your|his|her|their|its)\s+)?"
    rf"(?:[\w-]+\s+){{0,2}}?(?P<name2>{_PROSE_NAME})\s+to[ \t]+"
    r")"
    rf"{_PROSE_VALUE}"
)
#: "a senha é …", "la contraseña es …", "le mot de passe est …", "das Passwort ist …",
#: "het wachtwoord is …", "la password è …" (and "… agora/ahora/jetzt …", "… do wifi é …").
_PROSE_OTHER = (
    # (a PIN or a token after Portuguese's or Spanish's article: "o pin do cartão é …")
    rf"(?i)(?<![\w-])(?P<name>{keys.OTHER_PASSWORD}|password"
    r"|(?<=o )pin|(?<=o )token|(?<=el )pin|(?<=el )token)"
    # new or current: "a senha nova é …", "la nueva contraseña" reads as before
    r"(?:\s+(?:nova|novo|nueva|nuevo|atual|actual|nouveau|nouvelle|neue|neues|nieuwe)(?![\w-]))?"
    r"(?P<qual>\s+(?:do|da|de|del|du|des|für|fur|van|voor|dello|della|di)(?![\w-])"
    r"(?:\s+[^\s.,;:!?]+){1,3}?)?"
    r"(?:\s+(?:agora|ahora|maintenant|jetzt|nu|ora)(?![\w-]))?"
    r"(?P<verb>\s+(?:é|era|foi|es|fue|est|était|ist|war|is|was|è)(?![\w-])"
    # "contraseña del servidor: …"
    r"|(?(qual)[ \t]*:(?![:=/])|(?!)))"
    # a whole word: "the password is numbers" is not "nu" then "mbers"
    r"(?:\s+(?:agora|ainda|ahora|todavía|maintenant|toujours|jetzt|noch|nu|nog|ora|ancora)"
    r"(?![\w-]))?"
    r"(?:[ \t]*:)?[ \t]*"
    rf"{_PROSE_VALUE}"
)
_PROSE_OTHER_NEEDLE = (
    r"senha|palavra.passe|contrase|passe|passwort|kennwort|wachtwoord|password\s"
    r"|(?:pin|token)\s+(?:do|da|de|del|é|es)\s"
)
_PROSE_IS_NEEDLE = (
    r"(?:word|code|wd|phrase|pass|pw|pwd|pin|number|secret|token|key|otp|cvv2?|cvc2?|csc)"
    r"(?:['’]s|\s+(?:is|was|are|for|of|to|on|at|as|remains|will|should|has|got|changed|set"
    r"|updated|reset)(?![\w-])|\s*(?:-+>|→)|[ \t]+[–—-][ \t]|[ \t]*\()"
)
#: ``pw: x``, ``PIN=1234``, ``door code: 4411`` (the long names are the key-value rule's)
_SHORT_NAME = (
    rf"{_QUALIFIED_PASS}|pwd?|pin(?:[ -]?(?:code|number))?"
    r"|(?:door|gate|alarm|access|security|entry|lock|safe|garage|unlock)[ _-]code"
    rf"|{_ONE_TIME}|{_CARD_CODE}"
)
_PROSE_COLON = (
    rf"(?i)(?<![A-Za-z0-9_-])(?P<name>{_SHORT_NAME})(?P<verb>[ \t]*[:=](?![:=]))[ \t]*"
    rf"{_PROSE_VALUE}"
)
_PROSE_COLON_NEEDLE = r"(?:pass|pw|pwd|pin|code|number|otp|cvv2?|cvc2?|csc)[ \t]*[:=]"


#: A docstring's type in brackets after an argument's name.
_DOCSTRING_TYPE = re.compile(
    r"\((?:[\w.\[\], |]*\b(?:str|bytes|bool|int|optional|Optional|None)\b)"
)


#: After a value that describes the password, the rest of its clause, a colon and the
#: value it describes ("is the same as prod: x", "is the usual one: x").
_TOLD_AFTER = re.compile(r"[^.!?\n:;]{0,50}:[ \t]*(?P<value>[^\s\"'`]{6,200})")


def _prose_span(match: re.Match[str], kind: str | None = None) -> Span | None:
    groups = match.groupdict()
    if groups.get("qual") and _DOCSTRING_TYPE.search(groups["qual"]):
        return None  # "password (str, optional): The user's password."
    kind = kind or prose.name_class(groups["name"] or groups["name2"])
    # after ":", "=" or an arrow a value may be code ("pw = getpass()")
    verb = (groups["verb"] or "").strip()
    in_code = verb.lstrip("-") in ("", ":", "=", ">", "→", "–", "—")
    start, end, quoted = prose.value_span(match)
    if (
        verb == "="
        and match.string.startswith("{", start)
        and match.string[: match.start()].endswith(";")
    ):
        return keys.braced_field(match.string, start)  # ODBC: ;Pwd={Br4ced;Pw};
    if (
        verb in (":", "=")
        and not quoted
        and kind not in (prose.PIN, prose.CODE)  # "cvv: 123", "pin=4821" are digits
        and code.is_code(match.string, start, end, keys.VARIABLE_NAME)
    ):
        return None  # pwd = None, {username: str, password: str}
    value = match.string[start:end]
    after = match.string[end : end + 40]
    secret = prose.looks_secret(value, kind, quoted=quoted, after=after, code=in_code)
    if not secret and not quoted and kind in (prose.WEAK, prose.PWD, prose.OTHER):
        # "the staging password is the same as prod: Gr33nT3a#88"
        told = _TOLD_AFTER.match(match.string, end)
        if told is not None:
            found = (
                told.start("value"),
                told.start("value") + len(prose.strip_trailing(told.group("value"))),
            )
            told_value = match.string[found[0] : found[1]]
            if "/" not in told_value and prose.looks_secret(
                told_value, prose.STRONG, quoted=False, code=True
            ):
                return found
    return keys.with_phrase(match.string, start, end, kind, secret=secret, quoted=quoted)


def _prose_other_span(match: re.Match[str]) -> Span | None:
    """A password named in another language: its value is judged with that language's
    describing words too ("a senha é obrigatória", "das Passwort ist falsch")."""
    name = match.group("name").lower()
    return _prose_span(match, prose.name_class(name) if name in ("pin", "token") else prose.OTHER)


_USE_AS = (
    r"(?i)(?<![\w-])use\s+"
    rf"{_PROSE_VALUE}"
    r"\s+as\s+(?:(?:the|my|our|your|a|an|its|their)\s+)?(?:[\w-]+\s+){0,2}?"
    r"(?P<name>pass(?:word|code|wd|phrase)|pin)(?![\w-])"
)


def _use_as_span(match: re.Match[str]) -> Span | None:
    start, end, quoted = prose.value_span(match)
    kind = prose.name_class(match.group("name"))
    value = match.string[start:end]
    return (start, end) if prose.looks_secret(value, kind, quoted=quoted) else None


# -- a user name and its password side by side -----------------------------------------------
#: "user: bob pass: hunter22", "username admin password admin123", "login: bob /
#: hunter22", "creds: admin / P@ssw0rd1", "user and pass are bob / …": what follows the user's name is the password
#: (after a bare slash, only a value that looks like a credential: "login: john / see
#: above" stays).
_PAIR = (
    r"(?i)(?<![\w-])(?:"
    # (the user's name is not "and": "user and pass are required" names two fields)
    # (a separator or a space after "user": ``user.set_password(…)`` is a method)
    r"(?:user(?:[ _-]?name)?|login|usr)(?:[ \t]*[:=]|[ \t]+is|(?=[ \t]))[ \t]*"
    r"(?!(?:and|or|&|\+)[ \t])[^\s/,;:=]+[ \t]*[,;/|]?[ \t]*"
    r"(?P<name>pass(?:word|wd)?|pwd?)(?![\w-])(?P<verb>[ \t]*[:=]|[ \t]+is)?[ \t]*"
    # "creds: bob / …", "user and pass are bob / …": after the slash
    r"|(?:creds|credentials|login|(?:user(?:[ _-]?name)?|login)[ \t]+(?:and|&)[ \t]+"
    r"pass(?:word|wd)?)(?::| is| are)[ \t]*[^\s/]+[ \t]*/[ \t]*"
    # "log in with admin:S3cret!pw", "ssh as deploy:Xk9#mm2q": user:password
    r"|(?:log(?:ged)?[ -]?in|sign(?:ed)?[ -]?in|ssh)[ \t]+(?:with|as|using)"
    r"[ \t]+[^\s:/@]+(?P<colon>:)"
    r")"
    rf"{_PROSE_VALUE}"
)
#: The name of the password, or what opens a slash pair (not "user": JSON tool calls
#: say "role": "user" at every turn).
_PAIR_NEEDLE = (
    r"pass|pw|cred|login(?::| is| are)|(?:in|connect|connected|ssh)\s+(?:with|as|using)\s"
)
#: A pair's value that names the field instead of filling it ("login: email / password").
_FIELD_NAMES = frozenset(["password", "pass", "passwd", "pwd", "pw", "secret", "token"])


_PORT = re.compile(r"\d+(?:/\S*)?")
_HOME_PATH = re.compile(r"[:\s](?:~|\.{1,2})/")


def _pair_span(match: re.Match[str]) -> Span | None:
    """The password of a user-and-password pair, judged as a password named in prose."""
    start, end, quoted = prose.value_span(match)
    value = match.string[start:end]
    if value.lower() in _FIELD_NAMES:
        return None
    if match.group("colon") and (_PORT.fullmatch(value) or value.startswith("//")):
        return None  # "ssh as root:22": a port; "log in with https://…": a URL
    if _HOME_PATH.search(match.group(0)):
        return None  # "credentials: ~/.aws/credentials": a path, not user / password
    name = match.group("name")
    kind = prose.name_class(name) if name else prose.STRONG
    in_code = (match.group("verb") or "").strip() in (":", "=")
    if in_code and not quoted and code.is_code(match.string, start, end, keys.VARIABLE_NAME):
        return None  # def f(username: str, password: str)
    return (start, end) if prose.looks_secret(value, kind, quoted=quoted, code=in_code) else None


def _aws_secret_span(match: re.Match[str]) -> Span | None:
    """The 40 characters (one more or less: a key copied a character short or long)
    after an access key id, when they mix case and digits (a secret key does; a
    word, a path or a hex digest does not)."""
    value = match.group("secret")
    mixed = any(c.islower() for c in value) and any(c.isupper() for c in value)
    return match.span("secret") if mixed and any(c.isdigit() for c in value) else None


# -- personal data (redact_pii) ------------------------------------------------------------
def _email_span(match: re.Match[str]) -> Span | None:
    return None if match.group("local").lower() == "git" else match.span()


def _phone_span(match: re.Match[str]) -> Span | None:
    digits = sum(c.isdigit() for c in match.group(0))
    return match.span() if 7 <= digits <= 15 else None


def _iban_span(match: re.Match[str]) -> Span | None:
    """The longest prefix of whole groups that is an IBAN (capitals after it may be words)."""
    text = match.group(0)
    groups = re.findall(r" ?[A-Z0-9]{1,4}", text[4:])
    for count in range(len(groups), 1, -1):
        candidate = text[:4] + "".join(groups[:count])
        if checksums.iban(candidate):
            return match.start(), match.start() + len(candidate)
    return None


# -- the rules, in order ---------------------------------------------------------------------
RULES: tuple[Rule, ...] = (
    Rule("private_key", _PRIVATE_KEY, ("-----begin",)),
    # an AWS secret access key: 40 (39-41) characters of base64 after its access key id, on
    # the same line or the next (a credentials CSV, "access key AKIA… secret …")
    Rule(
        "aws_secret_key",
        rf"{_START}(?:AKIA|ASIA)[0-9A-Z]{{16}}[^\n]{{0,80}}?(?:\n[^\n]{{0,80}}?)?(?<![A-Za-z0-9/+])"
        r"(?P<secret>[A-Za-z0-9/+]{39,41})(?![A-Za-z0-9/+=])",
        ("akia", "asia"),
        _aws_secret_span,
    ),
    Rule(
        "aws_access_key_id",
        rf"{_START}(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{{16}}{_END}",
        tuple(
            ["akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa", "abia", "acca", "a3t"]
        ),
    ),
    Rule(
        "github_token",
        rf"{_START}(?:gh[pousr]_[A-Za-z0-9]{{36,255}}|github_pat_[A-Za-z0-9_]{{22,255}}){_END}",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    Rule(
        "gitlab_token",
        rf"{_START}(?:gl(?:pat|dt|ft|rt|ptt|cbt|oas|imt|soat|ffct|agent)-[0-9A-Za-z_.-]{{20,300}}"
        rf"|GR1348941[\w-]{{20}}){_END}",
        tuple(
            f"gl{kind}-"
            for kind in [
                "pat",
                "dt",
                "ft",
                "rt",
                "ptt",
                "cbt",
                "oas",
                "imt",
                "soat",
                "ffct",
                "agent",
            ]
        )
        + ("gr1348941",),
    ),
    Rule("huggingface_token", rf"{_START}(?:hf|api_org)_[A-Za-z]{{34}}{_END}", ("hf_", "api_org_")),
    Rule("npm_token", rf"{_START}npm_[A-Za-z0-9]{{36}}{_END}", ("npm_",)),
    Rule("pypi_token", rf"{_START}pypi-AgE[A-Za-z0-9_-]{{50,}}", ("pypi-age",)),
    Rule(
        "anthropic_key",
        rf"{_START}sk-ant-(?:api|admin|oat|sid)\d\d-[A-Za-z0-9_-]{{20,}}",
        ("sk-ant-",),
    ),
    Rule(
        "openai_key", rf"{_START}sk-(?:proj-|svcacct-|admin-|ant-)?[A-Za-z0-9_-]{{20,}}", ("sk-",)
    ),
    Rule(
        "slack_token",
        rf"{_START}(?:xox[abposre]-[A-Za-z0-9-]{{10,}}|xapp-\d-[A-Za-z0-9-]{{10,}})"
        # (a webhook's host and kind stay: only its path is the secret)
        r"|hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9+/]{20,})",
        ("xox", "xapp-", "hooks.slack.com/"),
    ),
    # a Discord bot's token: the bot's id in base64, a time stamp, an HMAC
    Rule(
        "discord_token",
        rf"{_START}[MNO][A-Za-z0-9_-]{{23,27}}\.[A-Za-z0-9_-]{{6,7}}\.[A-Za-z0-9_-]{{27,40}}{_END}",
        r"\.[a-z0-9_-]{6,7}\.[a-z0-9_-]{27}",
    ),
    Rule(
        "discord_webhook",
        r"discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{30,}",
        ("/api/webhooks/",),
    ),
    Rule(
        "stripe_key",
        rf"{_START}(?:[rsp]k_(?:live|test|prod)_[A-Za-z0-9]{{16,}}|whsec_[A-Za-z0-9]{{24,}})",
        ("k_live_", "k_test_", "k_prod_", "whsec_"),
        _checked(lambda key: not re.search(r"_x{8,}$", key)),  # sk_test_xxxxxxxx: a template's
    ),
    Rule("twilio_key", rf"{_START}SK[0-9a-fA-F]{{32}}{_END}", r"sk[0-9a-f]{32}"),
    Rule(
        "sendgrid_key",
        rf"{_START}SG\.[A-Za-z0-9_-]{{22}}\.[A-Za-z0-9_-]{{43}}{_END}",
        ("sg.",),
    ),
    Rule(
        "digitalocean_token",
        rf"{_START}do[por]_v1_[a-f0-9]{{64}}{_END}",
        ("dop_v1_", "doo_v1_", "dor_v1_"),
    ),
    Rule(
        "shopify_token",
        rf"{_START}shp(?:at|ca|pa|ss)_[a-fA-F0-9]{{32}}{_END}",
        ("shpat_", "shpca_", "shppa_", "shpss_"),
    ),
    Rule(
        "azure_client_secret",
        r"(?:(?<=\\[nrt])|(?<![A-Za-z0-9_~.-]))[a-zA-Z0-9_~.]{3}\dQ~[a-zA-Z0-9_~.-]{31,34}"
        r"(?![A-Za-z0-9_~.-])",
        r"\dq~",
    ),
    Rule("databricks_token", rf"{_START}dapi[a-f0-9]{{32}}(?:-\d)?{_END}", ("dapi",)),
    Rule(
        "google_oauth",
        rf"{_START}(?:ya29\.[0-9A-Za-z_-]{{20,}}|GOCSPX-[A-Za-z0-9_-]{{28}})",
        ("ya29.", "gocspx-"),
    ),
    Rule("google_api_key", rf"{_START}AIza[0-9A-Za-z_-]{{35}}{_END}", ("aiza",)),
    Rule(
        "vault_token",
        # (a service token is "hvs." and 90+ characters; a dev server's root token 24)
        rf"{_START}(?:hvs\.[\w-]{{24,}}|hvb\.[\w-]{{138,}})",
        ("hvs.", "hvb."),
    ),
    Rule(
        "grafana_token",
        rf"{_START}(?:glsa_[A-Za-z0-9]{{32}}_[A-Fa-f0-9]{{8}}|glc_[A-Za-z0-9+/]{{32,}}={{0,3}})",
        ("glsa_", "glc_"),
    ),
    Rule(
        "saas_token",  # Linear, Notion, Perplexity, Groq, Replicate, LangSmith, Postman, Doppler, Pulumi, New Relic, Sentry, age
        rf"{_START}(?:lin_api_[A-Za-z0-9]{{40}}|ntn_\d{{11}}[A-Za-z0-9]{{35}}|pplx-[A-Za-z0-9]{{48}}"
        rf"|gsk_[A-Za-z0-9]{{52}}|r8_[A-Za-z0-9]{{37}}|lsv2_(?:pt|sk)_[a-f0-9]{{32}}_[a-f0-9]{{10}}"
        rf"|PMAK-[a-f0-9]{{24}}-[a-f0-9]{{34}}|dp\.pt\.[A-Za-z0-9]{{43}}|pul-[a-f0-9]{{40}}"
        rf"|NRAK-[A-Z0-9]{{27}}|sntry[us]_[A-Za-z0-9+/=_]{{40,}}"
        rf"|AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{{58}}){_END}",
        tuple(
            [
                "lin_api_",
                "ntn_",
                "pplx-",
                "gsk_",
                "r8_",
                "lsv2_",
                "pmak-",
                "dp.pt.",
                "pul-",
                "nrak-",
                "sntry",
                "age-secret-key-",
            ]
        ),
    ),
    Rule(
        "telegram_bot_token",
        # (in the Bot API's URL the token follows "bot": api.telegram.org/bot123:AA…)
        rf"(?:{_START}|(?<=/bot))\d{{8,10}}:AA[A-Za-z0-9_-]{{33}}{_END}",
        r"\d:aa[a-z0-9_-]{33}",
        separated=True,
    ),
    *SERVICE_RULES,
    Rule(
        "jwt",
        rf"{_START}eyJ[A-Za-z0-9_-]{{5,}}\.eyJ[A-Za-z0-9_-]{{5,}}\.[A-Za-z0-9_-]{{5,}}",
        ("eyj",),
    ),
    Rule(
        "authorization",
        r"""(?i)\bauthorization\\*["']?[ \t]*[:=][ \t]*\\*["']?(?:basic|bearer|token|digest)?\s*"""
        rf"(?P<secret>{_NOT_DONE}[A-Za-z0-9\-._~+/]{{8,}}=*)",
        r"""authorization\\*["']?\s*[:=]""",
        web.authorization_span,
        separated=True,
    ),
    Rule(
        "bearer_token",
        rf"(?i)\bbearer\s+(?P<secret>{_NOT_DONE}[A-Za-z0-9\-._~+/]{{16,}}=*)",
        ("bearer",),
    ),
    # a signed URL's signature (Azure SAS, S3 and GCS presigned URLs): whoever holds the
    # URL holds the access, until it expires
    Rule(
        "url_signature",
        r"(?i)[?&](?:sig|signature|x-amz-signature|x-goog-signature|x-amz-security-token)="
        r"""(?P<secret>[^&\s"'#<>]{16,})""",
        ("sig=", "signature=", "security-token="),
    ),
    # a request's cookies (a session cookie is a password until it expires): the whole
    # value of a Cookie header, the value of a Set-Cookie header's cookie
    Rule(
        "cookie",
        r"""(?i)(?<![\w-])(?:(?P<set>set-)?cookie\\*["']?[ \t]*:[ \t]*|(?:-b|--cookie)[ \t]+["']?)"""
        r"""(?P<secret>[\w.%!#$&*+^`|~-]+=[^\r\n"'\\]{8,})""",
        ("cookie", "-b "),
        web.cookie_span,
    ),
    # user:password@ in a URL (the user name stays; a template's is none)
    Rule(
        "url_password",
        rf"\b[a-z][a-z0-9+.-]*://(?P<user>[^\s/:@]*):(?P<secret>{_NOT_DONE}[^\s/@]+)@",
        r"://[^\s/:@]*:[^\s/@]+@",
        web.url_password_span,
        separated=True,
    ),
    # Vectora's password / api_key patterns, grown to JSON (escaped at any depth), YAML,
    # dicts and env files
    Rule(
        "secret_value",
        keys.KEY_VALUE,
        # the last word of every secret name (see SECRET_NAME), then what may follow it
        keys.SECRET_NAME_NEEDLE,
        keys.key_value_span,
        separated=True,
    ),
    Rule("secret_value", keys.MARKUP, keys.MARKUP_NEEDLE, keys.quoted_value_span),
    Rule("secret_value", keys.ARGUMENT, keys.ARGUMENT_NEEDLE, keys.quoted_value_span),
    Rule("secret_value", keys.ENV_KEY, keys.ARGUMENT_NEEDLE, keys.env_key_span),
    Rule("secret_value", keys.SQL, keys.SQL_NEEDLE, keys.quoted_value_span),
    Rule("secret_value", keys.CALL_PAIR, keys.CALL_PAIR_NEEDLE, keys.quoted_value_span),
    # a line of ~/.pgpass: host:port:database:user:password
    Rule(
        "secret_value",
        r"(?m)^[ \t]*(?=[^:\s]*[A-Za-z.*])[^:\s]+:(?:\d{1,5}|\*):[^:\s]+:(?=[^:\s]*[A-Za-z*])"
        r"[^:\s]+:(?P<secret>[^\s]+)[ \t]*$",
        r":(?:\d{1,5}|\*):[^:\s]+:[^:\s]+:",
        separated=True,
    ),
    # one-time backup codes: "2FA backup codes: 8372-1947, 5520-3381", "recovery codes:"
    Rule(
        "secret_value",
        r"(?i)(?:backup|recovery)[ _-]codes?[ \t]*:?[ \t]*\r?\n?[ \t]*"
        r"(?P<secret>[A-Za-z0-9]{4,6}-[A-Za-z0-9]{4,6}(?:[ \t]*(?:,|\r?\n)?[ \t]*"
        r"[A-Za-z0-9]{4,6}-[A-Za-z0-9]{4,6})+|\d{6,10}(?:[ \t]*(?:,|\r?\n)?[ \t]*\d{6,10})+)",
        (
            "backup code",
            "recovery code",
            "backup_code",
            "recovery_code",
            "backup-code",
            "recovery-code",
        ),
    ),
    *FORMAT_RULES,
    *LAYOUT_RULES,
    Rule("secret_prose", _PROSE_IS, _PROSE_IS_NEEDLE, _prose_span),
    Rule("secret_prose", _PROSE_COLON, _PROSE_COLON_NEEDLE, _prose_span, separated=True),
    Rule("secret_prose", _USE_AS, r"use\s", _use_as_span),
    Rule("secret_prose", _PROSE_OTHER, _PROSE_OTHER_NEEDLE, _prose_other_span),
    Rule("secret_prose", _PAIR, _PAIR_NEEDLE, _pair_span),
    *LOGIN_RULES,
    *CLI_RULES,
    *PHRASE_RULES,
    *CHAT_RULES,
    # 13-19 digits of a card number (Luhn-checked)
    Rule(
        "payment_card",
        r"(?<![\d.-])[3-6]\d{3}(?:[ -]?\d){9,15}(?![\d-]|\.\d|e-)",
        # the shortest card number the pattern takes
        r"[3-6]\d{3}(?:[ -]?\d){9}",
        _checked(checksums.luhn),
    ),
    # -- personal data, with Settings(redact_pii=True) --
    Rule(
        "email",
        r"(?<![\w.+%-])(?P<local>[A-Za-z0-9._%+-]{1,64})@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*"
        r"\.[A-Za-z]{2,24}(?![\w-])",
        ("@",),
        _email_span,
        pii=True,
    ),
    Rule(
        "phone",
        r"(?<![\w+.-])(?:\+[1-9]\d{0,2}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]?\d{2,4}){1,4}"
        r"|(?:\(\d{3}\)\s?|\d{3}[-. ])\d{3}[-. ]\d{4})(?![\w.-]?\d)",
        r"\+[1-9]|\(\d{3}\)|\d{3}[-. ]\d{3}[-. ]\d{4}",
        _phone_span,
        pii=True,
    ),
    Rule(
        "iban",
        r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])",
        r"[a-z]{2}\d{2} ?[a-z0-9]{4}",
        _iban_span,
        pii=True,
    ),
    Rule(
        "us_ssn",
        r"(?<![\d-])\d{3}-\d{2}-\d{4}(?![\d-])|(?i:\bssn\b|social security(?: number)?)\W{0,3}(?P<secret>\d{9})\b",
        r"\d{3}-\d{2}-\d{4}|ssn|social security",
        _checked(checksums.us_ssn),
        pii=True,
    ),
    Rule(
        "br_cpf",
        r"(?<![\d.-])\d{3}\.\d{3}\.\d{3}-\d{2}(?![\d.-])|(?i:\bcpf\b)\W{0,3}(?P<secret>\d{11})\b",
        r"\d{3}\.\d{3}\.\d{3}-\d{2}|cpf",
        _checked(checksums.br_cpf),
        pii=True,
    ),
    Rule(
        "es_dni",
        r"(?<![A-Za-z0-9-])(?:\d{8}|[XYZxyz]-?\d{7})-?[A-Za-z](?![A-Za-z0-9-])",
        r"\d{7}-?[a-z]",
        _checked(checksums.es_dni),
        pii=True,
    ),
)
