"""A password given with what it is for, logging in, instead of with its name.

People tell an agent how to log in without saying "password": "log in with
Winter2024!", "sign in using hunter2", "you can log in as admin with pass123!",
"use Tr0ub4dor&3 to log in", "to sign in, use …", "creds are admin:Winter2024!",
"the login is bob and the pass Tr0ub4dor&3".  The same sentences name far more
often *how* one logs in: "log in with SSO", "sign in using OAuth2", "log in with
your GitHub account", "use the staging profile to log in", "log in with ssh -i
key.pem".  So the value here is one token that looks like a password
(:func:`looks_like_password`): letters and digits, or a letter or digit and a
symbol such as ``!#$%&*``, 6 characters or more; not a path, a URL, a flag, an
e-mail address, a file or host name, a version, an identifier (``id_rsa``,
``AWS_SECRET``), an all-capitals name (``FIDO2``, ``SAML2``, ``U2F``) or a name
with a version (``OAuth2``, ``Auth0``, ``Python3``, ``Office365``, ``Ed25519``:
:data:`VERSIONED_NAMES`).  A word alone, however secret ("log in with
swordfish"), cannot be told from "log in with Google" and is left.
"""

from __future__ import annotations

import re

from . import prose
from .rule import Rule, Span

_VALUE = prose.VALUE

#: Logging in, as a verb or a noun: "log in", "logged into", "sign-in", "login",
#: "authenticate".
_LOGIN = (
    r"(?:log(?:s|ged|ging)?|sign(?:s|ed|ing)?)[ -]?(?:in|on)(?:to)?(?![\w-])"
    r"|authenticat(?:e|es|ed|ing)(?![\w-])"
)
#: The lowercase literals every form holds (its needle): the login verb.  (Each
#: regex below opens with a lookahead for its first letter: Python tries the
#: lookbehind at every position otherwise, 50 us instead of 29 on 3,000 characters.)
_LOGIN_NEEDLE = tuple(
    f"{verb}{gap}{place}"
    for verb in ("log", "logged", "logging", "logs", "sign", "signed", "signing", "signs")
    for gap in ("", " ", "-")
    for place in ("in", "on")
) + ("authenticat",)
#: A password named before the value: "log in with the password …", "use pass …".
_NAMED = r"(?:(?:(?:the|my|this|your|our)[ \t]+)?(?:pass(?:word|wd|code)?|pwd?)[ \t]+)?"
#: A user name before the password: "with admin / …", "with admin and …".
_USER = r"(?:(?P<user>[^\s/:'\"`]+)(?:[ \t]*/[ \t]*|(?P<joined>[ \t]+and[ \t]+)))?"

#: The same, or a user and its password as one token ("use admin:… to log in"; not a
#: URL or a path: ``https://…``, ``host://``).
_USER_PAIR = r"(?:(?P<user>[^\s/:'\"`]+)(?:[ \t]*/[ \t]*|:(?![/:])|(?P<joined>[ \t]+and[ \t]+)))?"

