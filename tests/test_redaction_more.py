"""What stays when a file, a manifest or a table is redacted: only its secrets go (the
forms themselves, and their look-alikes, are in ``tests/redaction_forms.py``)."""

from __future__ import annotations

import json
import time

import pytest

from nbmemory.redaction import redact

_MANIFESTS = """\
apiVersion: v1
data:
  password: SzhzU2VjcmV0UHdkIQ==
  tls.key: "LS0tLS1CRUdJTiBQUklWQVRF"  # the key
kind: Secret
metadata:
  name: db
stringData:
  config.yaml: |
    user: app
    url: postgres://db/app

  region: eu-west-1
type: Opaque
---
apiVersion: v1
kind: ConfigMap
data:
  LOG_LEVEL: debug
"""


def test_a_kubernetes_secret_loses_its_values_and_keeps_its_keys() -> None:
    """Every value under ``data:`` and ``stringData:`` of a ``kind: Secret`` document
    goes (kubectl writes ``data`` before ``kind``); the ConfigMap after ``---`` stays."""
    result = redact(_MANIFESTS)
    assert result.text == (
        _MANIFESTS.replace("SzhzU2VjcmV0UHdkIQ==", "[REDACTED]")
        .replace("LS0tLS1CRUdJTiBQUklWQVRF", "[REDACTED]")
        .replace("user: app\n    url: postgres://db/app", "[REDACTED]")
        .replace("region: eu-west-1", "region: [REDACTED]")
    )
    assert "LOG_LEVEL: debug" in result.text


def test_only_the_secret_items_of_a_list_lose_their_values() -> None:
    text = (
        "items:\n- apiVersion: v1\n  data:\n    a: YWJj\n  kind: ConfigMap\n"
        "- apiVersion: v1\n  data:\n    b: ZGVmZ2hp\n  kind: Secret\n"
    )
    assert redact(text).text == text.replace("ZGVmZ2hp", "[REDACTED]")


def test_a_kubernetes_secret_in_json_loses_its_values_and_stays_json() -> None:
    secret = {"apiVersion": "v1", "data": {"tls.key": "LS0tLS1CRUdJTg=="}, "kind": "Secret"}
    config = {"apiVersion": "v1", "data": {"LOG_LEVEL": "debug"}, "kind": "ConfigMap"}
    text = json.dumps({"items": [secret, config], "kind": "List"}, indent=4)
    result = redact(text)
    items = json.loads(result.text)["items"]
    assert items[0]["data"] == {"tls.key": "[REDACTED]"} and items[1] == config
    assert redact(json.dumps(config)).count == 0


def test_a_credentials_csv_loses_its_password_and_secret_columns() -> None:
    header = "User name,Password,Access key ID,Secret access key,Console login link"
    rows = [
        "jdoe,CsvPwd!1x,AKIA1B2C3D4E5F6G7H8J,Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3a,https://x",
        "bob,,AKIA1B2C3D4E5F6G7H8K,Zz1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3a,https://y",
    ]
    text = "\n".join([header, *rows, "", "the,table,ended"])
    assert redact(text).text == "\n".join(
        [
            header,
            "jdoe,[REDACTED],[REDACTED],[REDACTED],https://x",
            "bob,,[REDACTED],[REDACTED],https://y",
            "",
            "the,table,ended",
        ]
    )


