"""Passwords on command lines: ``mysql -pX``, ``curl -u user:X``, ``--password X``.

A flag is a secret only after a command known to take one there (``-p`` is a port
for ``ssh``, ``--password`` a switch that prompts for ``psql``): each rule looks
back to the start of its command (:func:`command_words`) before it reports.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from . import code
from .rule import REDACTED, Rule, Span

# -- command lines -------------------------------------------------------------------------
_CLI_VALUE = r"""(?:'[^'\n]*'|"[^"\n]*"|[^\s'"`;|&]+)"""
#: Where a command ends, looking back from a flag.
_SEGMENT_END = re.compile(r"[\n;|&`(]|\$\(")
_WORD = re.compile(r"[^\s'\"=]+")
#: Commands whose ``--password`` is a switch (prompt for it), not followed by one.
_PASSWORD_SWITCH = frozenset(
    [
        "psql",
        "pg_dump",
        "pg_dumpall",
        "pg_restore",
        "pg_basebackup",
        "createdb",
        "dropdb",
        "createuser",
        "dropuser",
        "vacuumdb",
        "clusterdb",
        "reindexdb",
        "pg_isready",
    ]
)


def command_words(text: str, position: int) -> set[str]:
    """The words (base names) of the shell command that ``position`` is in."""
    start = max(0, position - 400)
    for found in _SEGMENT_END.finditer(text, start, position):
        start = found.end()
    return {word.rsplit("/", 1)[-1].lower() for word in _WORD.findall(text, start, position)}


def _unquoted(match: re.Match[str], group: str = "secret") -> Span | None:
    start, end = match.span(group)
    value = match.group(group)
    if len(value) >= 2 and value[0] in "'\"" and value[-1] == value[0]:
        start, end = start + 1, end - 1
    return (start, end) if end > start and not value.startswith(REDACTED) else None


def _for_commands(*commands: str) -> Callable[[re.Match[str]], Span | None]:
    """A span function: the flag's value, when the flag is given to one of ``commands``
    (``-p`` is a password to mysql, a port to docker, a parent to mkdir)."""
    wanted = frozenset(commands)

    def span(match: re.Match[str]) -> Span | None:
        if not command_words(match.string, match.start()) & wanted:
            return None
        before = match.string[match.start() - 1 : match.start()]
        if before in ("'", '"') and match.group(0).endswith(before, 0, 3):
            return None  # ["sshpass", "-p", "…"]: the quote closes the flag's string
        groups = match.groupdict()
        group = "secret_q" if groups.get("secret_q") is not None else "secret"
        user, password = groups.get("user_q") or groups.get("user"), match.group(group)
        if user is not None and (
            password.isdigit() and user.isdigit() or password.startswith("//")
        ):
            return None  # uid:gid (docker -u 1000:1000), or a URL
        found = _unquoted(match, group)
        if found is not None and code.is_placeholder(match.string[found[0] : found[1]]):
            return None  # curl -u "$USER:$PASS": the shell's variables
        return found

    return span


def _flag_for(commands: dict[str, tuple[str, ...]]) -> Callable[[re.Match[str]], Span | None]:
    """A span function: the value of a flag that is a password only for some commands
    (``-N`` is ssh-keygen's new passphrase, ``-k`` openssl's password)."""
    spans = {flag: _for_commands(*names) for flag, names in commands.items()}

    def span(match: re.Match[str]) -> Span | None:
        flag = match.group(0).split(None, 1)[0]
        return spans[flag](match) if flag in spans else None

    return span


def _piped(match: re.Match[str]) -> Span | None:
    """What ``echo`` pipes into a command that reads a password from its input,
    unless it is a variable (``echo "$PASS" | sudo -S``) or a format (``printf '%s'``)."""
    found = _unquoted(match)
    if found is None or code.is_placeholder(match.string[found[0] : found[1]]):
        return None
    colon = match.string.find(":", *found)
    if colon >= 0 and "chpasswd" in match.string[match.end() : match.end() + 80]:
        return colon + 1, found[1]  # echo "bob:pass" | chpasswd: the user stays
    return found


def _long_flag_span(match: re.Match[str]) -> Span | None:
    if match.group("sep") != "=" and command_words(match.string, match.start()) & _PASSWORD_SWITCH:
        return None  # psql --password mydb: a switch, then the database
    return _unquoted(match)


_MYSQL = [
    "mysql",
    "mysqldump",
    "mysqladmin",
    "mysqlimport",
    "mysqlcheck",
    "mysqlshow",
    "mysqlpump",
    "mysqlsh",
    "mariadb",
    "mariadb-dump",
    "mariadb-admin",
    "mariadb-import",
]