#: "log in with Winter2024!", "sign in using hunter2", "log into the dashboard as
#: admin with pass123!", "login with bob / S3cr3t!x"; a few words between the verb
#: and "with" say where or as whom.
_WITH = (
    rf"(?i)(?=[lsa])(?<![\w-])(?:{_LOGIN})(?:[ \t]+(?!with|using)[\w.@'’-]+){{0,4}}?"
    rf"[ \t]+(?:with|using)[ \t]+{_NAMED}{_USER}{_VALUE}"
)
#: "use Winter2024! to log in", "use admin / … to sign in", "use admin:… for login".
_USE_TO = (
    rf"(?i)(?=u)(?<![\w-])use[ \t]+{_NAMED}{_USER_PAIR}{_VALUE}"
    rf"[ \t]+(?:to|for|when)[ \t]+(?:{_LOGIN})"
)
#: "to log in, use …", "to sign in to the portal use …", "when logging in, use …".
_TO_USE = (
    rf"(?i)(?=[tfw])(?<![\w-])(?:to|for|when)[ \t]+(?:{_LOGIN})(?:[ \t]+(?!use)[\w.@'’-]+){{0,4}}?"
    rf"[ \t]*[,:]?[ \t]+(?:just[ \t]+|simply[ \t]+)?use[ \t]+{_NAMED}{_USER_PAIR}{_VALUE}"
)
#: "creds are admin:Winter2024!", "credentials: bob:S3cr3t!x", "login: admin:…" (the
#: slash pair, "creds: admin / …", is the user-and-password rule's).
_CREDS_COLON = (
    r"(?i)(?=[cl])(?<![\w-])(?:creds|credentials|login)(?:[ \t]*:|[ \t]+(?:is|are))[ \t]*"
    rf"(?P<user>[^\s/:'\"`]+):(?![/:]){_VALUE}"
)
_CREDS_NEEDLE = ("cred", "login")
#: "the login is bob and the pass Tr0ub4dor&3", "username admin, and pw: …".
_AND_PASS = (
    r"(?i)(?=[ul])(?<![\w-])(?:user(?:[ _-]?name)?|login)(?:[ \t]*[:=]|[ \t]+is)?[ \t]*"
    r"[^\s/,;:=]+[ \t]*,?[ \t]+and (?:(?:the|my|its|their|his|her) )?"
    r"(?P<name>pass(?:word|wd)?|pwd?)(?![\w-])(?P<verb>[ \t]*[:=]|[ \t]+is)?[ \t]*"
    rf"{_VALUE}"
)
_AND_PASS_NEEDLE = tuple(
    f"and {article}{name}"
    for article in ("", "the ", "my ", "its ", "their ", "his ", "her ")
    for name in ("pass", "pw")
)


def _words(text: str) -> list[str]:
    return text.split()


#: Names that carry a version or a number, and are what one logs in *with*, not a
#: password: auth methods, products, protocols, languages (compared lowercased,
#: without the digits that follow: "oauth" for OAuth2, "office" for Office365).
VERSIONED_NAMES = frozenset(
    _words(
        """
    oauth saml fido auth okta sso ldap ldaps krb kerberos ntlm ntlmv webauthn passkey
    yubikey totp hotp otp mfa tfa ipv http https tls tlsv ssl sslv ssh sha md aes rsa des
    ecdsa ecdh pkcs pbkdf argon bcrypt scrypt blake crc wpa smb smbv snmp snmpv
    python py nodejs java jdk jre php perl ruby go golang net dotnet rust gcc clang
    llvm lua swift kotlin scala es ecmascript html css utf base unicode
    win windows office microsoft azure gcp aws ec ecs eks ubuntu debian centos rhel fedora
    alpine macos osx ios ipados android iphone ipad pixel galaxy chrome chromium firefox
    safari edge ie opera web gpt claude llama gemini mistral qwen
    postgres postgresql pg mysql mariadb redis mongo mongodb sqlite oracle mssql
    vue react angular django rails spring laravel next nuxt
    user users account accounts profile tenant node host server client key keys token
    tokens cert certs session port version build release step option plan tier
    badge card phone device app google github gitlab apple facebook entra aad azuread
    """
    )
)
#: A password's symbols (not ``.``, ``-``, ``_``, ``/``, ``:``: names and paths hold them).
_SYMBOLS = frozenset("!#$%&*+?@^|~")
#: A name with a number: letters, digits, maybe letters (OAuth2, Web3Auth, IPv6).
_NUMBERED = re.compile(r"([A-Za-z]*)\d+([A-Za-z]*)")
_DOTTED = re.compile(r"[\w-]+(?:\.[\w-]+)+")
_ADDRESS = re.compile(r"[^@\s]+@[\w-]+(?:\.[\w-]+)+|[A-Za-z][\w.-]+@[A-Za-z][\w.-]*")
_UNIT = re.compile(r"\d+(?:ms|[smhdkx]|kb|mb|gb|tb|px|em|th|st|nd|rd|fps|[kmg]?hz)", re.I)
#: Not a password although shaped like one.
_NOT_PASSWORDS = frozenset(["1password", "2fa", "auth0", "azuread", "web3auth"])


