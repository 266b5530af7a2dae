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
        r"(?<![\w-])--(?!no-)[\w-]*?(?:password|passwd|pass|secret|token|api-?key|auth-?key)"
        rf"(?![\w-])(?P<sep>=|\s+)(?P<secret>(?![-<>|&]){_CLI_VALUE})",
        r"--[\w-]*?(?:pass|secret|token|key)",
        _long_flag_span,
    ),
    Rule(  # openssl ... -passin pass:X
        "command_password",
        r"(?<![\w-])-pass(?:in|out)?\s+pass:(?P<secret>\S+)",
        r"-pass(?:in|out)?\s",
    ),
)