def test_a_putty_key_loses_its_private_lines_and_keeps_its_public_ones() -> None:
    text = (
        "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: deploy\n"
        "Public-Lines: 1\nAAAAC3NzaC1lZDI1NTE5AAAAIBm1\n"
        "Private-Lines: 2\nAAAAIEhq8p2ZvQ0mS1fT9nJ3wXkY\nc6bR4uLdE7oV5gA2hPzC\n"
        "Private-MAC: 4f2a9c01\nthanks"
    )
    assert redact(text).text == (
        "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: deploy\n"
        "Public-Lines: 1\nAAAAC3NzaC1lZDI1NTE5AAAAIBm1\n"
        "Private-Lines: 2\n[REDACTED]\nPrivate-MAC: [REDACTED]\nthanks"
    )


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            'cur.execute("ALTER USER %s WITH PASSWORD %s", ("bob", "Pw12345"))',
            'cur.execute("ALTER USER %s WITH PASSWORD %s", ("bob", "[REDACTED]"))',
        ),
        (
            'variable "db_password" {\n  type = string\n  default = "TfVarPwd9"\n}',
            'variable "db_password" {\n  type = string\n  default = "[REDACTED]"\n}',
        ),
        ("sqlplus -s scott/tiger@orcl", "sqlplus -s scott/[REDACTED]@orcl"),
        ("WIFI:T:WPA;S:Home;P:Qr\\;W1f1;H:false;;", "WIFI:T:WPA;S:Home;P:[REDACTED];H:false;;"),
        ("the gate code 4412# after 8pm", "the gate code [REDACTED]# after 8pm"),
        ("pw: A=0", "pw: [REDACTED]"),
        # a token as a URL's user's password keeps the host and the path (third probe)
        (
            "git remote set-url origin https://x-access-token:"
            "ghs_1fY78Sut8DeLq2eSB8mgzmT44DGp0Zx72nG4@github.com/acme/app.git",
            "git remote set-url origin https://x-access-token:[REDACTED]@github.com/acme/app.git",
        ),
        ("postgres://postgres:password@db/app", "postgres://postgres:[REDACTED]@db/app"),
        (
            "SLACK_WEBHOOK_URL=https://hooks.slack.com/services/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",
            "SLACK_WEBHOOK_URL=https://hooks.slack.com/services/[REDACTED]",
        ),
        (
            "pip install --extra-index-url https://__token__:glpat-WJBMYgS4D-vWNaj9YM29@gitlab.com/x pkg",
            "pip install --extra-index-url https://__token__:[REDACTED]@gitlab.com/x pkg",
        ),
        ('{"password": "changeme"}', '{"password": "[REDACTED]"}'),
        # a service account's JSON in a variable loses its key, not its project
        (
            """GOOGLE_CREDENTIALS='{"project_id": "acme-prod", "private_key": "-----BEGIN """
            """PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE KEY-----\\n", """
            """"client_email": "svc@acme-prod.iam.gserviceaccount.com"}'""",
            """GOOGLE_CREDENTIALS='{"project_id": "acme-prod", "private_key": "[REDACTED]", """
            """"client_email": "svc@acme-prod.iam.gserviceaccount.com"}'""",
        ),
        ("""CREDENTIALS='{"user": "bob", "pw": "Xk9!mmQ2"}'""", "CREDENTIALS='[REDACTED]'"),
        # an ODBC value in braces may hold ";"
        (
            "Driver={ODBC Driver 18 for SQL Server};Server=x;Uid=app;Pwd={Br4ced;Pw};",
            "Driver={ODBC Driver 18 for SQL Server};Server=x;Uid=app;Pwd={[REDACTED]};",
        ),
        ("Server=x;Password={Br4ced;Pw};", "Server=x;Password={[REDACTED]};"),
        ("Server=x;Password={0};", "Server=x;Password={0};"),
        # a value that lists fields keeps their names
        (
            "Credentials: key=AKIA4HAFCFGWPBBBW65J secret=lxob+Fi7ilfIiM9TIFz6cjaQs8Wvgj/ujBsdSosN",
            "Credentials: key=[REDACTED] secret=[REDACTED]",
        ),
        ("credentials: user=Xk9!mmQ2", "credentials: user=[REDACTED]"),
        ("Server=x;Pwd={password};", "Server=x;Pwd={password};"),
    ],
)
def test_only_the_secret_of_a_form_is_replaced(text: str, expected: str) -> None:
    assert redact(text).text == expected