def looks_like_password(value: str) -> bool:
    """Whether ``value``, said to be what one logs in with, is a password and not
    the way one logs in (see the module's docstring)."""
    if len(value) < 6 or len(value) > 64 or not value[0].isalnum():
        return False
    if any(c.isspace() or c in "/\\:()[]{}<>=\"'`,;" for c in value) or _ADDRESS.fullmatch(value):
        return False  # a path, a URL, a call, a key=value, an e-mail address, user@host
    if _DOTTED.fullmatch(value) or _UNIT.fullmatch(value):
        return False  # key.pem, example.com, v2.3.1, Python3.11; 1000ms
    # "Google!", "Google+" are a word and what follows it: judge the word
    core = value.rstrip("!?+")
    symbols = _SYMBOLS & set(core)
    has_letter = any(c.isalpha() for c in core)
    has_digit = any(c.isdigit() for c in core)
    if not any(c.islower() for c in core) and not symbols:
        return False  # FIDO2, SAML2, U2F, HS256, 2FA, 123456
    if core.lower() in _NOT_PASSWORDS or ("_" in core and not symbols):
        return False  # an identifier: id_rsa, api_key2
    if not prose.looks_secret(core, prose.STRONG, quoted=False, code=True):
        return False  # a describing word, a placeholder
    parts = re.split(r"[-_]", core)
    for part in parts:
        if len(parts) > 1 and part.lower() in VERSIONED_NAMES:
            return False  # ssh-ed25519, gpt-4o, AES-256-GCM
        numbered = _NUMBERED.fullmatch(part)
        if (
            numbered is not None
            and numbered.group(1)
            and (
                numbered.group(1).lower() in VERSIONED_NAMES
                or (len(numbered.group(1)) <= 2 and not numbered.group(2))
            )
        ):
            return False  # OAuth2, Office365, Web3Auth, Ed25519, x509, user1, HS256
    return (bool(symbols) and (has_letter or has_digit)) or (has_letter and has_digit)


def _login_span(match: re.Match[str]) -> Span | None:
    """The value after a login phrase, when it looks like a password."""
    start, end, _ = prose.value_span(match)
    if looks_like_password(match.string[start:end]):
        return start, end
    user = match.groupdict().get("user")
    if (
        user is not None
        and match.groupdict().get("joined")
        and looks_like_password(prose.strip_trailing(user))
    ):
        # "log in with Winter2024! and then …": the "user" was the password
        return match.start("user"), match.start("user") + len(prose.strip_trailing(user))
    return None


def _and_pass_span(match: re.Match[str]) -> Span | None:
    """After "and the pass is …" a value judged as after "the password is …"; right
    after "and the pass", one that looks like a password ("… and pass it on" stays)."""
    start, end, quoted = prose.value_span(match)
    value = match.string[start:end]
    if (match.group("verb") or "").strip():
        kind = prose.name_class(match.group("name"))
        return (start, end) if prose.looks_secret(value, kind, quoted=quoted, code=True) else None
    return (start, end) if looks_like_password(value) else None


LOGIN_RULES: tuple[Rule, ...] = (
    Rule("secret_prose", _WITH, _LOGIN_NEEDLE, _login_span),
    Rule("secret_prose", _USE_TO, _LOGIN_NEEDLE, _login_span),
    Rule("secret_prose", _TO_USE, _LOGIN_NEEDLE, _login_span),
    Rule("secret_prose", _CREDS_COLON, _CREDS_NEEDLE, _login_span),
    Rule("secret_prose", _AND_PASS, _AND_PASS_NEEDLE, _and_pass_span),
)