def _redis_span(match: re.Match[str]) -> Span | None:
    """A Redis password: after ``requirepass`` any value, after ``AUTH`` one that
    looks like a password (6+ characters, a digit or a symbol: "AUTH failed" stays)."""
    if match.group("secret") is not None:
        return _unquoted(match)
    value = match.group("secret_auth").strip("'\"")
    if len(value) < 6 or not any(not c.isalpha() for c in value):
        return None
    return _unquoted(match, "secret_auth")


_AWS = _for_commands("aws")


def _aws_configure_span(match: re.Match[str]) -> Span | None:
    """``aws configure set …`` given a key (a digit or a capital in it), not a
    documentation's ``default_secret_key``."""
    if not any(c.isdigit() or c.isupper() for c in match.group("secret")):
        return None
    return _AWS(match)


_MONGO = ["mongo", "mongosh", "mongodump", "mongorestore", "mongoexport", "mongoimport"]
_LDAP = "ldapsearch ldapadd ldapmodify ldapdelete ldapwhoami ldappasswd ldapcompare ldapmodrdn"
CLI_RULES: tuple[Rule, ...] = (
    Rule(  # mysql -pPASS, 7z -pPASS, sshpass -pPASS (attached)
        "command_password",
        rf"(?<![\w-])-p(?P<secret>{_CLI_VALUE})",
        r"-p",
        _for_commands(*_MYSQL, "7z", "7za", "7zr", "7zz", "sshpass"),
    ),
    Rule(  # sshpass -p PASS, mongo -p PASS, docker/podman/helm login -p PASS
        "command_password",
        rf"(?<![\w-])-p\s+(?P<secret>{_CLI_VALUE})",
        r"-p",
        _for_commands("sshpass", *_MONGO, "login"),
    ),
    Rule(  # zip -P PASS, sqlcmd -P PASS, mosquitto_pub -P PASS
        "command_password",
        rf"(?<![\w-])-P\s*(?P<secret>{_CLI_VALUE})",
        r"-p",
        _for_commands("zip", "unzip", "sqlcmd", "bcp", "osql", "mosquitto_pub", "mosquitto_sub"),
    ),
    Rule(  # ldapsearch -w PASS
        "command_password",
        rf"(?<![\w-])-w\s*(?P<secret>{_CLI_VALUE})",
        r"-w",
        _for_commands(*_LDAP.split()),
    ),
    Rule(  # redis-cli -a PASS
        "command_password",
        rf"(?<![\w-])-a\s+(?P<secret>(?![^\s:]+:){_CLI_VALUE})",
        r"-a\s",
        _for_commands("redis-cli", "keydb-cli"),
    ),
    Rule(  # curl -u user:pass, http -a user:pass, smbclient -U user%pass, lftp -u user,pass
        "command_password",
        r"""(?<![\w-])(?:-u|--user|--proxy-user|-U|-a|--auth)(?:\s+|=)?"""
        r"""(?:(?P<q>['"])(?P<user_q>[^\s:%,'"]+)[:%,](?P<secret_q>[^'"\n]+)(?P=q)"""
        r"""|(?P<user>[^\s:%,'"]+)[:%,](?P<secret>[^\s'"]+))""",
        r"-[ua]|--(?:user|proxy-user|auth)",
        _for_commands("curl", "http", "https", "xh", "xhs", "lftp", "smbclient", "rpcclient"),
    ),
    Rule(  # htpasswd -b[cBm...] file user PASS
        "command_password",
        rf"(?<![\w-])-[A-Za-z]*b[A-Za-z]*\s+\S+\s+\S+\s+(?P<secret>{_CLI_VALUE})",
        r"-[a-z]*b[a-z]*\s",
        _for_commands("htpasswd"),
    ),
    Rule(  # --password=X, --db-password X, --api-key X, --token=X (any command)
        "command_password",
        r"(?<![\w-])--(?!no-)[\w-]*?(?:password|passwd|passphrase|pass|secret|token|api-?key|auth-?key)"
        rf"(?![\w-])(?P<sep>=|\s+)(?P<secret>(?![-<>|&]){_CLI_VALUE})",
        r"--[\w-]*?(?:pass|secret|token|key)",
        _long_flag_span,
    ),
    Rule(  # pscp/plink -pw PASS, x11vnc -passwd PASS
        "command_password",
        rf"(?<![\w-])-(?:pw|passwd)\s+(?P<secret>{_CLI_VALUE})",
        ("-pw", "-passwd"),
        _flag_for({"-pw": ("pscp", "plink", "psftp", "putty"), "-passwd": ("x11vnc",)}),
    ),
    Rule(  # ssh-keygen -N 'NEW' -P 'OLD', openssl enc -k 'PASS' (quoted: "-n prod" is a
        # namespace to kubectl, and a quote keeps this rule off such texts)
        "command_password",
        r"""(?<![\w-])-(?:N|P|k)\s+(?P<secret>'[^'\n]*'|"[^"\n]*")""",
        r"""-[npk]\s+['"]""",
        _flag_for({"-N": ("ssh-keygen",), "-P": ("ssh-keygen",), "-k": ("openssl",)}),
    ),
    Rule(  # keytool -storepass X -keypass X (not -storepass:env VAR), jarsigner too
        "command_password",
        rf"(?<![\w-])-(?:src|dest|new)?(?:store|key)pass\s+(?P<secret>{_CLI_VALUE})",
        r"(?:store|key)pass\s",
        _for_commands("keytool", "jarsigner", "keytool.exe"),
    ),
    Rule(  # gh secret set NAME --body X
        "command_password",
        rf"(?<![\w-])(?:--body|-b)[ =](?P<secret>{_CLI_VALUE})",
        r"-(?:-body|b)[ =]",
        _for_commands("secret"),
    ),
    Rule(  # net use Z: \\server\share /user:DOMAIN\user PASS
        "command_password",
        rf"(?i)(?<![\w-])/user:\S+\s+(?P<secret>(?!/){_CLI_VALUE})",
        r"/user:",
        _for_commands("net", "net.exe"),
    ),
    Rule(  # echo PASS | sudo -S, | passwd --stdin, | chpasswd, | docker login --password-stdin, | runas
        "command_password",
        rf"(?<![\w-])(?:echo|printf)(?:\s+-[neE]+)?\s+(?P<secret>{_CLI_VALUE})\s*\|\s*"
        r"(?=[^\n|;]*?(?:\bsudo\b[^\n|;]*?\s-S\b|--password-stdin|\bpasswd\b[^\n|;]*?--stdin"
        r"|\bchpasswd\b|\bkinit\b|\brunas\b))",
        ("echo", "printf"),
        _piped,
    ),
    Rule(  # xfreerdp /u:admin /p:PASS
        "command_password",
        rf"(?i)(?<![\w-])/p:(?P<secret>{_CLI_VALUE})",
        ("/p:",),
        _for_commands("xfreerdp", "wfreerdp", "xfreerdp3", "sdl-freerdp"),
    ),
    Rule(  # poetry config http-basic.REPO USER PASS
        "command_password",
        rf"(?<![\w-])http-basic\.\S+\s+(?!-)\S+\s+(?P<secret>(?!-){_CLI_VALUE})",
        ("http-basic.",),
        _for_commands("poetry"),
    ),
    Rule(  # aws configure set aws_secret_access_key X (and a session token)
        "command_password",
        r"(?<![\w-])configure\s+set\s+(?:[\w-]+\.)?(?:aws_secret_access_key|aws_session_token)"
        rf"\s+(?P<secret>{_CLI_VALUE})",
        ("configure set",),
        _aws_configure_span,
    ),
    Rule(  # redis.conf's requirepass / masterauth, CONFIG SET requirepass X, AUTH X
        "command_password",
        r"(?im)(?:^[ \t]*|\bconfig[ \t]+set[ \t]+)(?:requirepass|masterauth)[ \t]+"
        rf"(?P<secret>(?![\"']{{2}}){_CLI_VALUE})"
        r"|(?:^[ \t]*|>[ \t]*|\bredis-cli\b[^\n|;]*?[ \t])(?-i:AUTH)[ \t]+(?:\S+[ \t]+)?"
        rf"(?P<secret_auth>{_CLI_VALUE})[ \t]*$",
        ("requirepass", "masterauth", "auth "),
        _redis_span,
    ),
    Rule(  # wrangler secret put NAME <<< 'X', gh secret set NAME <<< X (a here-string)
        "command_password",
        rf"<<<[ \t]*(?P<secret>(?!\$){_CLI_VALUE})",
        ("<<<",),
        _for_commands("secret"),
    ),
    Rule(  # openssl ... -passin pass:X
        "command_password",
        r"(?<![\w-])-pass(?:in|out)?\s+pass:(?P<secret>\S+)",
        r"-pass(?:in|out)?\s",
    ),
)