@pytest.mark.parametrize(
    "text, kind",
    [
        ("PIN 4921", "access_code"),
        ("safe combination is 12-34-56", "access_code"),
        ("WPA key: Mountain-Breeze-2291", "wifi_password"),
        ("Mailgun: key-3ax6xnjp29jd6fds4gc373sgvjxteol0", "mailgun_key"),
        ("https://4f9a2c7e1b8d3f6a0e5c9b2d7f1a8e3c@o1.ingest.sentry.io/2", "sentry_dsn"),
        ("ATATT3xFfGF0T4mQ9bZ7kL2nP5rS8vW1yC4eG7iK0mO3qU6x=1A2B3C4D", "atlassian_token"),
        ("rubygems_05592d92c27a5bc1611c5d3ece2ee7bd4805a36055d9b045", "rubygems_key"),
        ("ETH private key 0x" + "4c0883a69102937d" * 4, "wallet_key"),
        ("DD_API_KEY is 9acb288bc42177143debac1d9a52be29", "datadog_key"),
    ],
)
def test_the_new_kinds_are_reported(text: str, kind: str) -> None:
    assert redact(text).kinds == (kind,)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("use Winter2024! to log in", "use [REDACTED] to log in"),
        ("log in with Winter2024!", "log in with [REDACTED]"),
        ("Log in using P@ssw0rd2024.", "Log in using [REDACTED]."),
        ("you can log in as admin with pass123!", "you can log in as admin with [REDACTED]"),
        (
            "log in with Winter2024! and then open Settings",
            "log in with [REDACTED] and then open Settings",
        ),
        ("sign in with bob / Pa55word!", "sign in with bob / [REDACTED]"),
        ("use admin:Winter2024! to log in", "use admin:[REDACTED] to log in"),
        ("to log in, use Welcome1!", "to log in, use [REDACTED]"),
        ("creds are admin:Winter2024!", "creds are admin:[REDACTED]"),
        (
            "the login is bob and the pass Tr0ub4dor&3",
            "the login is bob and the pass [REDACTED]",
        ),
    ],
)
def test_a_password_given_with_logging_in_goes_and_the_user_stays(text: str, expected: str) -> None:
    """Only the password of a login phrase is replaced: the user name, the verb and
    the sentence's punctuation stay."""
    result = redact(text)
    assert result.text == expected and result.kinds == ("secret_prose",)


@pytest.mark.parametrize(
    "value, password",
    [
        ("hunter2", True),
        ("Winter2024!", True),
        ("Tr0ub4dor&3", True),
        ("Pa55word", True),
        ("OAuth2", False),
        ("Office365", False),
        ("Web3Auth", False),
        ("FIDO2", False),
        ("Ed25519", False),
        ("user1234", False),
        ("Google!", False),
        ("key.pem", False),
        ("id_rsa", False),
        ("swordfish", False),
    ],
)
def test_what_one_logs_in_with_is_a_password_only_when_shaped_like_one(
    value: str, password: bool
) -> None:
    from nbmemory.redaction.logins import looks_like_password

    assert looks_like_password(value) is password


def _fastest(unit: str, n: int) -> float:
    """The fastest of five redactions of ``unit`` repeated to ``n`` characters (after
    one redaction of it that compiles the rules and warms the caches)."""
    text = (unit * (n // len(unit) + 1))[:n]
    redact(text[:1_000])
    times = []
    for _ in range(5):
        start = time.perf_counter()
        redact(text)
        times.append(time.perf_counter() - start)
    return min(times)


@pytest.mark.parametrize(
    "unit",
    [
        "log in ",
        "log in to the a b c d ",
        "log in with a / ",
        "use a:b ",
        "to log in, use ",
        "credentials: a:",
        "user x and the pass ",
    ],
)
def test_a_login_phrase_repeated_grows_the_time_linearly(unit: str) -> None:
    """The login rules stay linear: a line made of the start of their forms, repeated
    (each position an almost-match), takes 16 times as long at 16 times the length, not
    256 (a rule that backtracks).  A ratio of two runs of this process, not a time: a
    loaded machine slows both.  The bound is 100: on a machine loaded by other tests,
    linear rules measured up to 60 times as long at ten times the length (caches, and
    the small text's runs on a quiet moment), and 40 was crossed there."""
    assert _fastest(unit, 64_000) < 100 * _fastest(unit, 4_000)


@pytest.mark.parametrize(
    "unit",
    [
        "-----BEGIN RSA PRIVATE KEY-----\n",
        "-----BEGIN RSA PRIVATE KEY-----\nG7PYN2gRLHsxfgecIS+xGTVmne5PL3Bcrr3JaAnQ3F068ginoQHJ6jMiHtTdVifc\n",
        "-----END RSA PRIVATE KEY-----\nG7PYN2gRLHsxfgecIS+xGTVmne5PL3Bcrr3JaAnQ3F068ginoQHJ6jMiHtTdVifc\n",
        ";Pwd={",
    ],
)
def test_blocks_opened_and_never_closed_grow_the_time_linearly(unit: str) -> None:
    """Each BEGIN line looks for its END line only up to the next BEGIN (third probe:
    96 kB of BEGIN lines took 3.5-6 s, each searching 20,000 characters ahead), each
    END line back over its own body only, and an ODBC brace for its close 200
    characters ahead at most."""
    assert _fastest(unit, 80_000) < 100 * _fastest(unit, 5_000)  # 16 times: linear
